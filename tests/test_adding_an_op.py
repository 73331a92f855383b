"""docs/adding-an-op.md, checked: its worked example (Hardswish: ``ops/elementwise.py``, its
kernels in ``kernels/hardswish_kernels.py``, the ``Tensor.hardswish`` line, its verdict in
``kernels/measured.json``) and what registration gives for free: the registry, the verdict,
the backend switch, gradcheck at every order, the every-op check of higher-order rules, the
profiler. Then the doc's warning, measured: a kernel nobody measured does not run by default."""
import numpy as np
import pytest

import minigrad
from minigrad import Tensor, autograd, func, gradcheck, gradgradcheck, jvpcheck, kernels
from minigrad.accelerated import accelerated
from minigrad.kernels.elementwise import contiguous_floats, elementwise
from minigrad.kernels.registry import kernel_for, unregister
from minigrad.ops import elementwise as E
from test_higher_order_ops import op_classes, test_every_op_has_higher_order_rules

nan, inf = np.nan, np.inf
X = [-inf, -4.0, -3.0, -1.0, 0.0, 3.0, 4.0, inf, nan]
# PyTorch 2.13 (CPU, float64): F.hardswish(x); its gradient for y.sum(); the gradient of that
# gradient's sum (autograd.grad with create_graph=True, twice)
TORCH_VALUE = [nan, -0.0, -0.0, -1 / 3, 0.0, 3.0, 4.0, inf, nan]
TORCH_GRAD = [0.0, 0.0, 0.0, 1 / 6, 0.5, 1.0, 1.0, 1.0, 1.0]
TORCH_SECOND = [0.0, 0.0, 0.0, 1 / 3, 1 / 3, 0.0, 0.0, 0.0, 0.0]


def test_the_worked_example_is_registered_measured_and_runs_by_default():
    registered = kernels.registered()       # loads the kernel files
    for function in (E.hardswish, E.hardswish_backward):
        kernel = function.kernel
        assert kernel in registered and kernel.pays, f"{kernel}: verdict {kernel.verdict}"
        assert kernel.verdict["shape"] == "128x19x256"       # the date model's feed-forward hidden layer
        args = kernel.example(np.random.default_rng(0), np.dtype(np.float32), "model")
        with kernels.use_backend("numba"):
            assert function.runs_kernel(args)
        with kernels.use_backend("numpy"):
            assert not function.runs_kernel(args)


@pytest.mark.parametrize("backend", kernels.BACKENDS)
def test_hardswish_is_pytorchs_at_every_order_nan_and_inf_included(backend):
    x = Tensor(np.array(X), requires_grad=True)
    with kernels.use_backend(backend), np.errstate(invalid="ignore"):
        y = x.hardswish()
        g, = autograd.grad(y.sum(), x, create_graph=True)
        second, = autograd.grad(g.sum(), x)
    np.testing.assert_array_equal(y.numpy(), TORCH_VALUE)
    np.testing.assert_array_equal(np.signbit(y.numpy()[1:-1]), np.signbit(TORCH_VALUE[1:-1]))     # -0.0 too
    np.testing.assert_allclose(g.numpy(), TORCH_GRAD, rtol=1e-15)
    np.testing.assert_allclose(second.numpy(), TORCH_SECOND, rtol=1e-15)


@pytest.mark.parametrize("backend", kernels.BACKENDS)
def test_hardswish_derivatives_by_central_differences(backend):
    # away from the kinks at -3 and 3, where a difference quotient straddles two pieces
    x = Tensor(np.array([[-5.0, -2.5, -1.0, 0.0], [0.7, 2.5, 3.5, 6.0]]), requires_grad=True)
    with kernels.use_backend(backend):
        assert gradcheck(lambda t: t.hardswish(), [x])
        assert gradgradcheck(lambda t: t.hardswish(), [x])
        assert jvpcheck(lambda t: t.hardswish(), [x])


def test_the_kernels_equal_the_numpy_functions_in_float32():
    rng = np.random.default_rng(1)
    x = (rng.standard_normal((7, 33)) * 4).astype(np.float32)
    x[0, :5] = (nan, -inf, inf, -3.0, 3.0)
    grad = rng.standard_normal(x.shape).astype(np.float32)
    with np.errstate(invalid="ignore"):
        np.testing.assert_allclose(E.hardswish.kernel.run(x), E.hardswish.numpy(x), rtol=1e-6, equal_nan=True)
        np.testing.assert_allclose(E.hardswish_backward.kernel.run(x, grad), E.hardswish_backward.numpy(x, grad),
                                   rtol=1e-6, atol=1e-7, equal_nan=True)


def test_the_every_op_check_finds_the_new_op_and_its_rules():
    assert E.Hardswish in op_classes()
    test_every_op_has_higher_order_rules()


def _paths(run):
    """{stage: (kernel calls, numpy calls)} of the Hardswish rows of one profiled ``run()``."""
    with kernels.use_backend("numba"), minigrad.profile() as prof:
        run()
    return {stage: (row[2], row[3]) for (name, stage), row in prof.rows.items() if name == "Hardswish"}


def test_the_profiler_shows_which_path_ran_and_a_broadcast_gradient_takes_numpy():
    x = Tensor(np.random.default_rng(2).standard_normal((4, 5)).astype(np.float32), requires_grad=True)
    # a gradient of the model's kind (contiguous, from a matmul): the kernel, both ways
    assert _paths(lambda: x.hardswish().backward(np.ones((4, 5), np.float32))) == \
        {"forward": (1, 0), "backward": (1, 0)}
    # after .sum() the gradient is one number broadcast to (4, 5), a view no elementwise kernel
    # fits (it reads flat contiguous memory): the backward runs the numpy function
    assert _paths(lambda: x.hardswish().sum().backward()) == {"forward": (1, 0), "backward": (0, 1)}


# ------------------------------------------------- the doc's warning: a kernel nobody measured
@accelerated
def softplus(x):
    return np.maximum(x, 0) + np.log1p(np.exp(-np.abs(x)))


@elementwise
def softplus_numba(x):      # exp and log1p per element: Numba's scalar calls, where numpy's are vectorised
    return max(x, 0.0) + np.log1p(np.exp(-abs(x)))


@pytest.fixture
def softplus_kernel():
    kernel_for(softplus, fits=contiguous_floats,
               example=lambda rng, dtype, size: (rng.standard_normal((128, 19, 256)).astype(dtype),))(softplus_numba)
    yield softplus.kernel
    unregister(softplus)


def test_a_kernel_never_measured_is_registered_and_correct_but_does_not_run(softplus_kernel):
    x = np.random.default_rng(3).standard_normal((3, 7)).astype(np.float32)
    assert softplus_kernel in kernels.registered() and softplus_kernel.verdict is None
    np.testing.assert_allclose(softplus_kernel.run(x), softplus.numpy(x), rtol=1e-6)
    with kernels.use_backend("numba"):
        assert not softplus.runs_kernel((x,))
        np.testing.assert_array_equal(softplus(x), softplus.numpy(x))


def test_derivatives_of_the_new_xp_functions():
    """xp.tanh, xp.log1p, xp.sigmoid: the op on Tensors (forward, backward and tangent rules), numpy on arrays."""
    from minigrad.ops import xp
    a = np.random.default_rng(4).standard_normal((3, 4))
    for function, reference in ((xp.tanh, np.tanh), (xp.log1p, np.log1p), (xp.sigmoid, lambda v: 1 / (1 + np.exp(-v)))):
        np.testing.assert_allclose(function(np.abs(a)), reference(np.abs(a)), rtol=1e-12)
        x = Tensor(np.abs(a), requires_grad=True)
        np.testing.assert_allclose(function(x).numpy(), reference(np.abs(a)), rtol=1e-12)
        assert gradcheck(function, [x]) and gradgradcheck(function, [x]) and jvpcheck(function, [x])
    far = np.array([-800.0, 800.0])
    np.testing.assert_array_equal(xp.sigmoid(far), [0.0, 1.0])       # no exp overflows
    np.testing.assert_allclose(func.grad(lambda t: xp.log1p(t).sum())(Tensor(np.array([1e-10]))).numpy(), [1.0])
