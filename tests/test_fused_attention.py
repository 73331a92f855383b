"""The fused attention ops (minigrad.ops.SelfAttentionCore / CrossAttentionCore, F.self_attention /
F.cross_attention)
and its Numba kernel, against the step-by-step composition and the numpy twin.
(The ReLU kernels, added with it: tests/test_elementwise_kernels.py.)
"""
import numpy as np
import pytest

from minigrad import Tensor, gradcheck, kernels
from minigrad import functional as F
from minigrad.kernels import attention_kernels
from minigrad.ops import attention as A
from transformer.models.attention import CrossAttention, SelfAttention, causal_mask, scaled_dot_product_attention


def rand(shape, dtype=np.float64, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def split(x, heads):
    batch, length, width = x.shape
    return x.reshape(batch, length, heads, width // heads).transpose(0, 2, 1, 3)


def step_by_step(q, k, v, heads, mask):
    """The composition the fused op replaces, on tensors: split, attend, merge."""
    out, weights = scaled_dot_product_attention(*(Tensor(split(x, heads)) for x in (q, k, v)), mask)
    batch, _, length, depth = out.shape
    return out.data.transpose(0, 2, 1, 3).reshape(batch, length, heads * depth), weights.data


# (batch, heads, Tq, Tk, d_head): the model's shapes, rows not a multiple of 4, a head narrower
# and one wider than a vector, and rows longer than two vectors (the long softmax path)
SHAPES = [(2, 4, 19, 19, 16), (3, 2, 5, 7, 3), (2, 3, 6, 12, 20), (2, 1, 9, 40, 8), (1, 2, 1, 1, 4)]


def attend(q, k, v, allowed, heads):
    """(output, weights) of the op's function, q, k and v separate arrays."""
    return A.attention(q, k, v, allowed, heads, q.shape[2], (0, 0, 0))


def backward(grad, q, k, v, weights, allowed, heads):
    """(dq, dk, dv) from the op's backward function, q, k and v separate arrays."""
    return A.attention_backward(grad, q, k, v, weights, allowed, heads, (0, 0, 0))


def masks(batch, heads, q_len, k_len, rng):
    yield None
    yield rng.random((batch, 1, 1, k_len)) > 0.3                  # padding-style
    yield np.tril(np.ones((q_len, k_len), bool))                   # causal-style, 2-D
    yield rng.random((batch, heads, q_len, k_len)) > 0.5           # every entry its own
    full = rng.random((batch, 1, q_len, k_len)) > 0.4
    full[0, 0, 0] = False                                          # a query row with no key at all
    yield full


@pytest.mark.parametrize("backend", ["numba", "numpy"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_fused_values_and_gradients_match_the_composition(shape, dtype, backend):
    batch, heads, q_len, k_len, depth = shape
    rng = np.random.default_rng(1)
    q, k, v = rand((batch, q_len, heads * depth), dtype, 1), rand((batch, k_len, heads * depth), dtype, 2), \
        rand((batch, k_len, heads * depth), dtype, 3)
    grad = rand((batch, q_len, heads * depth), dtype, 4)
    tol = dict(rtol=2e-4, atol=2e-5) if dtype == np.float32 else dict(rtol=1e-10, atol=1e-12)
    with kernels.use_backend(backend):
        for mask in masks(batch, heads, q_len, k_len, rng):
            want_out, want_weights = step_by_step(q, k, v, heads, mask)
            allowed = np.ones((1,), bool) if mask is None else mask
            out, weights = attend(q, k, v, allowed, heads)
            assert out.dtype == dtype and weights.dtype == dtype
            np.testing.assert_allclose(out, want_out, **tol)
            np.testing.assert_allclose(weights, want_weights, **tol)
            want = A.attention_backward.numpy(grad, q, k, v, want_weights.astype(dtype), allowed, heads, (0, 0, 0))
            for got, expected in zip(backward(grad, q, k, v, weights, allowed, heads), want):
                np.testing.assert_allclose(got, expected, **tol)


@pytest.mark.parametrize("backend", ["numba", "numpy"])
def test_backward_of_packed_inputs_and_refusing_overlapping_ones(backend):
    """Packed projections (one array, disjoint columns) get one gradient array in the same
    layout; overlapping columns are one clear error."""
    qkv, grad = rand((2, 5, 24), np.float32), rand((2, 5, 8), np.float32, 1)
    with kernels.use_backend(backend):
        out, weights = A.attention(qkv, qkv, qkv, np.ones((1,), bool), 2, 8, (0, 8, 16))
        everywhere = np.ones((1,), bool)
        d_qkv, d_k, d_v = A.attention_backward(grad, qkv, qkv, qkv, weights, everywhere, 2, (0, 8, 16))
        assert d_qkv is d_k is d_v and d_qkv.shape == qkv.shape
        parts = (qkv[..., :8].copy(), qkv[..., 8:16].copy(), qkv[..., 16:].copy())
        want = A.attention_backward.numpy(grad, *parts, weights, everywhere, 2, (0, 0, 0))
        np.testing.assert_allclose(d_qkv, np.concatenate(want, axis=-1), rtol=2e-4, atol=2e-5)
        with pytest.raises(ValueError, match=r"q, k and v overlap \(one array, columns \(0, 4, 16\), width 8\)"):
            A.attention_backward(grad, qkv, qkv, qkv, weights, everywhere, 2, (0, 4, 16))


def test_nan_from_a_masked_score_redoes_the_call_exactly():
    """A +inf key score that is masked: the bias add gives NaN; the call is redone as np.where does."""
    q, k, v = rand((1, 6, 8), np.float32), rand((1, 5, 8), np.float32, 1), rand((1, 5, 8), np.float32, 2)
    k[0, 3] = np.inf
    allowed = np.ones((1, 1, 1, 5), bool)
    allowed[..., 3] = False
    with np.errstate(invalid="ignore"):  # q . inf is NaN where q's signs differ: masked anyway
        out, weights = attend(q, k, v, allowed, 2)
        want_out, want_weights = A.attention.numpy(q, k, v, allowed, 2, 8, (0, 0, 0))
    assert np.isfinite(out).all() and (weights[..., 3] == 0).all()
    np.testing.assert_array_equal(out, want_out)
    np.testing.assert_array_equal(weights, want_weights)


def test_fully_masked_row_gives_zero_weights_output_and_gradient():
    q, k, v = rand((1, 3, 8)), rand((1, 4, 8), seed=1), rand((1, 4, 8), seed=2)
    mask = np.ones((1, 1, 3, 4), bool)
    mask[0, 0, 1] = False
    out, weights = attend(q, k, v, mask, 2)
    assert not np.isnan(out).any() and not np.isnan(weights).any()
    assert (weights[0, :, 1] == 0).all() and (out[0, 1] == 0).all()
    dq, dk, dv = backward(np.ones_like(out), q, k, v, weights, mask, 2)
    assert (dq[0, 1] == 0).all() and np.isfinite(dk).all() and np.isfinite(dv).all()


def test_masked_keys_get_exactly_zero_weight_and_gradient():
    q, k, v = rand((2, 5, 8)), rand((2, 6, 8), seed=1), rand((2, 6, 8), seed=2)
    mask = np.ones((2, 1, 1, 6), bool)
    mask[0, ..., 4:] = False
    out, weights = attend(q, k, v, mask, 2)
    assert (weights[0, :, :, 4:] == 0).all()
    _, dk, dv = backward(rand(out.shape, seed=5), q, k, v, weights, mask, 2)
    assert (dk[0, 4:] == 0).all() and (dv[0, 4:] == 0).all()
    assert (np.abs(dk[0, :4]).sum(axis=-1) > 0).all()


def step_by_step_packed(parts, heads, mask):
    """The op-by-op composition on tensors, from packed inputs: ``parts`` = (qkv,) or (q, kv);
    Q, K, V are column blocks of them, as ``SelfAttention``/``CrossAttention`` split them."""
    width = parts[0].shape[-1] // (3 if len(parts) == 1 else 1)
    blocks = [t[..., i * width:(i + 1) * width] for t in parts for i in range(t.shape[-1] // width)]
    batch, length = parts[0].shape[:2]
    heads_of = lambda x: x.reshape(x.shape[0], x.shape[1], heads, width // heads).transpose(0, 2, 1, 3)  # noqa
    out, weights = scaled_dot_product_attention(*(heads_of(b) for b in blocks), mask)   # (B, h, Tq, d)
    return out.transpose(0, 2, 1, 3).reshape(batch, length, width), weights.data


def fused_packed(parts, heads, mask):
    return (F.self_attention if len(parts) == 1 else F.cross_attention)(*parts, heads, mask)


def self_attention_masks(batch, heads, length, rng):
    yield None
    yield causal_mask(length)[None, None]
    yield rng.random((batch, 1, 1, length)) > 0.3                   # padding-style
    full = causal_mask(length)[None, None] & (rng.random((batch, heads, 1, length)) > 0.3)
    full[0, 0, 1] = False                                           # a query row with no key at all
    yield full


@pytest.mark.parametrize("mask", ["none", "causal", "padding", "fully masked row"])
def test_gradcheck_of_fused_self_attention(mask):
    qkv = Tensor(rand((2, 5, 18)), requires_grad=True)
    allowed = dict(zip(["none", "causal", "padding", "fully masked row"],
                       self_attention_masks(2, 3, 5, np.random.default_rng(0))))[mask]
    assert gradcheck(lambda qkv: F.self_attention(qkv, 3, allowed)[0], [qkv])


@pytest.mark.parametrize("mask", ["none", "padding", "fully masked row"])
def test_gradcheck_of_fused_cross_attention(mask):
    q, kv = Tensor(rand((2, 3, 6)), requires_grad=True), Tensor(rand((2, 5, 12), seed=1), requires_grad=True)
    padding = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], bool)[:, None, None, :]
    fully = np.broadcast_to(padding, (2, 1, 3, 5)).copy()
    fully[1, 0, 2] = False
    allowed = {"none": None, "padding": padding, "fully masked row": fully}[mask]
    assert gradcheck(lambda q, kv: F.cross_attention(q, kv, 2, allowed)[0], [q, kv])


@pytest.mark.parametrize("backend", ["numba", "numpy"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kind", ["self", "cross"])
def test_fused_ops_match_the_composition_values_and_gradients(kind, dtype, backend):
    """At the model's shapes (4 heads of 16, T = 19 queries, 19 or 12 keys): the fused op and
    the op-by-op path give the same output, weights and gradient of every input."""
    rng = np.random.default_rng(2)
    batch, heads, width, q_len = 3, 4, 64, 19
    k_len = q_len if kind == "self" else 12
    shapes = [(batch, q_len, 3 * width)] if kind == "self" else [(batch, q_len, width), (batch, k_len, 2 * width)]
    data = [rand(shape, dtype, seed) for seed, shape in enumerate(shapes)]
    grad = rand((batch, q_len, width), dtype, 9)
    tol = dict(rtol=2e-4, atol=2e-5) if dtype == np.float32 else dict(rtol=1e-10, atol=1e-12)
    chosen = list(self_attention_masks(batch, heads, q_len, rng)) if kind == "self" else \
        [None, rng.random((batch, 1, 1, k_len)) > 0.3, rng.random((batch, heads, q_len, k_len)) > 0.6]
    with kernels.use_backend(backend):
        for mask in chosen:
            results = []
            for attend in (fused_packed, step_by_step_packed):
                parts = [Tensor(x, requires_grad=True) for x in data]
                out, weights = attend(parts, heads, mask)
                out.backward(grad)
                results.append((out.data, weights, [p.grad for p in parts]))
            (out, weights, grads), (want_out, want_weights, want_grads) = results
            assert out.dtype == dtype and all(g.dtype == dtype for g in grads)
            np.testing.assert_allclose(out, want_out, **tol)
            np.testing.assert_allclose(weights, want_weights, **tol)
            for got, expected in zip(grads, want_grads):
                np.testing.assert_allclose(got, expected, **tol)


def test_each_op_returns_one_gradient_per_input_in_its_layout():
    qkv = Tensor(rand((2, 4, 12)), requires_grad=True)
    out, _ = F.self_attention(qkv, 2)
    assert out.shape == (2, 4, 4) and len(out.grad_fn.inputs) == 1
    assert out.grad_fn.backward(np.ones(out.shape)).shape == qkv.shape
    q, kv = Tensor(rand((2, 3, 4)), requires_grad=True), Tensor(rand((2, 5, 8)), requires_grad=True)
    out, _ = F.cross_attention(q, kv, 2)
    assert out.shape == (2, 3, 4) and len(out.grad_fn.inputs) == 2
    d_q, d_kv = out.grad_fn.backward(np.ones(out.shape))
    assert d_q.shape == q.shape and d_kv.shape == kv.shape


@pytest.mark.parametrize("kind", ["self", "cross"])
def test_fused_and_step_by_step_modules_agree_in_float32(kind):
    """The model's own shapes and dtype, a padding mask with a fully masked query row: values
    and every parameter's gradient."""
    grads, outputs = [], []
    x, memory = rand((4, 19, 64), np.float32), rand((4, 12, 64), np.float32, 1)
    if kind == "self":
        mask = np.broadcast_to(causal_mask(19)[None, None] & (np.arange(19) < 15), (4, 1, 19, 19)).copy()
    else:
        mask = np.broadcast_to((np.arange(12) < 9)[None, None, None, :], (4, 1, 19, 12)).copy()
    mask[2, 0, 3] = False                                          # one query row sees no key
    for fused in (True, False):
        module = (SelfAttention if kind == "self" else CrossAttention)(64, 4, fused=fused)
        for i, p in enumerate(module.parameters()):
            p.data = rand(p.shape, np.float32, i) * 0.2
        xt, mt = Tensor(x, requires_grad=True), Tensor(memory, requires_grad=True)
        out = module(xt, mask) if kind == "self" else module(xt, mt, mask)
        (out * Tensor(rand(out.shape, np.float32, 7))).sum().backward()
        outputs.append(out.data)
        grads.append([xt.grad] + ([] if kind == "self" else [mt.grad]) + [p.grad for p in module.parameters()])
    np.testing.assert_allclose(outputs[0], outputs[1], rtol=1e-4, atol=1e-5)
    for fused_grad, plain_grad in zip(*grads):
        np.testing.assert_allclose(fused_grad, plain_grad, rtol=1e-3, atol=1e-4)


def test_fused_op_errors_name_the_shapes():
    with pytest.raises(ValueError, match=r"qkv must be \(batch, length, 3 \* width\).*got shape \(2, 3, 8\)"):
        F.self_attention(Tensor(rand((2, 3, 8))), 2)
    with pytest.raises(ValueError, match=r"q \(2, 3, 8\) and kv \(2, 4, 12\) do not fit"):
        F.cross_attention(Tensor(rand((2, 3, 8))), Tensor(rand((2, 4, 12))), 2)
    with pytest.raises(ValueError, match="width 8 is not divisible by num_heads 3"):
        F.self_attention(Tensor(rand((2, 3, 24))), 3)
    with pytest.raises(ValueError, match="width 8 is not divisible by num_heads 3"):
        F.cross_attention(Tensor(rand((2, 3, 8))), Tensor(rand((2, 4, 16))), 3)
    with pytest.raises(TypeError, match="boolean"):
        F.self_attention(Tensor(rand((2, 3, 24))), 2, np.ones((3, 3)))


def test_mask_as_bias_keeps_broadcast_axes_small():
    bias, strides = attention_kernels._mask_as_bias(np.tril(np.ones((5, 5), bool)), (3, 2, 5, 5), np.dtype(np.float32))
    assert bias.shape == (5, 5) and strides == (0, 0, 1)
    assert bias[0, 0] == 0 and bias[0, 1] == -np.inf
    bias, strides = attention_kernels._mask_as_bias(np.ones((3, 1, 1, 5), bool), (3, 2, 4, 5), np.dtype(np.float64))
    assert bias.shape == (3, 5) and strides == (1, 0, 0) and bias.dtype == np.float64
