"""gradcheck, gradgradcheck and jvpcheck leave their inputs as they found them: the same
array object with the same bits, the same ``.grad``, even when the function raises (or
Ctrl-C arrives) halfway through the finite differences."""
import numpy as np
import pytest

from minigrad import Tensor, gradcheck, gradgradcheck, jvpcheck


def fresh_inputs():
    x = Tensor(np.array([[0.5, -1.25], [2.0, 0.75]]), requires_grad=True)
    y = Tensor(np.array([[1.5, 0.25], [-0.5, 1.0]]).T, requires_grad=True)   # not C-contiguous
    x.grad = np.array([[7.0, 8.0], [9.0, 10.0]])
    return x, y


def snapshot(tensors):
    return [(t.data, t.data.copy(), t.grad if t.grad is None else t.grad.copy(), id(t.grad)) for t in tensors]


def assert_unchanged(tensors, before):
    for t, (array, values, grad, grad_id) in zip(tensors, before):
        assert t.data is array
        np.testing.assert_array_equal(t.data, values, strict=True)
        assert id(t.grad) == grad_id
        if grad is not None:
            np.testing.assert_array_equal(t.grad, grad)


@pytest.mark.parametrize("check", [gradcheck, gradgradcheck, jvpcheck])
def test_a_passing_check_changes_nothing(check):
    x, y = fresh_inputs()
    w = Tensor(np.array([0.3, -0.2]), requires_grad=True)      # a weight inside the function
    before = snapshot([x, y, w])
    assert check(lambda a, b: (a @ b).tanh() * w, [x, y])
    assert_unchanged([x, y, w], before)


@pytest.mark.parametrize("check", [gradcheck, gradgradcheck, jvpcheck])
@pytest.mark.parametrize("interruption", [RuntimeError("boom"), KeyboardInterrupt()])
def test_an_interrupted_check_restores_its_inputs(check, interruption):
    x, y = fresh_inputs()
    before = snapshot([x, y])
    calls = []

    def f(a, b):
        calls.append(1)
        if len(calls) == 4:    # inside the finite differences: an input is shifted by eps now
            raise interruption
        return ((a @ b).tanh()).sum()

    with pytest.raises(type(interruption)):
        check(f, [x, y])
    assert_unchanged([x, y], before)
