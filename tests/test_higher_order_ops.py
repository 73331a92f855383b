"""Every op with higher-order rules, checked three ways in float64 against finite differences:
``gradcheck`` (first derivatives), ``gradgradcheck`` (second derivatives through
``backward(create_graph=True)``, and the derivative with respect to the incoming
gradient) and ``jvpcheck`` (forward mode). The cases are the first-order suite's
own tables (``test_ops_gradcheck.py``), so each op is covered with the same
shapes, broadcasting and indexing as its gradcheck; the fused ops (attention with
masked and fully masked rows, cross-entropy, Linear, layer norm) go through the
compositions they equal. Every op class must have rules (checked by walking
``Function``'s subclasses); an op without them says so (a test-local op, at the end).
"""
import numpy as np
import pytest

import minigrad as mg
from minigrad import Tensor, forward_ad, gradcheck, gradgradcheck, jvpcheck
from minigrad import functional as F

from minigrad.function import Function
from test_ops_gradcheck import AXES, BINARY, BROADCAST_PAIRS, CONCAT_SHAPES, COND, GETITEM, MATMUL_SHAPES, make_inputs


# float64 central differences are good to ~1e-9 here: every op is held to relative 1e-6
TOLERANCE = dict(rtol=1e-6, atol=1e-8)


def check_all(shapes, fn, low=-2.0, high=2.0, away_from_zero=False, seed=0):
    arrays = make_inputs(shapes, low, high, seed, away_from_zero)
    tensors = [Tensor(a.copy(), requires_grad=True) for a in arrays]
    assert gradcheck(fn, tensors, **TOLERANCE)
    assert gradgradcheck(fn, tensors, **TOLERANCE)
    assert jvpcheck(fn, tensors, **TOLERANCE)


# ------------------------------------------------------------- arithmetic
@pytest.mark.parametrize("shapes", BROADCAST_PAIRS, ids=str)
@pytest.mark.parametrize("op", BINARY)
def test_binary_broadcasting(op, shapes):
    fn = BINARY[op][0]
    check_all(shapes, fn, **({"low": 0.5} if op == "div" else {}))


SCALAR_CASES = {"add": lambda a: a + 2.0, "radd": lambda a: 2.0 + a, "rsub": lambda a: 1.5 - a,
                "mul": lambda a: a * 3, "rdiv": lambda a: 3.0 / a, "neg": lambda a: -a,
                "used_twice": lambda a: a - a * a, "div_same": lambda a: (a + 3) / a,
                "scalar_base": lambda a: 2.0 ** a, "scalar_base_e": lambda a: np.e ** (a * a)}


@pytest.mark.parametrize("name", SCALAR_CASES)
def test_with_a_constant(name):
    check_all([(3, 2)], SCALAR_CASES[name], low=0.5)


@pytest.mark.parametrize("p", [2, 3, 1, 0, -1, -2, 0.5, 1.5, -0.5, -2.5])
def test_pow_on_positive_inputs(p):
    check_all([(3, 2)], lambda a: a ** p, low=0.3)


@pytest.mark.parametrize("p", [2, 3, -1])
def test_pow_integer_exponent_on_negative_inputs(p):
    check_all([(4,)], lambda a: a ** p, low=-2.0, high=-0.3)


# -------------------------------------------------------------- reductions
@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("axis", AXES, ids=str)
@pytest.mark.parametrize("op", ["sum", "mean", "max", "min"])
def test_reduction(op, axis, keepdims):
    # squared afterwards so that the second derivative is not trivially zero
    check_all([(2, 3, 4)], lambda a: getattr(a, op)(axis=axis, keepdims=keepdims) ** 2)


def test_max_with_ties_forward_mode_averages_the_tied_tangents():
    x = Tensor(np.array([[1.0, 3.0, 3.0], [2.0, 2.0, 2.0]]))
    with forward_ad.dual_level():
        out = forward_ad.make_dual(x, Tensor(np.array([[5.0, 1.0, 2.0], [3.0, 6.0, 0.0]]))).max(axis=1)
        np.testing.assert_allclose(forward_ad.unpack_dual(out).tangent.numpy(), [1.5, 3.0])


# ------------------------------------------------------------- elementwise
ELEMENTWISE = {"exp": (lambda a: a.exp(), {}),
               "log": (lambda a: a.log(), {"low": 0.2, "high": 3.0}),
               "sqrt": (lambda a: a.sqrt(), {"low": 0.2, "high": 3.0}),
               "tanh": (lambda a: a.tanh(), {}),
               "sigmoid": (lambda a: a.sigmoid(), {"low": -4.0, "high": 4.0}),
               "abs": (lambda a: a.abs() * a, {"away_from_zero": True}),
               "clamp": (lambda a: a.clamp(-0.5, 0.7) * a, {"away_from_zero": True}),
               "gelu": (lambda a: a.gelu(), {"low": -4.0, "high": 4.0}),
               "gelu_functional": (F.gelu, {}),
               "cast": (lambda a: a.astype(np.float64) * a, {}),
               "chain": (lambda a: (a.tanh() * a.exp()).sigmoid() / (a * a + 1).sqrt(), {})}


@pytest.mark.parametrize("name", ELEMENTWISE)
def test_elementwise(name):
    fn, options = ELEMENTWISE[name]
    check_all([(3, 4)], fn, **options)


def test_clamp_keeps_inputs_clear_of_its_bounds():
    # check_all's inputs must not sit on a kink, or finite differences straddle it
    a = make_inputs([(3, 4)], away_from_zero=True)[0]
    assert np.min(np.abs(a + 0.5)) > 1e-3 and np.min(np.abs(a - 0.7)) > 1e-3


# ------------------------------------------------------------------- shape
SHAPE_CASES = {"reshape": lambda a: a.reshape(6, 4) * a.reshape(6, 4),
               "reshape_minus_one": lambda a: a.reshape(-1, 3, 2) * a.reshape(4, 3, 2),
               "transpose": lambda a: a.transpose() * a.transpose(),
               "transpose_axes": lambda a: a.transpose(2, 0, 1) ** 2,
               "permute": lambda a: a.permute((1, -1, 0)) ** 3,
               "swapaxes": lambda a: a.swapaxes(0, -1) ** 2}


@pytest.mark.parametrize("name", SHAPE_CASES)
def test_shape(name):
    check_all([(2, 3, 4)], SHAPE_CASES[name])


@pytest.mark.parametrize("name", GETITEM)
def test_getitem(name):
    fn = GETITEM[name]
    check_all([(3, 3, 4)], lambda a: fn(a) ** 2)


def test_getitem_with_an_integer_tensor_index_and_negative_ids():
    ids = np.array([[2, -1], [-3, 2]])
    check_all([(3, 4)], lambda a: a[Tensor(ids)] * a[Tensor(ids)])


@pytest.mark.parametrize("axis", CONCAT_SHAPES)
def test_concatenate(axis):
    check_all(CONCAT_SHAPES[axis], lambda *xs: mg.concatenate(xs, axis=axis) ** 2)


@pytest.mark.parametrize("axis", [0, 1, 2, -1])
def test_stack(axis):
    check_all([(2, 3)] * 3, lambda *xs: mg.stack(xs, axis=axis) ** 2)


def test_concatenate_with_a_constant_operand():
    const = Tensor(np.ones((1, 3)))
    check_all([(2, 3)], lambda a: mg.concatenate([a, const, a], axis=0).tanh())


# ------------------------------------------------------------------- where
WHERE_CASES = {"plain": ([(3, 4), (3, 4)], lambda a, b: mg.where(COND, a, b) ** 2),
               "broadcast": ([(1, 4), (3, 1)], lambda a, b: mg.where(COND, a, b) * a),
               "python_scalar": ([(3, 4)], lambda a: mg.where(COND, a, 0.0) * a),
               "tensor_condition": ([(3, 4), (3, 4)], lambda a, b: mg.where(Tensor(COND), a * b, b))}


@pytest.mark.parametrize("name", WHERE_CASES)
def test_where(name):
    shapes, fn = WHERE_CASES[name]
    check_all(shapes, fn)


# ------------------------------------------------------------------ matmul
@pytest.mark.parametrize("shapes", MATMUL_SHAPES, ids=str)
def test_matmul(shapes):
    check_all(shapes, lambda a, b: (a @ b).tanh())


def test_matmul_of_a_tensor_with_itself():
    check_all([(3, 3)], lambda a: a @ a)


# ---------------------------------------------------- relu, masked_fill, dropout
def test_relu():
    # times a: relu's own second derivative is 0 (away from the kink), the product's is not
    check_all([(3, 4)], lambda a: a.relu() * a, away_from_zero=True)


def test_relu_functional():
    check_all([(5,)], lambda a: F.relu(a) ** 3, away_from_zero=True)


@pytest.mark.parametrize("mask", [COND, COND[:1]], ids=["full", "broadcast"])
def test_masked_fill(mask):
    check_all([(3, 4)], lambda a: a.masked_fill(mask, -1.5) * a)


@pytest.mark.parametrize("p", [0.3, 0.7])
def test_dropout(p):
    def fn(a):
        mg.manual_seed(123)      # the same mask on every evaluation
        return F.dropout(a, p) * a
    check_all([(4, 5)], fn)


# --------------------------------------------------------- softmax, log_softmax
@pytest.mark.parametrize("axis", [0, 1, 2, -1, -2, -3])
@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_softmax_and_log_softmax(op, axis):
    weights = Tensor(np.random.default_rng(1).standard_normal((2, 3, 4)))
    check_all([(2, 3, 4)], lambda a: getattr(a, op)(axis=axis) * weights)


MASK = np.array([[False, True, False, False], [True] * 4, [False] * 4])    # row 1: fully masked


@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_softmax_with_masked_and_fully_masked_rows(op):
    weights = Tensor(np.random.default_rng(2).standard_normal((3, 4)))

    def fn(a):
        out = getattr(a.masked_fill(MASK, -np.inf), op)(-1)
        return (out.masked_fill(MASK, 0.0) if op == "log_softmax" else out) * weights    # -inf * w: NaN
    check_all([(3, 4)], fn)


# ----------------------------------------------------------------- fused ops
def causal(length):
    return np.tril(np.ones((length, length), bool))


ALLOWED_WITH_AN_EMPTY_ROW = causal(4).copy()
ALLOWED_WITH_AN_EMPTY_ROW[2] = False      # query 2 may attend to nothing: zero weights, zero output


@pytest.mark.parametrize("allowed", [np.ones((1, 1, 1, 1), bool), causal(4), ALLOWED_WITH_AN_EMPTY_ROW],
                         ids=["unmasked", "causal", "fully_masked_row"])
def test_fused_self_attention(allowed):
    weights = Tensor(np.random.default_rng(3).standard_normal((2, 4, 4)))
    check_all([(2, 4, 12)], lambda qkv: F.self_attention(qkv, num_heads=2, mask=allowed)[0] * weights)


def test_fused_cross_attention_with_padding_and_a_fully_masked_batch_row():
    allowed = np.ones((2, 1, 1, 5), bool)
    allowed[0, ..., 3:] = False                 # padded keys
    allowed[1, ..., :] = False                  # a source with no visible key at all
    weights = Tensor(np.random.default_rng(4).standard_normal((2, 3, 4)))
    check_all([(2, 3, 4), (2, 5, 8)],
              lambda q, kv: F.cross_attention(q, kv, num_heads=2, mask=allowed)[0] * weights)


CE_CASES = {"plain": {}, "ignore_index": {"ignore_index": 2}, "label_smoothing": {"label_smoothing": 0.1},
            "both": {"ignore_index": 2, "label_smoothing": 0.2}}
TARGETS = np.array([0, 4, 2, 2, 1, 3])


@pytest.mark.parametrize("case", CE_CASES)
def test_cross_entropy(case):
    check_all([(6, 5)], lambda x: F.cross_entropy(x, TARGETS, **CE_CASES[case]))


def test_cross_entropy_3d_logits_with_padding():
    targets = np.array([[1, 0, -100], [2, -100, -100]])
    check_all([(2, 3, 4)], lambda x: F.cross_entropy(x, Tensor(targets), ignore_index=-100, label_smoothing=0.1))


@pytest.mark.parametrize("x_shape", [(5, 3), (2, 4, 3)], ids=str)
def test_linear(x_shape):
    check_all([x_shape, (3, 4), (4,)], lambda x, w, b: F.linear(x, w, b).tanh())


def test_layer_norm():
    check_all([(2, 3, 5), (5,), (5,)], F.layer_norm)


def test_layer_norm_eps():
    check_all([(3, 4), (4,), (4,)], lambda x, w, b: F.layer_norm(x, w, b, eps=0.1))


# ------------------------------------------------------------- every op covered
def op_classes():
    """Every op class defined so far, wherever (minigrad's, and any a test adds as a user would);
    a name starting with "_" marks a base class or a test's deliberately incomplete op."""
    found, todo = [], list(Function.__subclasses__())
    while todo:
        cls = todo.pop()
        todo += cls.__subclasses__()
        if not cls.__name__.startswith("_"):
            found.append(cls)
    return found


def test_every_op_has_higher_order_rules():
    # a rule: a backward (and jvp) that runs on Tensors, or the composition of named ops it equals
    missing = [cls.__name__ for cls in op_classes()
               if not (cls.differentiable_backward and cls.jvp is not Function.jvp) and cls.composition is None]
    assert missing == []


# ------------------------------------------- an op without rules says so
class _Cube(Function):
    """x^3 with a numpy backward and nothing beyond first order (a test's own op)."""

    def forward(self, a):
        return a ** 3

    def backward(self, grad, *, a):
        return grad * 3 * a ** 2


def test_an_op_without_higher_order_rules_says_so_under_create_graph():
    x = Tensor(np.array([0.5, -2.0]), requires_grad=True)
    out = _Cube.apply(x)
    with pytest.raises(RuntimeError, match="_Cube has no double-backward / tangent rule yet"):
        mg.autograd.grad((out * out).sum(), x, create_graph=True)
    (out * out).sum().backward()        # its first-order backward still works
    np.testing.assert_allclose(x.grad, 6 * x.data ** 5)


def test_an_op_without_higher_order_rules_says_so_in_forward_mode():
    with forward_ad.dual_level():
        dual = forward_ad.make_dual(Tensor(np.array([0.5, -2.0])), Tensor(np.ones(2)))
        with pytest.raises(RuntimeError, match="_Cube has no tangent rule yet"):
            _Cube.apply(dual)


def test_differentiating_fused_attention_again_hands_out_its_weights_once():
    qkv = Tensor(np.random.default_rng(5).standard_normal((1, 3, 6)), requires_grad=True)
    weights = []
    out = mg.ops.SelfAttentionCore.apply(qkv, num_heads=1, allowed=causal(3), weights_out=weights)
    g, = mg.autograd.grad((out * out).sum(), qkv, create_graph=True)
    with forward_ad.dual_level():
        mg.ops.SelfAttentionCore.apply(forward_ad.make_dual(qkv.detach(), Tensor(np.ones((1, 3, 6)))),
                                       num_heads=1, allowed=causal(3), weights_out=weights)
    assert len(weights) == 2 and g.requires_grad
