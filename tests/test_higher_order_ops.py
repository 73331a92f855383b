"""Every op with higher-order rules, checked three ways in float64 against finite differences:
``gradcheck`` (first derivatives), ``gradgradcheck`` (second derivatives through
``backward(create_graph=True)``, and the derivative with respect to the incoming
gradient) and ``jvpcheck`` (forward mode). The cases are the first-order suite's
own tables (``test_ops_gradcheck.py``), so each op is covered with the same
shapes, broadcasting and indexing as its gradcheck. Ops without higher-order
rules yet must say so: see the end of this file.
"""
import numpy as np
import pytest

import minigrad as mg
from minigrad import Tensor, forward_ad, gradcheck, gradgradcheck, jvpcheck
from minigrad import functional as F

from test_ops_gradcheck import AXES, BINARY, BROADCAST_PAIRS, CONCAT_SHAPES, COND, GETITEM, make_inputs


def check_all(shapes, fn, low=-2.0, high=2.0, away_from_zero=False, seed=0):
    arrays = make_inputs(shapes, low, high, seed, away_from_zero)
    tensors = [Tensor(a.copy(), requires_grad=True) for a in arrays]
    assert gradcheck(fn, tensors)
    assert gradgradcheck(fn, tensors)
    assert jvpcheck(fn, tensors)


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


# --------------------------------------------- ops whose rules come later
rng = np.random.default_rng(0)
NOT_YET = {"MatMul": lambda a: a @ a,
           "ReLU": lambda a: a.relu(),
           "MaskedFill": lambda a: a.masked_fill(COND[:, :3], 0.0),
           "Softmax": lambda a: a.softmax(axis=-1),
           "LogSoftmax": lambda a: a.log_softmax(axis=-1)}


@pytest.mark.parametrize("name", NOT_YET)
def test_an_op_without_higher_order_rules_says_so_under_create_graph(name):
    x = Tensor(rng.standard_normal((3, 3)), requires_grad=True)
    out = NOT_YET[name](x)
    with pytest.raises(RuntimeError, match=f"{name} has no double-backward / tangent rule yet"):
        mg.autograd.grad((out * out).sum(), x, create_graph=True)
    (out * out).sum().backward()        # its first-order backward still works
    assert isinstance(x.grad, np.ndarray)


@pytest.mark.parametrize("name", NOT_YET)
def test_an_op_without_higher_order_rules_says_so_in_forward_mode(name):
    x = Tensor(rng.standard_normal((3, 3)))
    with forward_ad.dual_level():
        dual = forward_ad.make_dual(x, Tensor(np.ones((3, 3))))
        with pytest.raises(RuntimeError, match=f"{name} has no tangent rule yet"):
            NOT_YET[name](dual)
