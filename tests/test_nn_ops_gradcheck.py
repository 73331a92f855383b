"""Finite-difference gradient checks (float64) of the fused neural-network ops, one line per case.

Softmax and log-softmax (with the fully masked row), layer norm, cross-entropy
(ignore_index, label smoothing), seeded dropout, a small composite, and that
gradcheck itself rejects a wrong backward with a useful message. The helper is
``helper_test_op`` of ``test_ops_gradcheck.py``.
"""
import numpy as np
import pytest

import minigrad as mg
from minigrad import functional as F
from minigrad import GradcheckError, Tensor, gradcheck, ops
from test_ops_gradcheck import helper_test_op


# ------------------------------------------------------------------ softmax
def _np_softmax(a, axis):
    e = np.exp(a - a.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


@pytest.mark.parametrize("axis", [0, 1, 2, -1, -2, -3])
def test_softmax(axis):
    helper_test_op([(2, 3, 4)], lambda a: a.softmax(axis=axis), lambda a: _np_softmax(a, axis))


@pytest.mark.parametrize("axis", [0, 1, 2, -1, -2, -3])
def test_log_softmax(axis):
    helper_test_op([(2, 3, 4)], lambda a: a.log_softmax(axis=axis), lambda a: np.log(_np_softmax(a, axis)))


def test_softmax_functional_large_logits_are_stable():
    helper_test_op([(2, 5)], lambda a: F.softmax(a * 300.0), lambda a: _np_softmax(a * 300.0, -1), low=-1, high=1)


def test_log_softmax_functional(): helper_test_op([(4, 3)], lambda a: F.log_softmax(a, axis=0),
                                                  lambda a: np.log(_np_softmax(a, 0)))


# --------------------------------------------------------------- layer_norm
def _np_layer_norm(x, w, b, eps=1e-5):
    mean = x.mean(-1, keepdims=True)
    var = x.var(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * w + b


@pytest.mark.parametrize("x_shape", [(5, 3), (2, 4, 3), (2, 2, 4, 3)], ids=str)
def test_linear_fused(x_shape):
    helper_test_op([x_shape, (3, 4), (4,)], F.linear, lambda x, w, b: x @ w + b)


def test_linear_without_bias_is_a_matmul():
    helper_test_op([(2, 5, 3), (3, 4)], lambda x, w: F.linear(x, w), lambda x, w: x @ w)


def test_linear_with_repeated_input():
    helper_test_op([(4, 4), (4,)], lambda w, b: F.linear(F.linear(w, w, b), w, b),
                   lambda w, b: (w @ w + b) @ w + b)


def test_layer_norm(): helper_test_op([(2, 3, 5), (5,), (5,)], F.layer_norm, _np_layer_norm)
def test_layer_norm_2d(): helper_test_op([(4, 6), (6,), (6,)], F.layer_norm, _np_layer_norm, seed=3)
def test_layer_norm_defaults(): helper_test_op([(3, 4)], lambda x: F.layer_norm(x), lambda x: _np_layer_norm(x, 1, 0))
def test_layer_norm_eps(): helper_test_op([(3, 4), (4,), (4,)], lambda x, w, b: F.layer_norm(x, w, b, eps=0.1),
                                          lambda x, w, b: _np_layer_norm(x, w, b, eps=0.1))


# ------------------------------------------------------------ cross_entropy
TARGETS = np.array([0, 4, 2, 2, 1, 3])


def _np_cross_entropy(logits, targets, ignore_index=None, label_smoothing=0.0):
    logits, targets = logits.reshape(-1, logits.shape[-1]), targets.reshape(-1)
    logp = np.log(_np_softmax(logits, -1))
    valid = np.ones(len(targets), bool) if ignore_index is None else targets != ignore_index
    safe = np.where(valid, targets, 0)
    nll = -logp[np.arange(len(safe)), safe]
    loss = (1 - label_smoothing) * nll - label_smoothing * logp.mean(-1)
    return loss[valid].sum() / valid.sum()


CE_CASES = {"plain": {}, "ignore_index": {"ignore_index": 2}, "label_smoothing": {"label_smoothing": 0.1},
            "both": {"ignore_index": 2, "label_smoothing": 0.2}}


@pytest.mark.parametrize("case", CE_CASES)
def test_cross_entropy(case):
    kw = CE_CASES[case]
    helper_test_op([(6, 5)], lambda x: F.cross_entropy(x, TARGETS, **kw),
                   lambda x: _np_cross_entropy(x, TARGETS, **kw))


def test_cross_entropy_3d_logits_with_padding():
    targets = np.array([[1, 0, -100], [2, -100, -100]])
    helper_test_op([(2, 3, 4)], lambda x: F.cross_entropy(x, Tensor(targets), ignore_index=-100, label_smoothing=0.1),
                   lambda x: _np_cross_entropy(x, targets, ignore_index=-100, label_smoothing=0.1))


def test_cross_entropy_ignored_rows_get_no_gradient():
    x = Tensor(np.random.default_rng(0).standard_normal((6, 5)), requires_grad=True)
    F.cross_entropy(x, TARGETS, ignore_index=2).backward()
    np.testing.assert_array_equal(x.grad[TARGETS == 2], 0)
    assert np.abs(x.grad[TARGETS != 2]).min() > 0


# ------------------------------------------------------------------ dropout
def _seeded_dropout(p):
    def fn(x):
        mg.manual_seed(123)   # the same mask on every evaluation
        return F.dropout(x, p) * x
    return fn


@pytest.mark.parametrize("p", [0.3, 0.7])
def test_dropout(p):
    helper_test_op([(4, 5)], _seeded_dropout(p))


def test_dropout_gradient_is_the_scaled_mask():
    mg.manual_seed(5)
    x = Tensor(np.ones((50, 40)), requires_grad=True)
    y = F.dropout(x, 0.4)
    y.sum().backward()
    np.testing.assert_allclose(x.grad, y.numpy())   # x = 1, so y is the scaled mask itself
    assert set(np.unique(x.grad)) == {0.0, 1 / 0.6}


# ---------------------------------------------------------------- composite
def test_small_attention_block():
    mask = np.triu(np.ones((3, 3), bool), 1)[None, None]
    helper_test_op([(2, 3, 4), (4, 4), (4, 4)],
                   lambda x, wq, wk: ((x @ wq).reshape(2, 3, 2, 2).transpose(0, 2, 1, 3)
                                      @ (x @ wk).reshape(2, 3, 2, 2).transpose(0, 2, 3, 1) * 0.5)
                   .masked_fill(mask, -np.inf).softmax(-1).sum(axis=1))


# ------------------------------------------------------- gradcheck itself
class WrongMul(ops.Mul):
    def backward(self, grad, *, a, b):
        grad_a, grad_b = super().backward(grad, a=a, b=b)
        return grad_a, grad_b * 1.5      # wrong for input 1


def test_gradcheck_rejects_a_wrong_gradient_and_names_input_element_and_values():
    a = Tensor(np.array([1.0, 2.0]), requires_grad=True)
    b = Tensor(np.array([3.0, 4.0]), requires_grad=True)
    with pytest.raises(GradcheckError) as info:
        gradcheck(lambda x, y: WrongMul.apply(x, y), [a, b])
    message = str(info.value)
    assert "input 1" in message
    assert "element (0,)" in message
    assert "numerical 1 " in message and "analytical 1.5 " in message   # d(ab)/db = a = 1; wrong: 1.5


def test_gradcheck_returns_false_without_raising():
    a = Tensor(np.array([2.0]), requires_grad=True)
    b = Tensor(np.array([3.0]), requires_grad=True)
    assert gradcheck(lambda x, y: WrongMul.apply(x, y), [a, b], raise_exception=False) is False


def test_gradcheck_random_projections_for_large_outputs():
    x = Tensor(np.random.default_rng(0).standard_normal((20, 20)), requires_grad=True)
    assert gradcheck(lambda a: a * a, [x])
    with pytest.raises(GradcheckError, match="random projection"):
        gradcheck(lambda a: WrongMul.apply(a, a * 1.0), [x])


def test_gradcheck_needs_an_input_requiring_grad():
    with pytest.raises(ValueError, match="requires_grad"):
        gradcheck(lambda a: a * 2, [Tensor(np.ones(2))])


def test_gradcheck_promotes_float32_inputs_to_float64():
    x = Tensor([0.5, 1.5], requires_grad=True)
    assert gradcheck(lambda a: a.exp() * a, [x])
    assert x.grad is None and x.dtype == np.float32   # the caller's tensor is untouched


def test_gradcheck_perturbs_non_contiguous_float64_inputs():
    # a transposed float64 array stays Fortran-ordered inside the Tensor
    x = Tensor(np.random.default_rng(0).standard_normal((3, 4)).T, requires_grad=True)
    assert gradcheck(lambda a: a * a, [x])
