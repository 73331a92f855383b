"""Finite-difference gradient checks (float64) for every op, one line per case.

Each case goes through ``helper_test_op`` (tinygrad style): it builds float64
inputs of the given shapes, compares the forward with a numpy reference when
one is given (values and shape), and runs ``minigrad.gradcheck``. Inputs are
kept away from kinks (relu at 0, max ties); ties are tested explicitly. Also
covers broadcasting in every direction. The fused neural-network ops (softmax,
layer norm, cross-entropy, dropout) and gradcheck itself: ``test_nn_ops_gradcheck.py``.
"""
import numpy as np
import pytest

import minigrad as mg
from minigrad import functional as F
from minigrad import Tensor, gradcheck


def make_inputs(shapes, low=-2.0, high=2.0, seed=0, away_from_zero=False):
    rng = np.random.default_rng(seed)
    arrays = []
    for shape in shapes:
        a = rng.uniform(low, high, shape)
        if away_from_zero:   # |a| in [0.2, 2] with random sign
            a = np.sign(rng.standard_normal(shape)) * rng.uniform(0.2, 2.0, shape)
        arrays.append(np.asarray(a, dtype=np.float64))
    return arrays


def helper_test_op(shapes, fn, np_fn=None, low=-2.0, high=2.0, away_from_zero=False, seed=0):
    """Forward vs ``np_fn`` (values and shape), then gradcheck of ``fn`` on every input."""
    arrays = make_inputs(shapes, low, high, seed, away_from_zero)
    tensors = [Tensor(a.copy(), requires_grad=True) for a in arrays]
    if np_fn is not None:
        out = fn(*tensors)
        expected = np.asarray(np_fn(*arrays))
        assert out.shape == expected.shape, f"shape {out.shape} != numpy's {expected.shape}"
        np.testing.assert_allclose(out.numpy(), expected, rtol=1e-7, atol=1e-9)
    assert gradcheck(fn, tensors)


# ------------------------------------------------------------- arithmetic
BROADCAST_PAIRS = [((3, 2), (3, 2)), ((), (3, 2)), ((3, 2), ()), ((2,), (3, 2)), ((3, 2), (2,)),
                   ((1, 2), (3, 2)), ((3, 2), (1, 2)), ((3, 1), (1, 4)), ((1, 4), (3, 1)),
                   ((2, 1, 3, 1), (2, 2, 3, 3)), ((2, 2, 3, 3), (2, 1, 3, 1))]
BINARY = {"add": (lambda a, b: a + b, np.add), "sub": (lambda a, b: a - b, np.subtract),
          "mul": (lambda a, b: a * b, np.multiply), "div": (lambda a, b: a / b, np.divide)}


@pytest.mark.parametrize("shapes", BROADCAST_PAIRS, ids=str)
@pytest.mark.parametrize("op", BINARY)
def test_binary_broadcasting(op, shapes):
    fn, np_fn = BINARY[op]
    if op == "div":
        helper_test_op(shapes, fn, np_fn, low=0.5, high=2.0)
    else:
        helper_test_op(shapes, fn, np_fn)


def test_add_python_scalar(): helper_test_op([(3, 2)], lambda a: a + 2.0, lambda a: a + 2.0)
def test_radd_python_scalar(): helper_test_op([(3, 2)], lambda a: 2.0 + a, lambda a: 2.0 + a)
def test_sub_python_scalar(): helper_test_op([(3, 2)], lambda a: a - 1.5, lambda a: a - 1.5)
def test_rsub_python_scalar(): helper_test_op([(3, 2)], lambda a: 1.5 - a, lambda a: 1.5 - a)
def test_mul_python_scalar(): helper_test_op([(3, 2)], lambda a: a * 3, lambda a: a * 3)
def test_rdiv_python_scalar(): helper_test_op([(3, 2)], lambda a: 3.0 / a, lambda a: 3.0 / a, low=0.5)
def test_div_python_scalar(): helper_test_op([(3, 2)], lambda a: a / 4.0, lambda a: a / 4.0)
def test_neg(): helper_test_op([(3, 2)], lambda a: -a, np.negative)
def test_sub_same_tensor_twice(): helper_test_op([(3,)], lambda a: a - a * a, lambda a: a - a * a)
def test_div_same_tensor(): helper_test_op([(3,)], lambda a: (a + 3) / a, lambda a: (a + 3) / a, low=0.5)


@pytest.mark.parametrize("p", [2, 3, 1, 0, -1, -2, 0.5, 1.5, -0.5, -2.5])
def test_pow_on_positive_inputs(p):
    helper_test_op([(3, 2)], lambda a: a ** p, lambda a: a ** p, low=0.3, high=2.0)


@pytest.mark.parametrize("p", [2, 3, -1])
def test_pow_integer_exponent_on_negative_inputs(p):
    helper_test_op([(4,)], lambda a: a ** p, lambda a: a ** p, low=-2.0, high=-0.3)


def test_pow_numpy_scalar_exponent():
    helper_test_op([(3,)], lambda a: a ** np.float64(1.5), lambda a: a ** 1.5, low=0.3)


# ------------------------------------------------------------------ matmul
MATMUL_SHAPES = [((3, 4), (4, 5)),          # 2-D
                 ((2, 3, 4), (2, 4, 5)),    # batched
                 ((2, 1, 3, 4), (5, 4, 2)), # broadcast batch on the right
                 ((5, 3, 4), (2, 1, 4, 2)), # broadcast batch on the left
                 ((2, 3, 4), (4, 5)),       # (B, T, D) @ (D, F), shared weight
                 ((2, 2, 3, 4), (4, 2)),    # shared weight, two batch dims
                 ((3, 4), (2, 4, 5)),       # shared left matrix
                 ((1, 3, 4), (2, 4, 5)),
                 ((4,), (4, 5)),            # vector @ matrix
                 ((3, 4), (4,)),            # matrix @ vector
                 ((2, 3, 4), (4,)),
                 ((4,), (2, 4, 5)),
                 ((4,), (4,))]              # dot product -> scalar


@pytest.mark.parametrize("shapes", MATMUL_SHAPES, ids=str)
def test_matmul(shapes):
    helper_test_op(shapes, lambda a, b: a @ b, np.matmul)


# --------------------------------------------------------------- reductions
AXES = [None, 0, 1, -1, (0, 2), (-1, 0)]
REDUCTIONS = {"sum": np.sum, "mean": np.mean, "max": np.max}


@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("axis", AXES, ids=str)
@pytest.mark.parametrize("op", REDUCTIONS)
def test_reduction(op, axis, keepdims):
    np_fn = REDUCTIONS[op]
    helper_test_op([(2, 3, 4)], lambda a: getattr(a, op)(axis=axis, keepdims=keepdims),
                   lambda a: np_fn(a, axis=axis, keepdims=keepdims))


@pytest.mark.parametrize("op", REDUCTIONS)
def test_reduction_of_a_scalar(op):
    helper_test_op([()], lambda a: getattr(a, op)() * 3, lambda a: a * 3)


def test_max_with_ties_splits_the_gradient():
    x = Tensor(np.array([[1.0, 3.0, 3.0], [2.0, 2.0, 2.0]]), requires_grad=True)
    x.max(axis=1).backward(np.array([1.0, 6.0]))
    np.testing.assert_allclose(x.grad, [[0, 0.5, 0.5], [2, 2, 2]])


def test_global_max_with_ties_splits_the_gradient():
    x = Tensor(np.array([[5.0, 1.0], [5.0, 5.0]]), requires_grad=True)
    x.max(keepdims=True).sum().backward()
    np.testing.assert_allclose(x.grad, [[1 / 3, 0], [1 / 3, 1 / 3]])


# -------------------------------------------------------------- elementwise
def _gelu_tanh(a):
    return 0.5 * a * (1 + np.tanh(np.sqrt(2 / np.pi) * (a + 0.044715 * a ** 3)))


def test_exp(): helper_test_op([(3, 4)], lambda a: a.exp(), np.exp)
def test_log(): helper_test_op([(3, 4)], lambda a: a.log(), np.log, low=0.2, high=3.0)
def test_sqrt(): helper_test_op([(3, 4)], lambda a: a.sqrt(), np.sqrt, low=0.2, high=3.0)
def test_tanh(): helper_test_op([(3, 4)], lambda a: a.tanh(), np.tanh)
def test_relu(): helper_test_op([(3, 4)], lambda a: a.relu(), lambda a: np.maximum(a, 0), away_from_zero=True)
def test_relu_functional(): helper_test_op([(5,)], F.relu, lambda a: np.maximum(a, 0), away_from_zero=True)
def test_gelu(): helper_test_op([(3, 4)], lambda a: a.gelu(), _gelu_tanh, low=-4.0, high=4.0)
def test_gelu_functional(): helper_test_op([(6,)], F.gelu, _gelu_tanh)


def test_cast_gradient_returns_to_the_source_dtype():
    x = Tensor([1.0, -2.0], requires_grad=True)
    y = x.double()
    assert y.dtype == np.float64
    (y * y).sum().backward()
    assert x.grad.dtype == np.float32
    np.testing.assert_allclose(x.grad, [2, -4])


def test_relu_gradient_is_zero_for_negative_inputs():
    x = Tensor(np.array([-1.0, 2.0, -0.5, 0.5]), requires_grad=True)
    x.relu().sum().backward()
    np.testing.assert_array_equal(x.grad, [0, 1, 0, 1])


# -------------------------------------------------------------------- shape
def test_reshape(): helper_test_op([(2, 3, 4)], lambda a: a.reshape(6, 4), lambda a: a.reshape(6, 4))
def test_reshape_minus_one(): helper_test_op([(2, 3, 4)], lambda a: a.reshape(-1, 3, 2) * a.reshape(4, 3, 2),
                                             lambda a: a.reshape(-1, 3, 2) * a.reshape(4, 3, 2))
def test_reshape_tuple_flat(): helper_test_op([(2, 3)], lambda a: a.reshape((-1,)), lambda a: a.reshape(-1))
def test_transpose_reverse(): helper_test_op([(2, 3, 4)], lambda a: a.transpose(), np.transpose)
def test_transpose_axes(): helper_test_op([(2, 3, 4)], lambda a: a.transpose(2, 0, 1), lambda a: a.transpose(2, 0, 1))
def test_permute(): helper_test_op([(2, 3, 4)], lambda a: a.permute((1, -1, 0)), lambda a: a.transpose(1, 2, 0))
def test_T(): helper_test_op([(3, 4)], lambda a: a.T * a.T, lambda a: a.T * a.T)
def test_swapaxes(): helper_test_op([(2, 3, 4)], lambda a: a.swapaxes(0, -1), lambda a: a.swapaxes(0, -1))


GETITEM = {"int": lambda a: a[1],
           "slices": lambda a: a[:, 1:3],
           "step": lambda a: a[..., ::2],
           "negative_step": lambda a: a[::-1, :, 1],
           "none": lambda a: a[None, 0],
           "ellipsis_none": lambda a: a[-1, ..., None],
           "int_slice_int": lambda a: a[0, :, 2],
           "repeated_rows": lambda a: a[np.array([0, 2, 0, 0])],
           "repeated_list": lambda a: a[[1, 1, 0]],
           "two_index_arrays": lambda a: a[np.array([0, 1, 1, 0, 2]), np.array([1, 2, 2, 1, 0])],
           "array_and_slice": lambda a: a[:, np.array([2, 2, 0])]}


@pytest.mark.parametrize("name", GETITEM)
def test_getitem(name):
    fn = GETITEM[name]
    helper_test_op([(3, 3, 4)], fn, fn)


def test_getitem_with_an_integer_tensor_index():
    ids = np.array([[2, 0], [2, 2]])
    helper_test_op([(3, 4)], lambda a: a[Tensor(ids)], lambda a: a[ids])


def test_embedding_lookup_with_repeated_ids_adds_up():
    table = Tensor(np.arange(8.0).reshape(4, 2), requires_grad=True)
    ids = np.array([[1, 1], [3, 1]])
    table[ids].sum().backward()
    np.testing.assert_array_equal(table.grad, [[0, 0], [3, 3], [0, 0], [1, 1]])


def test_gather_target_logits_with_two_index_arrays():
    rng = np.random.default_rng(1)
    logits, targets = rng.standard_normal((5, 4)), np.array([3, 0, 3, 1, 3])
    rows = np.arange(5)
    helper_test_op([(5, 4)], lambda x: x[rows, targets] * 2.0, lambda x: x[rows, targets] * 2.0)
    x = Tensor(logits, requires_grad=True)
    x[np.array([0, 0, 2]), np.array([1, 1, 3])].sum().backward()
    expected = np.zeros((5, 4))
    expected[0, 1], expected[2, 3] = 2, 1
    np.testing.assert_array_equal(x.grad, expected)


CONCAT_SHAPES = {0: [(1, 3, 4), (2, 3, 4), (3, 3, 4)], 1: [(2, 1, 4), (2, 3, 4), (2, 2, 4)],
                 -1: [(2, 3, 1), (2, 3, 2), (2, 3, 4)]}


@pytest.mark.parametrize("axis", CONCAT_SHAPES)
def test_concatenate(axis):
    shapes = CONCAT_SHAPES[axis]
    helper_test_op(shapes, lambda *xs: mg.concatenate(xs, axis=axis),
                   lambda *xs: np.concatenate(xs, axis=axis))


@pytest.mark.parametrize("axis", [0, 1, 2, -1])
def test_stack(axis):
    helper_test_op([(2, 3)] * 3, lambda *xs: mg.stack(xs, axis=axis), lambda *xs: np.stack(xs, axis=axis))


def test_concatenate_with_a_constant_operand():
    const = Tensor(np.ones((1, 3)))
    helper_test_op([(2, 3)], lambda a: mg.concatenate([a, const, a], axis=0),
                   lambda a: np.concatenate([a, np.ones((1, 3)), a], axis=0))


# ---------------------------------------------------------- where/masked_fill
COND = np.array([[True, False, True, False], [False, False, True, True], [True, True, False, False]])


def test_where(): helper_test_op([(3, 4), (3, 4)], lambda a, b: mg.where(COND, a, b), lambda a, b: np.where(COND, a, b))
def test_where_broadcast(): helper_test_op([(1, 4), (3, 1)], lambda a, b: mg.where(COND, a, b),
                                           lambda a, b: np.where(COND, a, b))
def test_where_python_scalar(): helper_test_op([(3, 4)], lambda a: mg.where(COND, a, 0.0), lambda a: np.where(COND, a, 0.0))
def test_where_tensor_condition(): helper_test_op([(3, 4), (3, 4)], lambda a, b: mg.where(Tensor(COND), a, b),
                                                  lambda a, b: np.where(COND, a, b))
def test_masked_fill(): helper_test_op([(3, 4)], lambda a: a.masked_fill(COND, -1e9), lambda a: np.where(COND, -1e9, a))
def test_masked_fill_broadcast_mask(): helper_test_op([(3, 4)], lambda a: a.masked_fill(COND[:1], 0.5),
                                                      lambda a: np.where(COND[:1], 0.5, a))


def test_fully_masked_row_softmax_has_no_nan():
    rng = np.random.default_rng(0)
    x = Tensor(rng.standard_normal((3, 4)), requires_grad=True)
    mask = np.array([[False, True, False, False], [True] * 4, [False] * 4])
    probs = x.masked_fill(mask, -np.inf).softmax(axis=-1)
    assert np.isfinite(probs.numpy()).all()
    np.testing.assert_array_equal(probs.numpy()[1], 0)
    np.testing.assert_allclose(probs.numpy()[[0, 2]].sum(axis=-1), 1)
    (probs * Tensor(rng.standard_normal((3, 4)))).sum().backward()
    assert np.isfinite(x.grad).all()
    np.testing.assert_array_equal(x.grad[1], 0)
    weights = Tensor(rng.standard_normal((3, 4)))
    assert gradcheck(lambda a: (a.masked_fill(mask, -np.inf).softmax(-1) * weights).sum(), [x])
