"""Tensor.register_hook and minigrad.autograd_steps (the backward loop as a generator).

Hooks follow PyTorch: called with the gradient (a Tensor) during backward, may
return a replacement, run in registration order, on leaves before ``.grad``
accumulates and on intermediates before the gradient flows on; the handle's
``remove()`` unregisters. ``autograd_steps`` must be exactly what ``backward``
does: same order, same leaf gradients, hooks inside.
"""
import numpy as np
import pytest

import minigrad as mg
from minigrad import Tensor, autograd_steps


def leaf(values):
    return Tensor(np.array(values, dtype=np.float64), requires_grad=True)


def test_hook_on_a_leaf_sees_its_gradient_and_can_replace_it():
    x = leaf([1.0, 2.0])
    seen = []
    x.register_hook(lambda g: seen.append(g.numpy().copy()))
    x.register_hook(lambda g: g * 10)
    (x * x).sum().backward()
    np.testing.assert_array_equal(seen[0], [2, 4])
    np.testing.assert_array_equal(x.grad, [20, 40])


def test_hook_on_an_intermediate_changes_what_flows_to_the_inputs():
    x = leaf([1.0, 2.0])
    h = x * 3
    h.register_hook(lambda g: g.clamp(max=0.5))     # the gradient into h is 2h = [6, 12]
    (h * h).sum().backward()
    np.testing.assert_array_equal(x.grad, [1.5, 1.5])
    assert h.grad is None                            # intermediates keep no .grad unless asked


def test_hooks_run_in_order_and_retain_grad_keeps_the_hooked_value():
    x = leaf([1.0])
    h = x * 1.0
    h.retain_grad()
    order = []
    h.register_hook(lambda g: order.append("first") or g + 1)
    h.register_hook(lambda g: order.append(float(g)) or g * 2)
    (h * 3).sum().backward()
    assert order == ["first", 4.0]
    np.testing.assert_array_equal(h.grad, [8])
    np.testing.assert_array_equal(x.grad, [8])


def test_hook_runs_once_with_the_summed_gradient_of_a_tensor_used_twice():
    x = leaf([1.0, 2.0])
    h = x * 1.0
    calls = []
    h.register_hook(lambda g: calls.append(g.numpy().copy()))
    (h * 2 + h * 5).sum().backward()
    assert len(calls) == 1
    np.testing.assert_array_equal(calls[0], [7, 7])


def test_removed_hook_is_not_called_and_a_handle_is_a_context_manager():
    x = leaf([1.0])
    calls = []
    handle = x.register_hook(lambda g: calls.append(1))
    with x.register_hook(lambda g: g * 0):
        (x * 2).sum().backward()
    np.testing.assert_array_equal(x.grad, [0])
    handle.remove()
    handle.remove()                                  # removing twice is harmless
    x.grad = None
    (x * 2).sum().backward()
    assert calls == [1]
    np.testing.assert_array_equal(x.grad, [2])


def test_hook_errors():
    with pytest.raises(RuntimeError, match="does not require grad"):
        Tensor([1.0]).register_hook(lambda g: g)
    with pytest.raises(TypeError, match="function"):
        leaf([1.0]).register_hook(3)
    x = leaf([1.0, 2.0])
    x.register_hook(lambda g: np.zeros(3))
    with pytest.raises(ValueError, match=r"shape \(3,\) for a tensor of shape \(2,\)"):
        (x * 2).sum().backward()


def test_hook_may_change_its_argument_without_touching_other_gradients():
    a = leaf([1.0])
    b = leaf([1.0])
    s = a + b                  # Add hands the same gradient array to both inputs
    a.register_hook(lambda g: g.data.__imul__(100))
    s.sum().backward()
    np.testing.assert_array_equal(b.grad, [1])


# ------------------------------------------------------------ autograd_steps
def build_graph():
    x = leaf([[1.0, -2.0], [3.0, 0.5]])
    w = leaf([2.0, 3.0])
    y = (x * w).tanh() + x
    return x, w, (y * y).mean()


def test_autograd_steps_is_backward():
    x1, w1, loss1 = build_graph()
    loss1.backward()
    x2, w2, loss2 = build_graph()
    steps = list(autograd_steps(loss2))
    np.testing.assert_array_equal(x1.grad, x2.grad)
    np.testing.assert_array_equal(w1.grad, w2.grad)
    assert [s.fn.name for s in steps] == ["Mean", "Mul", "Add", "Tanh", "Mul"]
    assert all(s.fn.released for s in steps)         # freed as in backward()


def test_autograd_steps_records_grads_aligned_with_inputs_and_unbroadcast():
    x, w, loss = build_graph()
    steps = list(autograd_steps(loss, retain_graph=True))
    product = steps[-1]                              # x * w, w broadcast over rows
    assert product.fn.inputs[0] is x and product.fn.inputs[1] is w
    assert product.input_grads[1].shape == w.shape
    np.testing.assert_allclose(product.input_grads[1], w.grad)
    assert product.grad.shape == (2, 2) and product.tensor.grad_fn is product.fn
    first = steps[0]
    assert first.tensor is loss and first.grad == 1.0
    # inputs that need no gradient get None
    c = Tensor(np.array([1.0, 2.0]))
    only_w = list(autograd_steps((w * c).sum()))
    assert only_w[-1].input_grads[1] is None and only_w[-1].input_grads[0] is not None


def test_autograd_steps_keeps_saved_arrays_alive_during_the_step():
    x = leaf([[1.0, 2.0]])
    mask = np.array([[True, False]])
    y = x.masked_fill(mask, 0.0).sum()
    for step in autograd_steps(y):
        if step.fn.name == "MaskedFill":
            np.testing.assert_array_equal(step.fn.mask, mask)    # the graph drawing reads it
            assert not step.fn.released


def test_autograd_steps_runs_hooks_and_takes_a_seed_gradient():
    x = leaf([1.0, 2.0])
    y = x * 2
    y.register_hook(lambda g: g + 1)
    steps = list(autograd_steps(y, grad=np.array([1.0, 1.0])))
    np.testing.assert_array_equal(steps[0].grad, [2, 2])
    np.testing.assert_array_equal(x.grad, [4, 4])
    assert mg.autograd_steps is autograd_steps
