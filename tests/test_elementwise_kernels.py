"""``@elementwise`` (minigrad/kernels/elementwise.py): a kernel from a one-line scalar function.
ReLU and its backward are made with it and must give numpy's bits (NaN, infinities, -0.0, the
dtype); a kernel it makes is found in Numba's on-disk cache by a fresh process, is compiled
again when its source changes, and releases the GIL (two halves of a training step run
kernels on two threads)."""
import os
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

from minigrad import kernels
from minigrad.kernels.elementwise import contiguous_floats, elementwise
from minigrad.ops import elementwise as E

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SPECIALS = [0.0, -0.0, np.nan, -np.nan, np.inf, -np.inf, 1e-310, -1e-310, 1e-40, -1e-40, 3.5, -3.5]


@pytest.fixture(autouse=True)
def numba_backend():
    with kernels.use_backend("numba"):
        yield


def assert_same_bits(got, want):
    assert got.dtype == want.dtype and got.shape == want.shape
    assert got.tobytes() == want.tobytes(), (got, want)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_relu_kernels_give_numpys_bits(dtype):
    rng = np.random.default_rng(0)
    x = np.concatenate([np.array(SPECIALS, dtype), rng.standard_normal(1000).astype(dtype)]).reshape(4, -1)
    grad = np.concatenate([np.array(SPECIALS[::-1], dtype), rng.standard_normal(1000).astype(dtype)]).reshape(x.shape)
    assert E.relu.runs_kernel((x,)) and E.relu_backward.runs_kernel((x, grad))   # not the numpy function
    assert_same_bits(E.relu(x), E.relu.numpy(x))
    out = E.relu.numpy(x)
    assert_same_bits(E.relu_backward(out, grad), E.relu_backward.numpy(out, grad))


def test_relu_takes_non_contiguous_input():
    x = np.random.default_rng(1).standard_normal((6, 8)).astype(np.float32).T
    assert not contiguous_floats(x)                       # so the numpy function runs
    np.testing.assert_array_equal(E.relu(x), np.maximum(x, 0))


@elementwise
def _axpy(a, x, y):
    return a * x + y


@elementwise
def _cube(x):
    return x * x * x


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_kernel_maps_its_scalar_function_over_arrays_of_any_shape(dtype):
    rng = np.random.default_rng(2)
    a, x, y = (rng.standard_normal((3, 4, 5)).astype(dtype) for _ in range(3))
    assert_same_bits(_axpy(a, x, y), a * x + y)       # no literal: computed in dtype, as numpy does
    assert_same_bits(_cube(x[0]), x[0] * x[0] * x[0])
    assert _cube.__name__ == "_cube" and _axpy.compiled == (_axpy.loop,)


def test_a_scalar_function_it_cannot_map_is_one_clear_error():
    for bad in (lambda: 1.0, lambda a, b, c, d: a, lambda *xs: xs[0], lambda x, *, y: x):
        with pytest.raises(TypeError, match="must take 1 to 3 numbers as plain arguments; write a loop with @jit"):
            elementwise(bad)


KERNEL_MODULE = """
from minigrad.kernels.elementwise import elementwise


@elementwise
def shift(x):
    return x + {shift}


@elementwise
def scale(x):
    return x * 3.0
"""

CALL = """
import numpy as np
import shifted
x = np.zeros(4)
print(shifted.shift(x)[0], shifted.scale(x + 1)[0],
      "compiled here:", sum(sum(k.loop.stats.cache_misses.values()) for k in (shifted.shift, shifted.scale)))
"""


def run_in(folder, cache):
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache), "PYTHONPATH": os.pathsep.join([str(folder), REPO])}
    env.pop("MINIGRAD_VECTOR_BYTES", None)
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(CALL)], cwd=folder, capture_output=True, text=True,
                            env=env, timeout=600)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_each_kernel_is_cached_on_disk_under_its_own_name_and_follows_its_source(tmp_path):
    module = tmp_path / "shifted.py"
    module.write_text(KERNEL_MODULE.format(shift="1.0"))
    cache = tmp_path / "cache"
    assert run_in(tmp_path, cache) == "1.0 3.0 compiled here: 2"
    assert run_in(tmp_path, cache) == "1.0 3.0 compiled here: 0"    # a fresh process loads both loops
    module.write_text(KERNEL_MODULE.format(shift="2.0"))            # same length, same lines: other code
    assert run_in(tmp_path, cache) == "2.0 3.0 compiled here: 2"    # never the old shift's cached loop


@elementwise
def _slow(x):
    for _ in range(20000):                     # a long dependent chain: tens of ms for a few elements
        x = x * 0.999 + 0.001
    return x


def test_a_kernel_releases_the_gil_while_it_runs():
    """While one thread runs a kernel call, another thread's Python keeps running (on one core too:
    the OS shares it). A kernel holding the GIL would stop it for the whole call."""
    x = np.zeros(2000)
    _slow(x[:1])                                # compile (or load) first
    window, stamps = [], []

    def call():
        window.append(time.perf_counter())
        _slow(x)
        window.append(time.perf_counter())
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-4)                 # so a held GIL would be asked back within 0.1 ms
    try:
        thread = threading.Thread(target=call)
        thread.start()
        while thread.is_alive():
            stamps.append(time.perf_counter())
        thread.join()
    finally:
        sys.setswitchinterval(interval)
    start, end = window
    quarter = (end - start) / 4
    assert quarter > 0.002
    # stamps from the middle half of the call: none if the kernel held the GIL (the other thread
    # gets it only between bytecodes, just before the call and just after it)
    assert any(start + quarter < t < end - quarter for t in stamps), (len(stamps), end - start)
