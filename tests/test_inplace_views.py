"""In-place edits through a view or ``detach()`` are seen by backward, as in
PyTorch: a tensor, its views and its detached copies share one version, so an
edit through any of them makes a backward that saved the data raise."""
import numpy as np
import pytest

import minigrad as mg
from minigrad import Tensor, functional as F, no_grad


def leaf(values):
    return Tensor(np.array(values, dtype=np.float64), requires_grad=True)


def squares():
    x = leaf([1.0, 2.0, 3.0])
    return x, (x * x).sum()          # Mul saved x's array


EDITS = {
    "slice": lambda x: x[0:2],
    "integer then slice": lambda x: x[None][0, 1:],
    "detach": lambda x: x.detach(),
    "reshape": lambda x: x.reshape(3, 1),
    "transpose": lambda x: x.reshape(1, 3).T,
    "view of a detached copy": lambda x: x.detach()[1:],
    "detached copy of a view": lambda x: x[1:].detach(),
}


@pytest.mark.parametrize("alias", EDITS.values(), ids=EDITS.keys())
def test_an_edit_through_a_view_or_detach_makes_backward_raise(alias):
    x, y = squares()
    with no_grad():
        v = alias(x)
        v += 100
    with pytest.raises(RuntimeError, match="input 0 .* was modified in place after Mul saved it"):
        y.backward()


def test_detach_outside_no_grad_is_seen_too():
    x, y = squares()
    d = x.detach()
    d += 100
    with pytest.raises(RuntimeError, match="modified in place"):
        y.backward()


def test_an_edit_of_the_base_is_seen_by_an_op_that_saved_a_view():
    x = leaf([1.0, 2.0, 3.0])
    v = x[1:]
    y = (v * v).sum()
    with no_grad():
        x += 1
    with pytest.raises(RuntimeError, match="modified in place"):
        y.backward()


@pytest.mark.parametrize("copy", [lambda x: x[np.array([0, 1])], lambda x: x.reshape(3, 2).T.reshape(6)],
                         ids=["integer-array index", "reshape that copies"])
def test_an_edit_of_a_copy_is_not_a_change_of_the_original(copy):
    x = leaf(np.arange(6.0))
    y = (x * x).sum()
    with no_grad():
        c = copy(x)
        assert not np.may_share_memory(c.data, x.data)
        c += 100
    y.backward()
    np.testing.assert_array_equal(x.grad, 2 * np.arange(6.0))


def test_edits_before_the_op_or_after_backward_are_fine():
    x = leaf([1.0, 2.0, 3.0])
    with no_grad():
        v = x[0:2]
        v += 1
    y = (x * x).sum()
    y.backward()
    np.testing.assert_array_equal(x.grad, [4.0, 6.0, 6.0])
    with no_grad():
        v += 1                       # after backward: nothing left to protect
    assert x.data.tolist() == [3.0, 4.0, 3.0]


def op_calls():
    """One call of every op (a Function subclass) on fresh float64 leaves."""
    x = leaf(np.arange(1.0, 7.0).reshape(2, 3))
    w = leaf(np.ones((3, 3)))
    mask = np.array([[True, False, True], [False, False, False]])
    none = np.zeros((2, 3), dtype=bool)
    return x, [
        x + 1, x - 1, x * 2, x / 2, -x, x ** 2, 2 ** x, abs(x), x @ w, x.sum(), x.sum(axis=()), x.mean(0),
        x.max(1), x.min(), x.exp(), x.log(), x.sqrt(), x.tanh(), x.sigmoid(), x.clamp(0, 3), x.relu(),
        x.gelu(), x.softmax(), x.log_softmax(), x.masked_fill(mask, 0.0), x.masked_fill(none, 0.0),
        mg.where(mask, x, 0.0), x.reshape(3, 2), x.reshape(6), x.T, x.transpose(1, 0), x[0], x[:, 1:],
        x[..., None], x[np.array([1, 0])], mg.concatenate([x]), mg.stack([x]), x.astype(np.float32),
        x.astype(np.float64), F.layer_norm(x), F.linear(x, w), F.cross_entropy(x, np.array([0, 2])),
        F.dropout(x, 0.5, True)]


def test_every_op_whose_output_shares_its_input_memory_shares_its_version():
    # the rule that makes the tests above work, checked over every op: a result that is
    # a view of the input must say so (returns_view), or an edit through it would go unseen
    x, outputs = op_calls()
    for out in outputs:
        if np.may_share_memory(out.data, x.data):
            assert out.grad_fn is not None and type(out.grad_fn).returns_view, out.grad_fn
            assert out._version is not None and out._version is x._version, out.grad_fn


@pytest.mark.parametrize("op", [lambda x: x.exp(), lambda x: x.tanh(), lambda x: x.sigmoid(), lambda x: x.sqrt()],
                         ids=["exp", "tanh", "sigmoid", "sqrt"])
def test_an_edit_of_an_output_the_op_saved_makes_backward_raise(op):
    x = leaf([1.0, 2.0])
    y = op(x)                        # these ops compute their gradient from their own output
    with no_grad():
        y += 1
    with pytest.raises(RuntimeError, match="its output .* was modified in place"):
        y.sum().backward()


@pytest.mark.parametrize("make", [lambda ps: mg.optim.SGD(ps, lr=0.1), lambda ps: mg.optim.Adam(ps, lr=0.1)],
                         ids=["sgd", "adam"])
def test_an_optimizer_step_between_two_backwards_of_one_graph_makes_the_second_raise(make):
    layer = mg.nn.Linear(3, 2)
    loss = layer(Tensor(np.ones((4, 3), dtype=np.float32))).sum()    # Linear saved the weight
    loss.backward(retain_graph=True)
    make(layer.parameters()).step()
    with pytest.raises(RuntimeError, match="Linear: its input 1 .* was modified in place"):
        loss.backward()
