"""A derivative that is identically zero is zeros, as in torch.func, not an error.

The gradient of ``relu(x).sum()`` is a 0/1 mask computed without any recorded op on x, so
differentiating it again finds an output that does not require grad; torch.func returns
zeros there (its ``_autograd_grad``), and so does ``func.hessian``. Plain ``autograd.grad``
still raises, as PyTorch's does."""
import numpy as np
import pytest

from minigrad import Tensor, autograd, func

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
