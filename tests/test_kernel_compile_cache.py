"""kernels.cache_is_cold(): true exactly when the model's kernels would compile on their next
first call; a forced vector width never uses the cache; and compile_training_kernels()
compiles exactly what a training step runs (the registered kernels of its stages); a damaged
cache record (garbage, a FIFO, a link to /dev/zero) is compiled anew with one note; and the
compile helper dies with a command killed by kill -9."""
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap

import pytest

from processes import alive

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

FORWARD_CALLS = """
import numpy as np
from minigrad import kernels
f = lambda *shape: np.random.default_rng(0).standard_normal(shape).astype(np.float32)
print("cold before:", kernels.cache_is_cold(training=False), "lanes:", kernels.lanes(f(1)))
from minigrad.ops import attention, elementwise, nn_ops
attention.attention(f(2, 3, 8), f(2, 4, 8), f(2, 4, 8), np.ones((1,), bool), 2, 8, (0, 0, 0))
nn_ops.layer_norm(f(3, 8), f(8), f(8), 1e-5)
elementwise.relu(f(3, 8))
print("cold after:", kernels.cache_is_cold(training=False), "training:", kernels.cache_is_cold())
"""

# compile_training_kernels(), then a real training step of a small model: every kernel the
# step runs must already have its code (one signature each, and no compile after the first).
TRAINING_AFTER_PRECOMPILE = """
from minigrad import kernels
from minigrad.kernels.compile_cache import compiled_functions
from transformer.models.encoder_decoder import ModelConfig
from transformer.training.trainer import TrainConfig
from transformer.training.dates import DateTrainer
print("cold before:", kernels.cache_is_cold())
kernels.compile_training_kernels()
print("cold after:", kernels.cache_is_cold())
trainer = DateTrainer(model_config=ModelConfig(d_model=16, num_heads=2, num_encoder_layers=1, num_decoder_layers=1,
                                           d_ff=32), train_config=TrainConfig(steps=2, batch_size=8, eval_every=0,
                                                                              checkpoint_every=0))
trainer.train_step()
for kernel in compiled_functions():
    misses = sum(kernel.stats.cache_misses.values())
    print(kernel.__name__, "signatures", len(kernel.signatures), "compiled here", misses)
"""


def run(script, cache_dir, **env):
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], cwd=REPO, capture_output=True,
                            text=True, timeout=600, env={**os.environ, "NUMBA_CACHE_DIR": cache_dir, **env})
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.mark.slow
def test_cache_is_cold_follows_the_disk_cache():
    with tempfile.TemporaryDirectory() as cache_dir:
        out = run(FORWARD_CALLS, cache_dir)
        assert "cold before: True" in out
        assert "cold after: False training: True" in out  # the backward kernels were never called
        assert "cold before: False" in run(FORWARD_CALLS, cache_dir)  # a new process finds the compiled code


@pytest.mark.slow
def test_a_forced_vector_width_compiles_in_memory_and_leaves_the_cache_alone():
    with tempfile.TemporaryDirectory() as cache_dir:
        out = run(FORWARD_CALLS, cache_dir, MINIGRAD_VECTOR_BYTES="16")
        assert "cold before: True lanes: 4" in out and "cold after: False" in out  # compiled in this process ...
        assert os.listdir(cache_dir) == []                                        # ... and nothing written
        assert "cold before: True lanes: 4" in run(FORWARD_CALLS, cache_dir, MINIGRAD_VECTOR_BYTES="16")


@pytest.mark.slow
def test_compile_training_kernels_compiles_what_a_training_step_runs():
    with tempfile.TemporaryDirectory() as cache_dir:
        out = run(TRAINING_AFTER_PRECOMPILE, cache_dir)
        assert "cold before: True" in out and "cold after: False" in out
        lines = [line.split() for line in out.splitlines() if "signatures" in line]
        assert len(lines) == 9
        for name, _, signatures, _, _, compiled in lines:
            assert signatures == "1", out
            # the forward kernels compile in this process; the child compiled the others
            forward = name in ("_attention_kernel", "_layer_norm_kernel", "relu_loop")
            assert compiled == ("1" if forward else "0"), out


SOFTMAX_CALL = """
import numpy as np
from minigrad.kernels import softmax_kernels
softmax_kernels.softmax(np.ones((2, 3), np.float32))
print("compiled here:", sum(softmax_kernels._softmax_kernel.stats.cache_misses.values()))
"""


@pytest.mark.slow
def test_a_cache_written_for_other_kernel_sources_is_not_used():
    """Numba checks only a kernel's own file: a cache from another version of simd.py (whose
    helpers every kernel inlines) must not be loaded, so the package's sources are recorded."""
    with tempfile.TemporaryDirectory() as cache_dir:
        assert "compiled here: 1" in run(SOFTMAX_CALL, cache_dir)
        assert "compiled here: 0" in run(SOFTMAX_CALL, cache_dir)      # same sources: loaded
        (record,) = [os.path.join(root, name) for root, _, names in os.walk(cache_dir)
                     for name in names if name == "minigrad-kernel-sources"]
        with open(record, "w") as file:
            file.write("the hash of other sources\n")
        assert "compiled here: 1" in run(SOFTMAX_CALL, cache_dir)      # other sources: compiled again
        assert "compiled here: 0" in run(SOFTMAX_CALL, cache_dir)


# --------------------------------------------------------------------------- damaged cache records
# Numba opens and unpickles its cache records as they come: a FIFO in the cache folder blocked
# the first kernel call forever, a link to /dev/zero was read forever, garbage was a traceback.
# Now each is ignored with one note, the kernel compiles, and the record is written anew.
RELU_CALL = """
import numpy as np
from minigrad.ops import elementwise
x = np.array([[-1.0, 2.0, 3.0]], np.float32)
print("kernel runs:", elementwise.relu.runs_kernel((x,)), "sum:", float(elementwise.relu(x).sum()))
"""
RECORDS = {"index": "relu_kernels.relu_loop-*.nbi", "data": "relu_kernels.relu_loop-*.nbc",
           "source hash": "minigrad-kernel-sources"}
RECORD_CORRUPTIONS = {
    "garbage": lambda path: path.write_bytes(b"garbage \xff\xfe not UTF-8, not a pickle\n"),
    "a FIFO": lambda path: os.mkfifo(path),
    "a link to /dev/zero": lambda path: path.symlink_to("/dev/zero"),
}


def _relu_call(cache_dir):
    env = {k: v for k, v in os.environ.items() if k not in ("MINIGRAD_KERNEL_VERDICTS", "MINIGRAD_VECTOR_BYTES")}
    return subprocess.run([sys.executable, "-c", RELU_CALL], capture_output=True, text=True, timeout=300,
                          env={**env, "NUMBA_CACHE_DIR": str(cache_dir), "MINIGRAD_KERNELS": "numba"})


@pytest.fixture(scope="module")
def warm_cache(tmp_path_factory):
    """A cache folder holding the ReLU kernel's compiled code, written by a first call."""
    folder = tmp_path_factory.mktemp("warm-cache")
    result = _relu_call(folder)
    assert result.returncode == 0 and result.stderr == "", result.stderr
    return folder


@pytest.mark.parametrize("corruption", RECORD_CORRUPTIONS)
@pytest.mark.parametrize("record", RECORDS)
def test_a_damaged_cache_record_is_ignored_with_one_note_and_written_anew(warm_cache, tmp_path, record, corruption):
    cache = tmp_path / "cache"
    shutil.copytree(warm_cache, cache)
    [path] = cache.glob("*/" + RECORDS[record])
    path.unlink()
    RECORD_CORRUPTIONS[corruption](path)
    first = _relu_call(cache)          # a FIFO or /dev/zero that blocked would end in TimeoutExpired
    assert first.returncode == 0, first.stderr
    assert "kernel runs: True sum: 5.0" in first.stdout
    lines = first.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"note: Numba cache record {path} ignored ("), first.stderr
    again = _relu_call(cache)
    assert again.returncode == 0 and again.stderr == "", again.stderr     # the record was written anew
    assert "kernel runs: True sum: 5.0" in again.stdout
    assert path.is_file() and not path.is_symlink()


# --------------------------------------------------------------------------- kill -9 while compiling
# A stand-in for the shell that runs a command: it becomes the "subreaper" of what the command
# leaves behind, so it can wait for the orphaned compile helper and tell how that one ended.
KILL_WHILE_COMPILING = r"""
import ctypes, os, subprocess, sys, time
PR_SET_CHILD_SUBREAPER = 36                           # linux/prctl.h: orphans come to us
ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1)
command = subprocess.Popen(sys.argv[1:], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)


def compile_helper():
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/stat") as stat:
                parent = int(stat.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                if parent == command.pid and b"minigrad.kernels.compile_cache" in cmdline.read():
                    return int(entry)
        except (OSError, ValueError, IndexError):      # not a process, or gone meanwhile
            pass


def compiling(pid):          # it has loaded Numba's compiler (LLVM): past its start, compiling
    try:
        with open(f"/proc/{pid}/maps", "rb") as maps:
            return b"llvmlite" in maps.read()
    except OSError:
        return False


helper = None
while helper is None and command.poll() is None:
    helper = compile_helper()
    time.sleep(0.05)
if helper is None:
    sys.exit("the command never started its compile helper (was the cache warm?)")
print("helper", helper, flush=True)
while not compiling(helper) and command.poll() is None:
    time.sleep(0.05)
command.kill()
command.wait()                                         # the helper is ours now
start = time.monotonic()
_, status = os.waitpid(helper, 0)
how = f"signal {os.WTERMSIG(status)}" if os.WIFSIGNALED(status) else f"exit {os.WEXITSTATUS(status)}"
print(f"helper ended by {how} after {time.monotonic() - start:.1f} s", flush=True)
"""


@pytest.mark.slow
def test_the_compile_helper_dies_with_a_command_killed_by_sigkill(tmp_path):
    """dates-train on a cold cache starts a child that compiles the backward kernels (a minute on
    a busy machine). kill -9 of the command must take that child with it: none of the parent's
    code runs then, so the child asks the kernel to kill it when its parent dies. Without that,
    the helper compiled on to the end and exited 0."""
    env = {k: v for k, v in os.environ.items() if k not in ("MINIGRAD_KERNEL_VERDICTS", "MINIGRAD_VECTOR_BYTES")}
    train = [sys.executable, os.path.join(REPO, "examples", "train_dates.py"), "--out", str(tmp_path / "run"),
             "--max-steps", "1", "--d-model", "16", "--heads", "2", "--layers", "1", "--d-ff", "32",
             "--batch-size", "8", "--eval-every", "0", "--no-progress"]
    try:
        result = subprocess.run([sys.executable, "-c", KILL_WHILE_COMPILING, *train], capture_output=True,
                                text=True, timeout=300, env={**env, "NUMBA_CACHE_DIR": str(tmp_path / "cold-cache"),
                                                             "MINIGRAD_KERNELS": "numba"})
    except subprocess.TimeoutExpired as expired:   # stop a helper left running, then fail
        for line in (expired.stdout or b"").decode().splitlines():
            if line.startswith("helper ") and alive(int(line.split()[1])):
                os.kill(int(line.split()[1]), signal.SIGKILL)
        raise
    assert result.returncode == 0, result.stderr
    ended = result.stdout.splitlines()[-1]
    assert ended.startswith("helper ended by signal 9 after "), ended
    assert float(ended.split()[-2]) < 30, ended
