"""In-place operators += -= *= /= with PyTorch's rules (see minigrad/inplace.py).

The probes: the textbook SGD loop `with no_grad(): w -= lr * w.grad`
must train the same leaf, and `w -= 0.1` outside no_grad must not silently turn
the weight into a non-leaf.
"""
import numpy as np
import pytest

from minigrad import Tensor, no_grad


def leaf(values):
    return Tensor(np.array(values, dtype=np.float64), requires_grad=True)


def test_hand_written_sgd_loop_trains_the_same_leaf():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((32, 3))
    y = x @ np.array([1.5, -2.0, 0.5])
    w = Tensor(np.zeros(3), requires_grad=True)
    original, array = w, w.data
    for _ in range(200):
        loss = ((Tensor(x) @ w - y) ** 2).mean()
        loss.backward()
        with no_grad():
            w -= 0.1 * w.grad
        w.grad = None
    assert w is original and w.data is array          # the same leaf, updated in place
    assert w.is_leaf and w.requires_grad and w.grad_fn is None
    np.testing.assert_allclose(w.numpy(), [1.5, -2.0, 0.5], atol=1e-6)


@pytest.mark.parametrize("update, expected", [
    (lambda w: w.__iadd__(1.0), [2, 3]), (lambda w: w.__isub__(Tensor(np.array([1.0, 1.0]))), [0, 1]),
    (lambda w: w.__imul__(np.array([2.0, 3.0])), [2, 6]), (lambda w: w.__itruediv__(2), [0.5, 1])])
def test_every_operator_updates_a_leaf_in_place_under_no_grad(update, expected):
    w = leaf([1.0, 2.0])
    with no_grad():
        result = update(w)
    assert result is w and w.is_leaf and w.requires_grad
    np.testing.assert_array_equal(w.numpy(), expected)


@pytest.mark.parametrize("symbol", ["+=", "-=", "*=", "/="])
def test_in_place_on_a_leaf_requiring_grad_outside_no_grad_raises(symbol):
    w = leaf([1.0, 2.0])
    namespace = {"w": w}
    with pytest.raises(RuntimeError, match=r"no_grad\(\).*\.data"):
        exec(f"w {symbol} 0.1", namespace)
    assert namespace["w"] is w and w.is_leaf
    np.testing.assert_array_equal(w.numpy(), [1, 2])       # untouched


def test_in_place_on_an_intermediate_makes_a_new_node_and_keeps_gradients_right():
    x = leaf([1.0, 2.0])
    h = x * x
    before = h
    h += x                         # h = x*x + x: a new tensor; `before` and its op are untouched
    assert h is not before and h.grad_fn is not None
    np.testing.assert_array_equal(before.numpy(), [1, 4])
    (h * before).sum().backward()  # d/dx (x^2 + x) x^2 = 4x^3 + 3x^2
    np.testing.assert_allclose(x.grad, 4 * x.data ** 3 + 3 * x.data ** 2)


def test_plain_tensor_plus_tensor_requiring_grad_records_the_op():
    total = Tensor(np.zeros(2))
    w = leaf([1.0, 2.0])
    total += w * 3
    assert total.requires_grad
    total.sum().backward()
    np.testing.assert_array_equal(w.grad, [3, 3])


def test_plain_tensor_updates_in_place_and_records_the_change():
    t = Tensor(np.array([1.0, 2.0]))
    array = t.data
    t *= 2
    first = t._version[0]
    t += Tensor(np.array([1.0, 1.0]))
    assert t.data is array and 0 < first < t._version[0]
    np.testing.assert_array_equal(t.numpy(), [3, 5])


def test_modifying_a_saved_input_in_place_raises_in_backward():
    w = leaf([1.0, 2.0])
    x = Tensor(np.array([3.0, 4.0]))
    loss = (w * x).sum()           # Mul saved x's array for w's gradient
    x += 1.0
    with pytest.raises(RuntimeError, match="modified in place"):
        loss.backward()


def test_updating_the_weights_between_two_backwards_of_one_graph_raises():
    w = leaf([1.0, 2.0])
    loss = (w * w).sum()
    loss.backward(retain_graph=True)
    with no_grad():
        w -= 0.1 * w.grad
    with pytest.raises(RuntimeError, match=r"Mul: its input 0 .*modified in place"):
        loss.backward()


def test_modifying_an_input_the_op_did_not_save_is_fine():
    w = leaf([1.0, 2.0])
    c = Tensor(np.array([3.0, 4.0]))
    loss = (w + c).sum()           # Add saves nothing
    c += 1.0
    loss.backward()
    np.testing.assert_array_equal(w.grad, [1, 1])


def test_in_place_keeps_the_dtype_and_refuses_what_it_cannot_hold():
    t = Tensor(np.ones(2, np.float32))
    t += np.ones(2)                 # float64 operand, float32 result (same_kind, like PyTorch)
    assert t.dtype == np.float32
    ids = Tensor([1, 2])
    with pytest.raises(TypeError, match="int64"):
        ids /= 2
    with pytest.raises(ValueError, match=r"shape \(2,\) .*shape \(3, 2\)"):
        t += np.ones((3, 2))
