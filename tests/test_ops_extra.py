"""sigmoid, abs, clamp/clip, scalar-base power (2 ** x), min and argmax.

Each differentiable one is gradchecked in float64, with broadcasting where the
op takes a second operand and with the input used twice; the kinks (abs at 0,
clamp at its bounds, min ties) are tested against PyTorch's conventions, whose
expected values are written out by hand below.
"""
import numpy as np
import pytest

from minigrad import functional as F
from minigrad import Tensor, gradcheck

from test_ops_gradcheck import helper_test_op


def leaf(values):
    return Tensor(np.array(values, dtype=np.float64), requires_grad=True)


# ---------------------------------------------------------------- sigmoid
def test_sigmoid(): helper_test_op([(3, 4)], lambda a: a.sigmoid(), lambda a: 1 / (1 + np.exp(-a)), low=-4, high=4)
def test_sigmoid_functional(): helper_test_op([(5,)], F.sigmoid, lambda a: 1 / (1 + np.exp(-a)))
def test_sigmoid_used_twice(): helper_test_op([(4,)], lambda a: a.sigmoid() * a, lambda a: a / (1 + np.exp(-a)))


def test_sigmoid_saturates_without_overflow_or_nan():
    x = Tensor(np.array([-1000.0, -50.0, 0.0, 50.0, 1000.0]), requires_grad=True)
    with np.errstate(over="raise", invalid="raise"):   # no exp(1000) overflow, no inf/inf
        y = x.sigmoid()
    np.testing.assert_allclose(y.numpy(), [0, 1.9287498479639178e-22, 0.5, 1, 1], rtol=1e-12)
    y.sum().backward()
    assert np.isfinite(x.grad).all() and x.grad[2] == 0.25


def test_sigmoid_keeps_float32_and_nan():
    y = Tensor([0.0, np.nan]).sigmoid()
    assert y.dtype == np.float32 and y.numpy()[0] == 0.5 and np.isnan(y.numpy()[1])


# -------------------------------------------------------------------- abs
def test_abs(): helper_test_op([(3, 4)], lambda a: a.abs(), np.abs, away_from_zero=True)
def test_abs_builtin(): helper_test_op([(3,)], lambda a: abs(a) * a, lambda a: np.abs(a) * a, away_from_zero=True)
def test_abs_functional(): helper_test_op([(2, 3)], F.abs, np.abs, away_from_zero=True)


def test_abs_gradient_at_zero_is_zero_like_pytorch():
    x = leaf([-2.0, 0.0, 3.0])
    x.abs().sum().backward()
    np.testing.assert_array_equal(x.grad, [-1, 0, 1])


# ------------------------------------------------------------ clamp / clip
@pytest.mark.parametrize("low, high", [(-0.5, 0.7), (None, 0.3), (-0.2, None)])
def test_clamp(low, high):
    # inputs kept away from the bounds (finite differences straddling a kink are meaningless)
    x = np.array([-1.9, -0.8, -0.35, 0.05, 0.45, 0.9, 1.6])
    fn = lambda a: a.clamp(low, high) * a      # used twice: d/dx = clamp'(x) x + clamp(x)
    assert gradcheck(fn, [Tensor(x, requires_grad=True)])
    np.testing.assert_allclose(Tensor(x).clamp(low, high).numpy(), np.clip(x, low, high))


def test_clip_and_functional_are_clamp():
    x = leaf([-3.0, 0.1, 3.0])
    np.testing.assert_array_equal(x.clip(-1, 1).numpy(), [-1, 0.1, 1])
    np.testing.assert_array_equal(F.clamp(x, max=0.0).numpy(), [-3, 0, 0])
    np.testing.assert_array_equal(F.clip(x, min=0.0).numpy(), [0, 0.1, 3])


def test_clamp_broadcast_bounds_gradcheck():
    low, high = np.array([[-0.5], [0.0]]), np.array([0.5, 1.0, 1.5])
    x = Tensor(np.array([[-0.9, 0.2, 1.2], [0.3, -0.1, 1.7]]), requires_grad=True)
    assert gradcheck(lambda a: a.clamp(low, high), [x])


def test_clamp_gradient_passes_at_the_bounds_like_pytorch():
    # torch.clamp(x, -1, 1).sum().backward() gives x.grad = [0, 1, 1, 1, 0]: the bounds are inside
    x = leaf([-2.0, -1.0, 0.0, 1.0, 2.0])
    x.clamp(-1.0, 1.0).sum().backward()
    np.testing.assert_array_equal(x.grad, [0, 1, 1, 1, 0])


def test_clamp_min_above_max_gives_max_and_no_gradient_like_pytorch():
    x = leaf([-1.0, 0.5, 3.0])
    y = x.clamp(2.0, 1.0)
    np.testing.assert_array_equal(y.numpy(), [1, 1, 1])
    y.sum().backward()
    np.testing.assert_array_equal(x.grad, [0, 0, 0])


def test_clamp_needs_a_bound_and_a_constant_one():
    with pytest.raises(ValueError, match="at least one of min and max"):
        leaf([1.0]).clamp()
    with pytest.raises(TypeError, match="constant"):
        leaf([1.0]).clamp(leaf([0.0]))


def test_clamp_keeps_dtype_and_nan():
    y = Tensor([np.nan, 5.0]).clamp(0, 1)
    assert y.dtype == np.float32 and np.isnan(y.numpy()[0]) and y.numpy()[1] == 1


# ------------------------------------------------------ scalar-base power
@pytest.mark.parametrize("base", [2, 2.5, 0.5, np.e])
def test_scalar_base_pow(base):
    helper_test_op([(3, 2)], lambda a: base ** a, lambda a: base ** a)


def test_scalar_base_pow_used_twice(): helper_test_op([(4,)], lambda a: (2 ** a) * a, lambda a: 2 ** a * a)


def test_array_base_broadcasts():
    base = np.array([[1.5], [3.0]])
    helper_test_op([(3,)], lambda a: base ** a, lambda a: base ** a)


def test_scalar_base_pow_keeps_float32():
    y = 2 ** Tensor([1.0, 3.0])
    assert y.dtype == np.float32
    np.testing.assert_array_equal(y.numpy(), [2, 8])


def test_zero_base_gradient_is_zero_for_nonnegative_exponents_like_pytorch():
    # torch: (0 ** x).sum().backward() with x = [0, 2] gives x.grad = [0, 0], not nan
    x = leaf([0.0, 2.0])
    y = 0.0 ** x
    np.testing.assert_array_equal(y.numpy(), [1, 0])
    y.sum().backward()
    np.testing.assert_array_equal(x.grad, [0, 0])


def test_tensor_base_that_requires_grad_is_refused():
    with pytest.raises(TypeError, match="exp"):
        leaf([2.0]).__rpow__(leaf([1.0]))


# -------------------------------------------------------------------- min
@pytest.mark.parametrize("axis, keepdims", [(None, False), (0, False), (1, True), (-1, False), ((0, 1), True)])
def test_min(axis, keepdims):
    helper_test_op([(3, 4)], lambda a: a.min(axis=axis, keepdims=keepdims),
                   lambda a: np.min(a, axis=axis, keepdims=keepdims))


def test_min_used_twice(): helper_test_op([(2, 3)], lambda a: a.min(axis=0) * a, lambda a: a.min(axis=0) * a)
def test_amin_functional(): helper_test_op([(2, 3)], lambda a: F.amin(a, axis=1), lambda a: a.min(axis=1))


def test_min_with_ties_splits_the_gradient_like_max():
    x = leaf([[1.0, 1.0, 2.0], [0.0, 5.0, 0.0]])
    x.min(axis=1).backward(np.array([1.0, 6.0]))
    np.testing.assert_allclose(x.grad, [[0.5, 0.5, 0], [3, 0, 3]])


def test_min_of_empty_raises():
    with pytest.raises(ValueError, match="empty"):
        Tensor(np.zeros((0, 2))).min()


# ----------------------------------------------------------------- argmax
def test_argmax_is_an_int64_tensor_without_gradient():
    x = leaf([[1.0, 5.0, 5.0], [7.0, 0.0, 1.0]])
    flat, rows, kept = x.argmax(), x.argmax(axis=1), F.argmax(x, axis=-1, keepdims=True)
    assert flat.dtype == np.int64 and not flat.requires_grad and flat.grad_fn is None
    assert int(flat) == 3                                  # of the flattened tensor, like torch.argmax
    np.testing.assert_array_equal(rows.numpy(), [1, 0])    # first of a tie wins
    assert kept.shape == (2, 1)


def test_argmax_treats_nan_as_largest_like_pytorch():
    assert int(Tensor([1.0, np.nan, 3.0]).argmax()) == 1


def test_argmax_errors():
    with pytest.raises(ValueError, match="out of range"):
        Tensor([1.0, 2.0]).argmax(axis=1)
    with pytest.raises(ValueError, match="empty"):
        Tensor(np.zeros(0)).argmax()
