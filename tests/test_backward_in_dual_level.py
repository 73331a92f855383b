"""A plain backward() inside a forward-AD level leaves ``.grad`` a numpy array, as outside
one (PyTorch's ``.grad`` carries no tangent there either), so the optimizers work."""
import numpy as np

from minigrad import Tensor, autograd, forward_ad, optim


def test_plain_backward_inside_a_dual_level_gives_arrays_and_adam_steps():
    w = Tensor(np.array([1.0, 2.0]), requires_grad=True)
    adam = optim.Adam([w], lr=0.1)
    with forward_ad.dual_level():
        x = forward_ad.make_dual(Tensor(np.array([3.0, 4.0])), Tensor(np.array([1.0, 1.0])))
        loss = (w * x).sum()
        loss.backward()
        assert type(w.grad) is np.ndarray
        np.testing.assert_array_equal(w.grad, [3.0, 4.0])
        adam.step()
    np.testing.assert_allclose(w.numpy(), [0.9, 1.9])


def test_grad_inside_a_dual_level_still_carries_tangents():
    w = Tensor(np.array([0.5]), requires_grad=True)
    with forward_ad.dual_level():
        x = forward_ad.make_dual(Tensor(np.array([3.0])), Tensor(np.array([1.0])))
        g, = autograd.grad((w * x).sum(), w)
        assert forward_ad.unpack_dual(g).tangent.item() == 1.0     # d(dloss/dw)/dx = 1
