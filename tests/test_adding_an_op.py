"""docs/adding-an-op.md, exercised: a new op with a Numba kernel, defined and registered entirely
in this file. No other file changes, yet the registry, the backend switch, the kernel-vs-numpy
check, gradcheck and the profiler all see it."""
import numpy as np
import pytest

import minigrad
from minigrad import Tensor, gradcheck, kernels
from minigrad.function import Function
from minigrad.kernels.jit import jit
from minigrad.accelerated import accelerated
from minigrad.kernels.registry import kernel_for, unregister


# ---------------------------------------------------------------- 1. the math, in numpy (the op file)
@accelerated
def softplus(x):
    """log(1 + exp(x)), computed as max(x, 0) + log1p(exp(-|x|)) so that no exp overflows."""
    return np.maximum(x, 0) + np.log1p(np.exp(-np.abs(x)))


def softplus_backward(x, grad):
    """d softplus / dx = sigmoid(x)."""
    return grad / (1 + np.exp(-x))


class Softplus(Function):
    def forward(self, a):
        self.a = a
        return softplus(a)

    def backward(self, grad):
        return softplus_backward(self.a, grad)


# ---------------------------------------------------------------- 2. a kernel for it (the kernel file)
@jit()
def _softplus_kernel(x, out):
    zero = x.dtype.type(0)
    for i in range(x.shape[0]):
        out[i] = max(x[i], zero) + np.log1p(np.exp(-abs(x[i])))


def _fits(x):
    return x.dtype in (np.float32, np.float64) and x.flags.c_contiguous and x.size > 0


def _example(rng, dtype, size):
    return (rng.standard_normal((3, 7) if size == "small" else (128, 19, 256)).astype(dtype) * 5,)


@pytest.fixture
def softplus_kernel():
    @kernel_for(softplus, fits=_fits, example=_example, compiled=[_softplus_kernel])
    def softplus_numba(x):
        out = np.empty_like(x)
        _softplus_kernel(x.reshape(-1), out.reshape(-1))
        return out
    yield softplus.kernel
    unregister(softplus)


# ---------------------------------------------------------------- 3. what comes for free
def test_the_new_kernel_is_in_the_registry_and_equals_its_numpy_function(softplus_kernel):
    assert softplus_kernel in kernels.registered()
    for dtype in (np.float32, np.float64):
        x = _example(np.random.default_rng(0), np.dtype(dtype), "small")[0]
        x[0, :3] = (np.nan, -np.inf, np.inf)
        with kernels.use_backend("numba"):
            got = softplus(x)
        np.testing.assert_allclose(got, softplus.numpy(x), rtol=1e-6, equal_nan=True)


def test_the_new_op_has_correct_gradients_on_both_backends(softplus_kernel):
    x = Tensor(np.random.default_rng(1).standard_normal((4, 5)) * 3, requires_grad=True)
    for backend in kernels.BACKENDS:
        with kernels.use_backend(backend):
            assert gradcheck(lambda t: Softplus.apply(t), [x])


def test_the_profiler_shows_which_path_ran(softplus_kernel):
    x = Tensor(np.random.default_rng(2).standard_normal((4, 5)), requires_grad=True)
    for backend, path in (("numba", 2), ("numpy", 3)):
        with kernels.use_backend(backend), minigrad.profile() as prof:
            Softplus.apply(x).sum().backward()
        row = prof.rows[("Softplus", "forward")]
        assert row[0] == 1 and row[path] == 1


def test_without_the_kernel_the_numpy_function_runs():
    assert softplus.kernel is None
    x = np.linspace(-3, 3, 7)
    np.testing.assert_array_equal(softplus(x), softplus.numpy(x))
