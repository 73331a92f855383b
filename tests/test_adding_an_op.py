"""docs/adding-an-op.md, exercised: a new op with a Numba kernel and higher-order rules, defined
and registered entirely in this file. No other file changes, yet the registry, the backend
switch, the kernel-vs-numpy check, gradcheck, gradgradcheck, jvpcheck, the every-op check of
higher-order rules and the profiler all see it."""
import numpy as np
import pytest

import minigrad
from minigrad import Tensor, func, gradcheck, gradgradcheck, jvpcheck, kernels
from minigrad.accelerated import accelerated
from minigrad.function import Function
from minigrad.kernels.elementwise import contiguous_floats, elementwise
from minigrad.kernels.registry import kernel_for, unregister
from minigrad.ops import xp
from test_higher_order_ops import op_classes, test_every_op_has_higher_order_rules


# ---------------------------------------------------------------- 1. the op file: math and op together
@accelerated
def softplus(x):
    """log(1 + exp(x)), computed as max(x, 0) + log1p(exp(-|x|)) so that no exp overflows."""
    return np.maximum(x, 0) + np.log1p(np.exp(-np.abs(x)))


def sigmoid(x):
    """d softplus / dx = 1 / (1 + exp(-x)), from e = exp(-|x|) <= 1 so that no exp overflows at any
    order; |x| as a selection, whose slope at 0 is 1, not sign(0) = 0 (arrays and Tensors)."""
    positive = xp.constant(x) >= 0
    e = xp.exp(xp.where(positive, -x, x))
    return xp.where(positive, 1 / (1 + e), e / (1 + e))


class Softplus(Function):
    differentiable_backward = True          # the rules below run on arrays and on Tensors

    def forward(self, a):
        return softplus(a)

    def backward(self, grad, *, a):         # reads the input a (a keyword-only parameter named as in forward)
        return grad * sigmoid(a)

    jvp = backward                          # diagonal Jacobian: J v = vᵀ J, the same product


# ---------------------------------------------------------------- 2. a kernel for it (the kernel file)
@elementwise                                # one line: a compiled loop maps it over the array
def softplus_numba(x):
    return max(x, 0.0) + np.log1p(np.exp(-abs(x)))


def _example(rng, dtype, size):
    return (rng.standard_normal((3, 7) if size == "small" else (128, 19, 256)).astype(dtype) * 5,)


@pytest.fixture
def softplus_kernel():
    kernel_for(softplus, fits=contiguous_floats, example=_example, stage=None)(softplus_numba)
    yield softplus.kernel
    unregister(softplus)


# ---------------------------------------------------------------- 3. what comes for free
def test_the_new_kernel_is_in_the_registry_and_equals_its_numpy_function(softplus_kernel):
    assert softplus_kernel in kernels.registered()
    assert softplus_kernel.compiled == (softplus_numba.loop,)     # what the compile-cache checks ask about
    for dtype in (np.float32, np.float64):
        x = _example(np.random.default_rng(0), np.dtype(dtype), "small")[0]
        x[0, :3] = (np.nan, -np.inf, np.inf)
        with kernels.use_backend("numba"):
            got = softplus(x)
        assert got.dtype == x.dtype
        np.testing.assert_allclose(got, softplus.numpy(x), rtol=1e-6, equal_nan=True)


def test_the_new_op_has_correct_derivatives_at_every_order_on_both_backends(softplus_kernel):
    x = Tensor(np.random.default_rng(1).standard_normal((4, 5)) * 3, requires_grad=True)
    for backend in kernels.BACKENDS:
        with kernels.use_backend(backend):
            assert gradcheck(lambda t: Softplus.apply(t), [x])
            assert gradgradcheck(lambda t: Softplus.apply(t), [x])
            assert jvpcheck(lambda t: Softplus.apply(t), [x])


def test_second_derivatives_stay_finite_far_out_in_float32():
    # sigmoid written as 1 / (1 + exp(-x)) would give exp(89) = inf in float32, then 0 * inf = NaN
    x = np.array([-150.0, -89.0, 0.0, 89.0, 150.0], np.float32)
    hessian = func.hessian(lambda t: Softplus.apply(t).sum())(Tensor(x)).numpy()
    e = np.exp(-np.abs(x.astype(np.float64)))
    np.testing.assert_allclose(np.diag(hessian), e / (1 + e) ** 2, rtol=1e-5, atol=1e-44)


def test_the_every_op_check_finds_the_new_op_and_its_rules():
    assert Softplus in op_classes()
    test_every_op_has_higher_order_rules()


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
