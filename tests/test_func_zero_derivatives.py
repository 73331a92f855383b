"""A derivative that is identically zero is zeros, as in PyTorch, not an error.

The gradient of ``relu(x).sum()`` (and of ``abs(x).sum()``) is computed by an op that reads x
(PyTorch's ``threshold_backward``; ``grad * sgn(x)``) with derivative 0 there: so under
``create_graph=True`` it requires grad, and ``autograd.grad`` of it gives zeros, as in PyTorch
2.13. Where PyTorch's gradient does not read x at all (a selection by a mask, a constant slope:
``clamp``, ``amax``, ``masked_fill``, ``where``, indexing, ``2 * x``), plain ``autograd.grad``
raises in both, and torch.func returns zeros (its ``_autograd_grad``), as ``func`` does."""
import numpy as np
import pytest

from minigrad import Tensor, autograd, func, gradcheck, gradgradcheck, jvpcheck
from minigrad import functional as F
from minigrad.ops import Sign, ThresholdBackward

X = np.array([1.0, -2.0, 3.0])


def test_jacrev_of_the_gradient_of_a_piecewise_linear_function_is_zeros():
    x = Tensor(X.copy())
    jacobian = func.jacrev(func.grad(lambda x: x.relu().sum()))(x)
    np.testing.assert_array_equal(jacobian.numpy(), np.zeros((3, 3)))
    np.testing.assert_array_equal(func.hessian(lambda x: x.relu().sum())(x).numpy(), np.zeros((3, 3)))
    np.testing.assert_array_equal(func.grad(func.grad(lambda x: x.relu().sum().reshape(())))(Tensor(np.array(2.0))).numpy(),
                                  0.0)


def test_a_function_of_no_argument_has_zero_derivatives():
    x = Tensor(np.array([np.inf, 1.0]))     # zeros even at inf (not x * 0)
    np.testing.assert_array_equal(func.jacrev(lambda x: Tensor(np.ones(2)))(x).numpy(), np.zeros((2, 2)))
    np.testing.assert_array_equal(func.grad(lambda x: x.detach().sum())(x).numpy(), np.zeros(2))
    _, vjp_fn = func.vjp(lambda x: Tensor(np.ones(2)), x)
    np.testing.assert_array_equal(vjp_fn(Tensor(np.ones(2)))[0].numpy(), np.zeros(2))
    np.testing.assert_array_equal(func.jvp(lambda x: Tensor(np.array([np.inf])), (x,), (x,))[1].numpy(), [0.0])


def test_real_errors_still_raise():
    x = Tensor(X.copy())
    with pytest.raises(TypeError, match="vjp: f must return a floating-point Tensor, got dtype int64"):
        func.jacrev(lambda x: (x > 0).astype(np.int64))(x)
    with pytest.raises(RuntimeError, match="does not require grad"):
        autograd.grad(Tensor(np.ones(())), Tensor(X.copy(), requires_grad=True))


nan, inf = np.nan, np.inf
POINTS = np.array([1.0, -2.0, 0.0, nan])
DIRECTION = np.array([1.0, inf, nan, 2.0])      # zeros even against inf and NaN, as PyTorch's zero tensor
# PyTorch 2.13, float64: g = autograd.grad(f(x).sum(), x, create_graph=True); g.requires_grad;
# autograd.grad((g * v).sum(), x) and torch.func.jvp of torch.func.grad(f(x).sum()) along v
CONNECTED = {"relu": (lambda x: x.relu(), [1.0, 0.0, 0.0, 1.0]),
             "abs": (lambda x: abs(x), [1.0, -1.0, 0.0, 0.0])}


@pytest.mark.parametrize("name", CONNECTED)
def test_the_gradient_of_relu_and_abs_requires_grad_and_its_derivative_is_zeros(name):
    f, torch_gradient = CONNECTED[name]
    x = Tensor(POINTS.copy(), requires_grad=True)
    g, = autograd.grad(f(x).sum(), x, create_graph=True)
    assert g.requires_grad
    np.testing.assert_array_equal(g.numpy(), torch_gradient)
    with np.errstate(invalid="ignore"):
        second, = autograd.grad((g * Tensor(DIRECTION)).sum(), x)
        tangent = func.jvp(func.grad(lambda t: f(t).sum()), (Tensor(POINTS.copy()),), (Tensor(DIRECTION),))[1]
    np.testing.assert_array_equal(second.numpy(), np.zeros(4))
    np.testing.assert_array_equal(tangent.numpy(), np.zeros(4))
    np.testing.assert_array_equal(func.hessian(lambda t: f(t).sum())(Tensor(POINTS.copy())).numpy(), np.zeros((4, 4)))


# the ones where PyTorch 2.13 raises "element 0 of tensors does not require grad" as well
UNCONNECTED = {"clamp": lambda x: x.clamp(-1.0, 1.0), "clamp_min": lambda x: x.clamp(min=0.0),
               "amax": lambda x: x.max(), "amin": lambda x: x.min(), "amax_axis": lambda x: x.reshape(1, 5).max(-1),
               "masked_fill": lambda x: x.masked_fill(np.array([True, False, True, False, False]), 0.0),
               "where": lambda x: F.where(np.array([True, False, True, False, False]), x, Tensor(np.zeros(5))),
               "getitem": lambda x: x[1:3], "times_two": lambda x: x * 2}


@pytest.mark.parametrize("name", UNCONNECTED)
def test_a_gradient_that_reads_no_input_does_not_require_grad_as_in_pytorch(name):
    x = Tensor(np.array([1.0, -2.0, 3.0, 0.0, -0.5]), requires_grad=True)
    g, = autograd.grad(UNCONNECTED[name](x).sum(), x, create_graph=True)
    assert not g.requires_grad
    with pytest.raises(RuntimeError, match="does not require grad"):
        autograd.grad((g * 2.0).sum(), x)
    np.testing.assert_array_equal(func.jacrev(func.grad(lambda t: UNCONNECTED[name](t).sum()))(x).numpy(),
                                  np.zeros((5, 5)))


@pytest.mark.parametrize("op", [Sign, ThresholdBackward], ids=lambda op: op.__name__)
def test_the_zero_derivative_ops_by_central_differences(op):
    rng = np.random.default_rng(0)
    a = rng.uniform(0.2, 2.0, (3, 4)) * rng.choice([-1.0, 1.0], (3, 4))     # away from 0, the kink
    tensors = [Tensor(a.copy(), requires_grad=True)]
    if op is ThresholdBackward:     # (a relu output, away from 0 on both sides; an incoming gradient)
        tensors = [Tensor(a.copy(), requires_grad=True), Tensor(rng.standard_normal((3, 4)), requires_grad=True)]
    assert gradcheck(op.apply, tensors)
    assert gradgradcheck(op.apply, tensors)
    assert jvpcheck(op.apply, tensors)
