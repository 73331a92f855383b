"""Property tests (hypothesis) for gradients under broadcasting.

For random mutually broadcastable shapes, the analytic gradients of + - * /
(and where) must equal the closed form summed over the broadcast axes. The
reference sums with ``np.bincount`` over an index map broadcast to the output
shape, independently of the engine's ``unbroadcast``. Small shapes also go
through gradcheck. Example counts are kept small so the file runs in seconds.
"""
import numpy as np
from hypothesis import given, settings, strategies as st
from hypothesis.extra.numpy import mutually_broadcastable_shapes

import minigrad as mg
from minigrad import Tensor, gradcheck

SHAPES = mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=4, min_side=1, max_side=3)
SEEDS = st.integers(0, 2**32 - 1)
FAST = settings(max_examples=40, deadline=None)

# d(out)/da and d(out)/db elementwise, as functions of the broadcast a, b
LOCAL_GRADS = {
    "add": (lambda a, b: a + b, lambda a, b: np.ones_like(a), lambda a, b: np.ones_like(b)),
    "sub": (lambda a, b: a - b, lambda a, b: np.ones_like(a), lambda a, b: -np.ones_like(b)),
    "mul": (lambda a, b: a * b, lambda a, b: b, lambda a, b: a),
    "div": (lambda a, b: a / b, lambda a, b: 1 / b, lambda a, b: -a / b ** 2),
}


def reduce_to(full, shape, out_shape):
    """Sum ``full`` (of out_shape) onto the elements of an input of ``shape`` that were broadcast."""
    size = int(np.prod(shape))
    owner = np.broadcast_to(np.arange(size).reshape(shape), out_shape)
    return np.bincount(owner.ravel(), weights=full.ravel(), minlength=size).reshape(shape)


def random_arrays(shapes, seed, positive_second=False):
    rng = np.random.default_rng(seed)
    a = rng.uniform(-2, 2, shapes[0])
    b = rng.uniform(0.5, 2, shapes[1]) if positive_second else rng.uniform(-2, 2, shapes[1])
    return np.asarray(a, np.float64), np.asarray(b, np.float64)


@FAST
@given(shapes=SHAPES, seed=SEEDS, op=st.sampled_from(sorted(LOCAL_GRADS)))
def test_binary_op_gradients_match_closed_form(shapes, seed, op):
    forward, da, db = LOCAL_GRADS[op]
    a, b = random_arrays(shapes.input_shapes, seed, positive_second=op == "div")
    ta, tb = Tensor(a, requires_grad=True), Tensor(b, requires_grad=True)
    out = forward(ta, tb)
    assert out.shape == shapes.result_shape
    np.testing.assert_allclose(out.numpy(), forward(a, b))
    upstream = np.random.default_rng(seed + 1).standard_normal(shapes.result_shape)
    out.backward(upstream)
    A, B = np.broadcast_to(a, out.shape), np.broadcast_to(b, out.shape)
    assert ta.grad.shape == a.shape and tb.grad.shape == b.shape
    np.testing.assert_allclose(ta.grad, reduce_to(upstream * da(A, B), a.shape, out.shape), atol=1e-12)
    np.testing.assert_allclose(tb.grad, reduce_to(upstream * db(A, B), b.shape, out.shape), atol=1e-12)


@FAST
@given(shapes=SHAPES, seed=SEEDS, op=st.sampled_from(sorted(LOCAL_GRADS)))
def test_binary_op_gradcheck_on_small_shapes(shapes, seed, op):
    forward = LOCAL_GRADS[op][0]
    a, b = random_arrays(shapes.input_shapes, seed, positive_second=op == "div")
    assert gradcheck(forward, [Tensor(a, requires_grad=True), Tensor(b, requires_grad=True)])


@settings(max_examples=25, deadline=None)
@given(shapes=mutually_broadcastable_shapes(num_shapes=3, min_dims=0, max_dims=3, max_side=3), seed=SEEDS)
def test_where_gradients_route_by_condition(shapes, seed):
    cond_shape, a_shape, b_shape = shapes.input_shapes
    rng = np.random.default_rng(seed)
    cond = rng.random(cond_shape) < 0.5
    a, b = rng.standard_normal(a_shape), rng.standard_normal(b_shape)
    ta, tb = Tensor(a, requires_grad=True), Tensor(b, requires_grad=True)
    out = mg.where(cond, ta, tb)
    np.testing.assert_array_equal(out.numpy(), np.where(cond, a, b))
    upstream = rng.standard_normal(shapes.result_shape)
    out.backward(upstream)
    full_cond = np.broadcast_to(cond, out.shape)
    np.testing.assert_allclose(ta.grad, reduce_to(np.where(full_cond, upstream, 0), a_shape, out.shape))
    np.testing.assert_allclose(tb.grad, reduce_to(np.where(full_cond, 0, upstream), b_shape, out.shape))


@settings(max_examples=30, deadline=None)
@given(shape=st.lists(st.integers(1, 3), min_size=1, max_size=4).map(tuple), data=st.data())
def test_sum_and_mean_gradients_over_random_axes(shape, data):
    axes = data.draw(st.lists(st.integers(-len(shape), len(shape) - 1), unique_by=lambda a: a % len(shape),
                              max_size=len(shape)).map(tuple))
    keepdims = data.draw(st.booleans())
    x = Tensor(np.random.default_rng(len(axes)).standard_normal(shape), requires_grad=True)
    out = x.sum(axis=axes, keepdims=keepdims) * 2 + x.mean(axis=axes, keepdims=keepdims)
    assert out.shape == np.sum(x.numpy(), axis=axes, keepdims=keepdims).shape
    out.sum().backward()
    count = int(np.prod([shape[a] for a in axes]))
    np.testing.assert_allclose(x.grad, np.full(shape, 2 + 1 / count))
