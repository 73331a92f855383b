"""Tests for transformer.models.attention and the blocks of the two models: scaled dot-product attention,
its masks, SelfAttention and CrossAttention, FeedForward, EncoderLayer and DecoderLayer.

Gradients are checked in float64 against central differences (minigrad.gradcheck).
Modules are converted with ``.double()`` and their parameters passed as gradcheck
inputs: gradcheck uses float64 tensors as they are, so perturbing them perturbs the
module. Sizes are tiny (d_model 8, 2 heads, length 3-4, batch 2) to keep this fast.
"""
import numpy as np
import pytest

import minigrad
from minigrad import Tensor, gradcheck
from transformer.models.attention import (CrossAttention, SelfAttention, causal_mask, padding_mask,
                                  scaled_dot_product_attention)
from transformer.models.decoder_only import FeedForward
from transformer.models.encoder_decoder import DecoderLayer, EncoderLayer

D_MODEL, HEADS, D_FF, BATCH = 8, 2, 16, 2


def rand(*shape, seed=0, requires_grad=True):
    """A float64 tensor of standard normal values."""
    data = np.random.default_rng(seed).standard_normal(shape)
    return Tensor(data, requires_grad=requires_grad)


def numpy_attention(q, k, v, mask=None):
    """Reference softmax(Q Kᵀ / sqrt(d)) V in plain numpy (masked weights exactly 0)."""
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    row_max = scores.max(axis=-1, keepdims=True)
    row_max = np.where(np.isfinite(row_max), row_max, 0.0)
    e = np.exp(scores - row_max)
    total = e.sum(axis=-1, keepdims=True)
    weights = np.divide(e, total, out=np.zeros_like(e), where=total > 0)
    return weights @ v, weights


@pytest.fixture(autouse=True)
def fixed_seed():
    minigrad.manual_seed(1234)


# ------------------------------------------------------------------------- masks
def test_causal_mask_is_lower_triangular_boolean():
    mask = causal_mask(4)
    assert mask.dtype == np.bool_ and mask.shape == (4, 4)
    expected = np.array([[1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 1, 1]], dtype=bool)
    np.testing.assert_array_equal(mask, expected)


def test_padding_mask_shape_and_values():
    ids = np.array([[5, 6, 67, 67], [1, 2, 3, 4]])
    mask = padding_mask(ids, pad_id=67)
    assert mask.shape == (2, 1, 1, 4) and mask.dtype == np.bool_
    np.testing.assert_array_equal(mask[:, 0, 0], [[True, True, False, False], [True, True, True, True]])
    # a Tensor of ids gives the same mask
    np.testing.assert_array_equal(padding_mask(Tensor(ids), 67), mask)


# ----------------------------------------------------- scaled dot-product attention
def test_sdpa_matches_numpy_reference():
    q, k, v = rand(2, 2, 3, 4, seed=1), rand(2, 2, 5, 4, seed=2), rand(2, 2, 5, 6, seed=3)
    mask = np.random.default_rng(4).random((2, 1, 3, 5)) < 0.7
    mask[..., 0] = True
    out, weights = scaled_dot_product_attention(q, k, v, mask)
    ref_out, ref_weights = numpy_attention(q.data, k.data, v.data, mask)
    assert out.shape == (2, 2, 3, 6) and weights.shape == (2, 2, 3, 5)
    np.testing.assert_allclose(weights.data, ref_weights, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(out.data, ref_out, rtol=1e-12, atol=1e-12)


def test_sdpa_gradcheck_without_mask():
    q, k, v = rand(2, 2, 3, 4, seed=1), rand(2, 2, 4, 4, seed=2), rand(2, 2, 4, 4, seed=3)
    assert gradcheck(lambda q, k, v: scaled_dot_product_attention(q, k, v)[0], [q, k, v])


def test_sdpa_gradcheck_with_causal_mask():
    q, k, v = rand(2, 2, 4, 4, seed=1), rand(2, 2, 4, 4, seed=2), rand(2, 2, 4, 4, seed=3)
    mask = causal_mask(4)
    assert gradcheck(lambda q, k, v: scaled_dot_product_attention(q, k, v, mask)[0], [q, k, v])


def test_sdpa_gradcheck_through_the_weights():
    q, k, v = rand(2, 2, 3, 4, seed=1), rand(2, 2, 4, 4, seed=2), rand(2, 2, 4, 4, seed=3)
    mask = np.array([True, True, False, True])
    assert gradcheck(lambda q, k: scaled_dot_product_attention(q, k, v, mask)[1], [q, k])


def fully_masked_row_mask():
    """(2, 1, 3, 4): query 1 of batch 0 may attend to nothing; everything else is mixed."""
    mask = np.array([[True, False, True, True], [False, False, False, False], [True, True, False, False]])
    return np.stack([mask, np.ones_like(mask)])[:, None]


def test_sdpa_fully_masked_query_row_gives_zero_weights_not_nan():
    q, k, v = rand(2, 2, 3, 4, seed=1), rand(2, 2, 4, 4, seed=2), rand(2, 2, 4, 4, seed=3)
    out, weights = scaled_dot_product_attention(q, k, v, fully_masked_row_mask())
    assert np.isfinite(weights.data).all() and np.isfinite(out.data).all()
    np.testing.assert_array_equal(weights.data[0, :, 1], 0.0)
    np.testing.assert_array_equal(out.data[0, :, 1], 0.0)
    np.testing.assert_allclose(weights.data[0, :, [0, 2]].sum(axis=-1), 1.0, rtol=1e-12)
    (out * rand(*out.shape, seed=9, requires_grad=False)).sum().backward()
    for t in (q, k, v):
        assert t.grad is not None and np.isfinite(t.grad).all()
    np.testing.assert_array_equal(q.grad[0, :, 1], 0.0)   # the empty row's query gets no gradient


def test_sdpa_gradcheck_with_fully_masked_query_row():
    q, k, v = rand(2, 2, 3, 4, seed=1), rand(2, 2, 4, 4, seed=2), rand(2, 2, 4, 4, seed=3)
    mask = fully_masked_row_mask()
    assert gradcheck(lambda q, k, v: scaled_dot_product_attention(q, k, v, mask)[0], [q, k, v])


def test_sdpa_masked_keys_get_exactly_zero_weight_and_gradient():
    q, k, v = rand(2, 2, 3, 4, seed=1), rand(2, 2, 5, 4, seed=2), rand(2, 2, 5, 4, seed=3)
    allowed = np.array([True, True, True, False, False])     # the last two keys are padding
    out, weights = scaled_dot_product_attention(q, k, v, allowed)
    assert (weights.data[..., 3:] == 0.0).all()
    np.testing.assert_allclose(weights.data.sum(axis=-1), 1.0, rtol=1e-12)
    (out * rand(*out.shape, seed=9, requires_grad=False)).sum().backward()
    assert (k.grad[..., 3:, :] == 0.0).all() and (v.grad[..., 3:, :] == 0.0).all()
    assert np.abs(k.grad[..., :3, :]).sum() > 0 and np.abs(v.grad[..., :3, :]).sum() > 0


def test_sdpa_masked_keys_do_not_change_the_output():
    q, k, v = rand(1, 2, 3, 4, seed=1), rand(1, 2, 5, 4, seed=2), rand(1, 2, 5, 4, seed=3)
    allowed = np.array([True, True, True, False, False])
    k2, v2 = k.data.copy(), v.data.copy()
    k2[..., 3:, :] = 1e3
    v2[..., 3:, :] = -1e3
    out1, _ = scaled_dot_product_attention(q, k, v, allowed)
    out2, _ = scaled_dot_product_attention(q, Tensor(k2), Tensor(v2), allowed)
    np.testing.assert_array_equal(out1.data, out2.data)


def test_sdpa_rejects_a_non_boolean_mask():
    q, k, v = rand(1, 2, 3, 4), rand(1, 2, 3, 4), rand(1, 2, 3, 4)
    with pytest.raises(TypeError, match="boolean"):
        scaled_dot_product_attention(q, k, v, np.ones((3, 3), dtype=np.int64))
    with pytest.raises(TypeError, match="boolean"):
        scaled_dot_product_attention(q, k, v, np.zeros((3, 3)))


def test_sdpa_rejects_a_mask_of_the_wrong_shape():
    q, k, v = rand(1, 2, 3, 4), rand(1, 2, 5, 4), rand(1, 2, 5, 4)
    with pytest.raises(ValueError, match=r"\(3, 3\).*\(1, 2, 3, 5\)"):
        scaled_dot_product_attention(q, k, v, np.ones((3, 3), dtype=bool))
    # a mask that would broadcast the scores up to a bigger shape is also wrong
    with pytest.raises(ValueError, match="does not broadcast"):
        scaled_dot_product_attention(q, k, v, np.ones((4, 2, 3, 5), dtype=bool))


def test_sdpa_rejects_mismatched_q_k_v():
    with pytest.raises(ValueError, match="same last dimension"):
        scaled_dot_product_attention(rand(1, 3, 4), rand(1, 3, 5), rand(1, 3, 4))
    with pytest.raises(ValueError, match="same number of positions"):
        scaled_dot_product_attention(rand(1, 3, 4), rand(1, 3, 4), rand(1, 2, 4))


# ------------------------------------------------------------ multi-head attention
@pytest.fixture(params=[True, False], ids=["fused", "step-by-step"])
def fused(request):
    """Both ways of running the heads: the fused op and the op-by-op composition."""
    return request.param


@pytest.fixture
def self_attn(fused):
    return SelfAttention(D_MODEL, HEADS, fused=fused).double()


@pytest.fixture
def cross_attn(fused):
    return CrossAttention(D_MODEL, HEADS, fused=fused).double()


def test_packed_parameters_have_the_packed_shapes():
    names = {n: p.shape for n, p in SelfAttention(D_MODEL, HEADS).named_parameters()}
    assert names == {"w_qkv.weight": (8, 24), "w_qkv.bias": (24,), "w_o.weight": (8, 8), "w_o.bias": (8,)}
    names = {n: p.shape for n, p in CrossAttention(D_MODEL, HEADS).named_parameters()}
    assert names == {"w_q.weight": (8, 8), "w_q.bias": (8,), "w_kv.weight": (8, 16), "w_kv.bias": (16,),
                     "w_o.weight": (8, 8), "w_o.bias": (8,)}


def test_self_attention_gradcheck(self_attn):
    x = rand(BATCH, 3, D_MODEL, seed=1)
    assert gradcheck(lambda x, *params: self_attn(x), [x, *self_attn.parameters()])


def test_self_attention_gradcheck_causal_and_a_fully_masked_row(self_attn):
    x = rand(BATCH, 4, D_MODEL, seed=2)
    mask = causal_mask(4)[None, None] & np.array([True, False, True, True])[None, None, :, None]  # row 1: no key
    out = self_attn(x, mask)
    assert (self_attn.last_weights[:, :, 1] == 0).all()
    assert np.isfinite(out.data).all()
    assert gradcheck(lambda x, *params: self_attn(x, mask), [x, *self_attn.parameters()])


def test_cross_attention_gradcheck_with_different_lengths(cross_attn):
    query, memory = rand(BATCH, 3, D_MODEL, seed=3), rand(BATCH, 4, D_MODEL, seed=4)
    mask = padding_mask(np.array([[1, 2, 3, 0], [1, 2, 3, 4]]), pad_id=0)
    out = cross_attn(query, memory, mask)
    assert out.shape == (BATCH, 3, D_MODEL)
    assert gradcheck(lambda q, m, *params: cross_attn(q, m, mask), [query, memory, *cross_attn.parameters()])


def test_mha_last_weights_shape_and_rows_sum_to_one(cross_attn):
    query, memory = rand(BATCH, 3, D_MODEL, seed=3), rand(BATCH, 5, D_MODEL, seed=4)
    mask = padding_mask(np.array([[1, 2, 3, 0, 0], [1, 2, 3, 4, 5]]), pad_id=0)
    cross_attn(query, memory, mask)
    weights = cross_attn.last_weights
    assert isinstance(weights, np.ndarray)
    assert weights.shape == (BATCH, HEADS, 3, 5)
    np.testing.assert_allclose(weights.sum(axis=-1), 1.0, rtol=1e-12)
    assert (weights[0, :, :, 3:] == 0.0).all()
    assert (weights[1] > 0).all()


def test_mha_padded_memory_positions_get_exactly_zero_gradient(cross_attn):
    query, memory = rand(BATCH, 3, D_MODEL, seed=3), rand(BATCH, 5, D_MODEL, seed=4)
    mask = padding_mask(np.array([[1, 2, 3, 0, 0], [1, 2, 3, 4, 0]]), pad_id=0)
    out = cross_attn(query, memory, mask)
    (out * rand(*out.shape, seed=9, requires_grad=False)).sum().backward()
    assert (memory.grad[0, 3:] == 0.0).all() and (memory.grad[1, 4:] == 0.0).all()
    assert (np.abs(memory.grad[0, :3]).sum(axis=-1) > 0).all()


def test_mha_heads_are_independent_slices(fused):
    """Two heads equal two separate single-head attentions over halves of Q, K, V, which are
    the column blocks [0:d], [d:2d], [2d:3d] of the one packed projection."""
    mha = SelfAttention(D_MODEL, HEADS, fused=fused).double()
    x = rand(1, 3, D_MODEL, seed=5, requires_grad=False)
    out = mha(x).data
    qkv = x.data @ mha.w_qkv.weight.data + mha.w_qkv.bias.data
    q, k, v = qkv[..., :D_MODEL], qkv[..., D_MODEL:2 * D_MODEL], qkv[..., 2 * D_MODEL:]
    d = D_MODEL // HEADS
    heads = [numpy_attention(q[..., h * d:(h + 1) * d], k[..., h * d:(h + 1) * d], v[..., h * d:(h + 1) * d])[0]
             for h in range(HEADS)]
    expected = np.concatenate(heads, axis=-1) @ mha.w_o.weight.data + mha.w_o.bias.data
    np.testing.assert_allclose(out, expected, rtol=1e-10, atol=1e-12)


def test_cross_attention_is_self_attention_with_the_same_matrices(fused):
    """CrossAttention(x, x) with w_q, w_kv cut from a SelfAttention's w_qkv gives its output."""
    self_attn = SelfAttention(D_MODEL, HEADS, fused=fused).double()
    cross = CrossAttention(D_MODEL, HEADS, fused=fused).double()
    w, b = self_attn.w_qkv.weight.data, self_attn.w_qkv.bias.data
    cross.w_q.weight.data, cross.w_q.bias.data = w[:, :D_MODEL].copy(), b[:D_MODEL].copy()
    cross.w_kv.weight.data, cross.w_kv.bias.data = w[:, D_MODEL:].copy(), b[D_MODEL:].copy()
    cross.w_o.weight.data, cross.w_o.bias.data = self_attn.w_o.weight.data, self_attn.w_o.bias.data
    x = rand(BATCH, 4, D_MODEL, seed=6, requires_grad=False)
    mask = causal_mask(4)[None, None]
    np.testing.assert_allclose(cross(x, x, mask).data, self_attn(x, mask).data, rtol=1e-12, atol=1e-12)


def test_mha_rejects_bad_shapes():
    with pytest.raises(ValueError, match="not divisible"):
        SelfAttention(10, 3)
    attn, cross = SelfAttention(D_MODEL, HEADS), CrossAttention(D_MODEL, HEADS)
    with pytest.raises(ValueError, match=r"SelfAttention\(8, 2\) expects x of shape \(batch, length, 8\), "
                                         r"got \(3, 8\)"):
        attn(Tensor(np.zeros((3, D_MODEL))))
    with pytest.raises(ValueError, match=r"expects x of shape"):
        attn(Tensor(np.zeros((1, 3, 6))))
    with pytest.raises(ValueError, match=r"CrossAttention\(8, 2\) expects memory of shape .* got \(1, 4, 6\)"):
        cross(Tensor(np.zeros((1, 3, 8))), Tensor(np.zeros((1, 4, 6))))
    with pytest.raises(ValueError, match=r"mask of shape \(3, 3\) does not broadcast .* \(1, 2, 3, 4\)"):
        cross(Tensor(np.zeros((1, 3, 8))), Tensor(np.zeros((1, 4, 8))), np.ones((3, 3), bool))


def test_mha_rejects_a_non_boolean_mask(self_attn, cross_attn):
    x = rand(BATCH, 3, D_MODEL)
    with pytest.raises(TypeError, match="boolean"):
        self_attn(x, np.tril(np.ones((3, 3))))
    with pytest.raises(TypeError, match="boolean"):
        cross_attn(x, x, np.ones((3, 3)))


# ----------------------------------------------------------------------- layers
def test_feed_forward_gradcheck():
    ff = FeedForward(D_MODEL, D_FF).double()
    x = rand(BATCH, 3, D_MODEL, seed=6)
    assert gradcheck(lambda x, *params: ff(x), [x, *ff.parameters()])


def test_feed_forward_is_position_wise():
    ff = FeedForward(D_MODEL, D_FF).double()
    x = rand(BATCH, 3, D_MODEL, seed=6, requires_grad=False)
    whole = ff(x).data
    for t in range(3):
        np.testing.assert_allclose(ff(Tensor(x.data[:, t:t + 1])).data[:, 0], whole[:, t], rtol=1e-12, atol=1e-12)


def test_encoder_layer_gradcheck_with_padding_mask():
    layer = EncoderLayer(D_MODEL, HEADS, D_FF).double()
    x = rand(BATCH, 4, D_MODEL, seed=7)
    mask = padding_mask(np.array([[1, 2, 3, 0], [1, 2, 3, 4]]), pad_id=0)
    assert gradcheck(lambda x, *params: layer(x, mask), [x, *layer.parameters()])


def test_decoder_layer_gradcheck_with_causal_and_memory_masks():
    layer = DecoderLayer(D_MODEL, HEADS, D_FF).double()
    x, memory = rand(BATCH, 3, D_MODEL, seed=8), rand(BATCH, 4, D_MODEL, seed=9)
    self_mask = causal_mask(3)[None, None]
    memory_mask = padding_mask(np.array([[1, 2, 0, 0], [1, 2, 3, 4]]), pad_id=0)
    assert gradcheck(lambda x, m, *params: layer(x, m, self_mask, memory_mask),
                     [x, memory, *layer.parameters()])


def layer_norm_rows(x):
    """Plain layer norm over the last axis (weight 1, bias 0, eps 1e-5: a fresh LayerNorm)."""
    return (x - x.mean(axis=-1, keepdims=True)) / np.sqrt(x.var(axis=-1, keepdims=True) + 1e-5)


def test_encoder_layer_is_post_ln_residual():
    """EncoderLayer: x = LN(x + SelfAttn(x)); x = LN(x + FFN(x))."""
    layer = EncoderLayer(D_MODEL, HEADS, D_FF).double()
    x = rand(BATCH, 4, D_MODEL, seed=7, requires_grad=False)
    mask = padding_mask(np.array([[1, 2, 3, 0], [1, 2, 3, 4]]), pad_id=0)
    a = layer_norm_rows(x.data + layer.self_attn(x, mask).data)
    expected = layer_norm_rows(a + layer.feed_forward(Tensor(a)).data)
    np.testing.assert_allclose(layer(x, mask).data, expected, rtol=1e-9, atol=1e-9)


def test_decoder_layer_is_post_ln_residual():
    """DecoderLayer: LN(x + MaskedSelfAttn(x)); LN(x + CrossAttn(x, memory)); LN(x + FFN(x))."""
    layer = DecoderLayer(D_MODEL, HEADS, D_FF).double()
    x, memory = rand(BATCH, 3, D_MODEL, seed=8, requires_grad=False), rand(BATCH, 4, D_MODEL, seed=9,
                                                                           requires_grad=False)
    self_mask = causal_mask(3)[None, None]
    memory_mask = padding_mask(np.array([[1, 2, 0, 0], [1, 2, 3, 4]]), pad_id=0)
    a = layer_norm_rows(x.data + layer.self_attn(x, self_mask).data)
    b = layer_norm_rows(a + layer.cross_attn(Tensor(a), memory, memory_mask).data)
    expected = layer_norm_rows(b + layer.feed_forward(Tensor(b)).data)
    np.testing.assert_allclose(layer(x, memory, self_mask, memory_mask).data, expected, rtol=1e-9, atol=1e-9)


def test_decoder_layer_is_causal():
    """Output at position t has exactly zero gradient w.r.t. inputs at t' > t."""
    layer = DecoderLayer(D_MODEL, HEADS, D_FF).double()
    memory = rand(BATCH, 4, D_MODEL, seed=9, requires_grad=False)
    length = 4
    for t in range(length):
        x = rand(BATCH, length, D_MODEL, seed=8)
        out = layer(x, memory, causal_mask(length)[None, None])
        # a random projection: a plain sum of a LayerNorm output has (almost) no gradient
        (out[:, t] * rand(BATCH, D_MODEL, seed=t, requires_grad=False)).sum().backward()
        assert (x.grad[:, t + 1:] == 0.0).all(), f"position {t} depends on later positions"
        assert (np.abs(x.grad[:, :t + 1]).sum(axis=-1) > 0).all()


def test_decoder_layer_cache_matches_full_computation(fused):
    """Feeding one position at a time through the key/value cache equals the masked full pass."""
    layer = DecoderLayer(D_MODEL, HEADS, D_FF).double()
    layer.self_attn.fused = layer.cross_attn.fused = fused
    x, memory = rand(BATCH, 4, D_MODEL, seed=8, requires_grad=False), rand(BATCH, 5, D_MODEL, seed=9,
                                                                            requires_grad=False)
    memory_mask = padding_mask(np.array([[1, 2, 3, 0, 0], [1, 2, 3, 4, 5]]), pad_id=0)
    full = layer(x, memory, causal_mask(4)[None, None], memory_mask).data
    cache = {}
    steps = [layer(Tensor(x.data[:, t:t + 1]), memory, None, memory_mask, cache).data for t in range(4)]
    np.testing.assert_allclose(np.concatenate(steps, axis=1), full, rtol=1e-10, atol=1e-12)
    assert cache["self"]["kv"].shape == (BATCH, 4, 2 * D_MODEL)   # K and V of all heads side by side
    assert cache["memory"]["kv"].shape == (BATCH, 5, 2 * D_MODEL)
