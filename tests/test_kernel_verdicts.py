"""The registry runs a kernel by default only where the kernel benchmark measured it faster than
its numpy twin (minigrad/kernels/measured.json, written by ``examples/benchmark_kernels.py
--record``). Here: every kernel has a verdict, a verdict that says slower keeps the kernel off,
and (slow) each kernel that runs by default is still not slower than its twin at its model shapes."""
import json
import os
import subprocess
import sys
import time

import numpy as np
import pytest

from minigrad import kernels
from minigrad.kernels import registry

KERNELS = kernels.registered()
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_every_registered_kernel_has_a_recorded_verdict_and_every_verdict_a_kernel():
    with open(registry.MEASURED) as file:
        whole = json.load(file)
    keys = {k.key for k in KERNELS}
    missing = sorted(keys - set(whole["kernels"]))
    assert not missing, (f"kernels never measured (they do not run by default): {missing}; run python "
                         "examples/benchmark_kernels.py --record NAME... on a quiet machine (docs/adding-an-op.md)")
    for width, record in [("main", whole)] + sorted(whole.get("other_vector_widths", {}).items()):
        extra = sorted(set(record["kernels"]) - keys)
        assert not extra, f"{width} record: verdicts of kernels that no longer exist: {extra}"
    from minigrad.kernels.simd import VECTOR_BYTES
    recorded = registry.read_verdicts(registry.MEASURED, VECTOR_BYTES * 8)      # what this machine reads
    for kernel in KERNELS:
        verdict = recorded[kernel.key]
        assert kernel.verdict == verdict
        assert kernel.pays == (verdict["kernel_us"] <= verdict["numpy_us"])


def test_a_kernel_measured_slower_or_never_measured_does_not_run_by_default(monkeypatch):
    op = kernels.accelerated(lambda x: x + 1)
    op.__name__ = op.__qualname__ = "plus_one_for_a_test"

    @kernels.kernel_for(op, fits=lambda x: True, example=None)
    def plus_one(x):
        return x + 2        # tells which ran

    registered = op.kernel
    try:
        assert registered.verdict is None and not registered.pays
        with kernels.use_backend("numba"):
            assert op(np.zeros(3))[0] == 1            # never measured: the numpy function
        monkeypatch.setitem(registry.measured(), op.kernel.key,
                            {"shape": "3", "kernel_us": 5.0, "numpy_us": 1.0, "speedup": 0.2})
        assert not registry.Kernel(op, plus_one, lambda x: True, None, None, ()).pays    # measured slower
        monkeypatch.setitem(registry.measured(), op.kernel.key,
                            {"shape": "3", "kernel_us": 1.0, "numpy_us": 5.0, "speedup": 5.0})
        op.kernel = registry.Kernel(op, plus_one, lambda x: True, None, None, ())
        with kernels.use_backend("numba"):
            assert op(np.zeros(3))[0] == 2            # measured faster: the kernel
    finally:
        op.kernel = registered
        registry.unregister(op)
    assert registered not in kernels.registered()


def _one_round(call, n):
    out = []
    for _ in range(n):
        start = time.thread_time()
        call()
        out.append(time.thread_time() - start)
    return out


@pytest.mark.slow
@pytest.mark.parametrize("kernel", [k for k in KERNELS if k.pays], ids=lambda k: k.name)
def test_a_kernel_that_runs_by_default_is_not_slower_than_numpy_at_its_model_shapes(kernel):
    """CPU time of this thread, in alternating rounds, so that a loaded machine slows both alike.
    The margin (1.3x) is for noise; a kernel that loses to numpy loses by more (a one-line
    softplus with exp and log1p per element: 5x at these shapes)."""
    args = kernel.example(np.random.default_rng(0), np.dtype(np.float32), "model")
    kernel.run(*args)   # compiled or loaded from the cache first
    ours, theirs = [], []
    for _ in range(10):
        ours += _one_round(lambda: kernel.run(*args), 5)
        theirs += _one_round(lambda: kernel.op.numpy(*args), 5)
    assert np.median(ours) <= 1.3 * np.median(theirs), \
        f"{kernel}: {np.median(ours) * 1e6:.0f} µs against numpy's {np.median(theirs) * 1e6:.0f} µs"


# --------------------------------------------------------------------------- a damaged verdicts file
# The verdicts file is read at the first kernel call, like a checkpoint: whatever stands at its
# path, the process goes on with numpy's functions and says so in one note, never a traceback
# or a hang. Each case corrupts a copy, which MINIGRAD_KERNEL_VERDICTS points the engine at.
FIRST_CALL = """
import numpy as np
from minigrad import kernels
from minigrad.ops import softmax
x = np.ones((2, 3), np.float32)
print("kernel runs:", softmax.softmax.runs_kernel((x,)), "paying:", sum(k.pays for k in kernels.registered()),
      "sum:", round(float(softmax.softmax(x).sum()), 4))
"""


def _recorded():
    with open(registry.MEASURED, "rb") as file:
        return file.read()


def _with_verdict(field, value):
    record = json.loads(_recorded())
    next(iter(record["kernels"].values()))[field] = value
    return json.dumps(record).encode()


def _content(data):
    """A corruption that writes ``data`` (bytes, or a function that makes them) at the path."""
    return lambda path: path.write_bytes(data() if callable(data) else data)


CORRUPTIONS = {
    "empty": _content(b""),
    "truncated": _content(lambda: _recorded()[:len(_recorded()) // 2]),
    "not JSON": _content(b"kernel verdicts\n"),
    "binary": _content(bytes(range(256)) * 4),
    "a list": _content(b"[]"),
    "null": _content(b"null"),
    "a number": _content(b"42"),
    "no kernels key": _content(lambda: json.dumps({k: v for k, v in json.loads(_recorded()).items()
                                                   if k != "kernels"}).encode()),
    "kernels a list": _content(b'{"kernels": []}'),
    "a verdict a string": _content(b'{"kernels": {"minigrad.ops.softmax.softmax": "fast"}}'),
    "kernel_us a string": _content(lambda: _with_verdict("kernel_us", "232.8")),
    "numpy_us null": _content(lambda: _with_verdict("numpy_us", None)),
    "kernel_us true": _content(lambda: _with_verdict("kernel_us", True)),
    "kernel_us NaN": _content(lambda: _with_verdict("kernel_us", float("nan"))),   # json writes NaN
    "kernel_us negative": _content(lambda: _with_verdict("kernel_us", -1.0)),
    "another width's verdict a string": _content(lambda: json.dumps(
        {**json.loads(_recorded()), "other_vector_widths": {"512": {"kernels": {"k": "fast"}}}}).encode()),
    "another width's record a list": _content(lambda: json.dumps(
        {**json.loads(_recorded()), "other_vector_widths": {"128": []}}).encode()),
    "not UTF-8": _content(lambda: _recorded().replace(b'"how"', b'"h\xe9w"', 1)),
    "UTF-16": _content(lambda: _recorded().decode().encode("utf-16")),
    "nested 100,000 deep": _content(b"[" * 100_000 + b"]" * 100_000),
    "2 MB": _content(lambda: b" " * (2 << 20) + _recorded()),
    "missing": lambda path: None,
    "a folder": lambda path: path.mkdir(),
    "a FIFO": lambda path: os.mkfifo(path),
    "a link to /dev/zero": lambda path: path.symlink_to("/dev/zero"),
    "a link to nowhere": lambda path: path.symlink_to(path.parent / "nowhere.json"),
}


def _first_call(verdicts, **env):
    result = subprocess.run([sys.executable, "-c", FIRST_CALL], cwd=REPO, capture_output=True, text=True,
                            timeout=120, env={**os.environ, "MINIGRAD_KERNELS": "numba",
                                              "MINIGRAD_KERNEL_VERDICTS": str(verdicts), **env})
    return result


def test_a_copy_of_the_recorded_verdicts_runs_the_kernels_without_a_note(tmp_path):
    """The control for the cases below: the same program with an intact copy runs the kernel."""
    copy = tmp_path / "measured.json"
    copy.write_bytes(_recorded())
    result = _first_call(copy)
    assert result.returncode == 0 and result.stderr == "", result.stderr
    assert f"kernel runs: True paying: {sum(kernel.pays for kernel in KERNELS)} sum: 2.0" in result.stdout


@pytest.mark.parametrize("corruption", CORRUPTIONS, ids=list(CORRUPTIONS))
def test_a_damaged_verdicts_file_gives_numpy_and_one_note(tmp_path, corruption):
    verdicts = tmp_path / "measured.json"
    CORRUPTIONS[corruption](verdicts)
    result = _first_call(verdicts)      # a FIFO or /dev/zero that blocked would end in TimeoutExpired
    assert result.returncode == 0, result.stderr
    assert "kernel runs: False paying: 0 sum: 2.0" in result.stdout
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"note: kernel verdicts {verdicts} ignored ("), result.stderr
    assert "numpy" in lines[0] and "benchmark_kernels.py --record" in lines[0]


@pytest.mark.slow
def test_a_command_trains_on_numpy_with_one_note_when_the_verdicts_are_garbage(tmp_path):
    """A real command, with a cold Numba cache: it trains without compiling (no kernel pays, so
    none is compiled ahead) and says why in one line."""
    verdicts = tmp_path / "measured.json"
    verdicts.write_bytes(b'{"kernels": {"minigrad.ops.softmax.softmax": {"kernel_us": "fast"')
    result = subprocess.run(
        [sys.executable, os.path.join(REPO, "examples", "train_dates.py"), "--out", str(tmp_path / "run"),
         "--max-steps", "2", "--d-model", "16", "--heads", "2", "--layers", "1", "--d-ff", "32", "--batch-size", "8",
         "--eval-every", "0", "--no-progress"],
        capture_output=True, text=True, timeout=600,
        env={**os.environ, "MINIGRAD_KERNELS": "numba", "MINIGRAD_KERNEL_VERDICTS": str(verdicts),
             "NUMBA_CACHE_DIR": str(tmp_path / "numba-cache")})
    assert result.returncode == 0, result.stderr
    assert "step     2" in result.stdout and (tmp_path / "run" / "model.npz").is_file()
    assert result.stderr.splitlines() == [f"note: kernel verdicts {verdicts} ignored (not JSON): every op runs its "
                                          "numpy function; python examples/benchmark_kernels.py --record writes "
                                          "them anew"], result.stderr
