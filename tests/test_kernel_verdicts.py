"""The registry runs a kernel by default only where the kernel benchmark measured it faster than
its numpy twin (minigrad/kernels/measured.json, written by ``examples/benchmark_kernels.py
--record``). Here: every kernel has a verdict, a verdict that says slower keeps the kernel off,
and (slow) each kernel that runs by default is still not slower than its twin at its model shapes."""
import json
import time

import numpy as np
import pytest

from minigrad import kernels
from minigrad.kernels import registry

KERNELS = kernels.registered()


def test_every_registered_kernel_has_a_recorded_verdict_and_every_verdict_a_kernel():
    with open(registry.MEASURED) as file:
        recorded = json.load(file)["kernels"]
    keys = {k.key for k in KERNELS}
    missing = sorted(keys - set(recorded))
    assert not missing, (f"kernels never measured (they do not run by default): {missing}; "
                         "run python examples/benchmark_kernels.py --record on a quiet machine")
    assert set(recorded) <= keys, f"verdicts of kernels that no longer exist: {sorted(set(recorded) - keys)}"
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
