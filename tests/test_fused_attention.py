"""The fused attention op (minigrad.ops.MultiHeadAttentionCore, F.multi_head_attention)
and its Numba kernel, against the step-by-step composition and the numpy twin.

Also the ReLU kernels (the other kernel the training step gained with it).
"""
import numpy as np
import pytest

from minigrad import Tensor, gradcheck, kernels
from minigrad import functional as F
from minigrad.kernels import attention_kernels, relu_kernels
from transformer.attention import MultiHeadAttention, causal_mask, scaled_dot_product_attention


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


def backward(grad, q, k, v, weights, heads):
    """(dq, dk, dv) from the kernel API, which writes into arrays it is given."""
    dq, dk, dv = np.zeros_like(q), np.zeros_like(k), np.zeros_like(v)
    kernels.attention_backward(grad, q, k, v, weights, heads, dq, dk, dv)
    return dq, dk, dv


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
            out, weights = kernels.attention(q, k, v, np.ones((1,), bool) if mask is None else mask, heads)
            assert out.dtype == dtype and weights.dtype == dtype
            np.testing.assert_allclose(out, want_out, **tol)
            np.testing.assert_allclose(weights, want_weights, **tol)
            want = kernels.attention_backward_numpy(grad, q, k, v, want_weights.astype(dtype), heads)
            for got, expected in zip(backward(grad, q, k, v, weights, heads), want):
                np.testing.assert_allclose(got, expected, **tol)


def test_fully_masked_row_gives_zero_weights_output_and_gradient():
    q, k, v = rand((1, 3, 8)), rand((1, 4, 8), seed=1), rand((1, 4, 8), seed=2)
    mask = np.ones((1, 1, 3, 4), bool)
    mask[0, 0, 1] = False
    out, weights = kernels.attention(q, k, v, mask, 2)
    assert not np.isnan(out).any() and not np.isnan(weights).any()
    assert (weights[0, :, 1] == 0).all() and (out[0, 1] == 0).all()
    dq, dk, dv = backward(np.ones_like(out), q, k, v, weights, 2)
    assert (dq[0, 1] == 0).all() and np.isfinite(dk).all() and np.isfinite(dv).all()


def test_masked_keys_get_exactly_zero_weight_and_gradient():
    q, k, v = rand((2, 5, 8)), rand((2, 6, 8), seed=1), rand((2, 6, 8), seed=2)
    mask = np.ones((2, 1, 1, 6), bool)
    mask[0, ..., 4:] = False
    out, weights = kernels.attention(q, k, v, mask, 2)
    assert (weights[0, :, :, 4:] == 0).all()
    _, dk, dv = backward(rand(out.shape, seed=5), q, k, v, weights, 2)
    assert (dk[0, 4:] == 0).all() and (dv[0, 4:] == 0).all()
    assert (np.abs(dk[0, :4]).sum(axis=-1) > 0).all()


@pytest.mark.parametrize("mask", [None, "causal", "padding"])
def test_gradcheck_of_the_fused_op(mask):
    q = Tensor(rand((2, 5, 6)), requires_grad=True)
    k = Tensor(rand((2, 5, 6), seed=1), requires_grad=True)
    v = Tensor(rand((2, 5, 6), seed=2), requires_grad=True)
    allowed = {None: None, "causal": causal_mask(5)[None, None],
               "padding": np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], bool)[:, None, None, :]}[mask]
    assert gradcheck(lambda q, k, v: F.multi_head_attention(q, k, v, 3, allowed)[0], [q, k, v])


def test_gradcheck_with_one_tensor_as_query_key_and_value():
    """x used three times: its gradient is the sum of the three paths."""
    x = Tensor(rand((2, 4, 6)), requires_grad=True)
    mask = causal_mask(4)[None, None]
    assert gradcheck(lambda x: F.multi_head_attention(x, x, x, 2, mask)[0], [x])


@pytest.mark.parametrize("backend", ["numba", "numpy"])
def test_packed_projections_match_separate_ones(backend):
    """Q, K, V side by side in one array (self-attention) or K, V in one (cross): same values
    and gradients as three separate arrays."""
    rng = np.random.default_rng(3)
    x, memory = rand((2, 6, 24), seed=1), rand((2, 5, 16), seed=2)
    mask = rng.random((2, 1, 6, 6)) > 0.3
    with kernels.use_backend(backend):
        for packed, columns, separate in (
                (x, (0, 8, 16), (x[..., :8], x[..., 8:16], x[..., 16:])),
                (memory, (0, 0, 8), None)):
            q = Tensor(rand((2, 6, 8), seed=4), requires_grad=True) if separate is None else None
            source = Tensor(packed, requires_grad=True)
            args = (source, source, source) if q is None else (q, source, source)
            out, weights = F.multi_head_attention(*args, 2, mask if q is None else mask[..., :5],
                                                  width=8, columns=columns)
            grad = rand(out.shape, seed=6)
            out.backward(grad)
            parts = separate or (q.data, memory[..., :8], memory[..., 8:])
            plain = [Tensor(np.ascontiguousarray(p), requires_grad=True) for p in parts]
            out2, weights2 = F.multi_head_attention(*plain, 2, mask if q is None else mask[..., :5])
            out2.backward(grad)
            np.testing.assert_allclose(out.data, out2.data, rtol=1e-12, atol=1e-12)
            np.testing.assert_allclose(weights, weights2, rtol=1e-12, atol=1e-12)
            if q is None:
                np.testing.assert_allclose(source.grad, np.concatenate([p.grad for p in plain], axis=-1), atol=1e-12)
            else:
                np.testing.assert_allclose(q.grad, plain[0].grad, atol=1e-12)
                np.testing.assert_allclose(source.grad, np.concatenate([p.grad for p in plain[1:]], axis=-1),
                                           atol=1e-12)


def test_gradcheck_of_packed_self_attention():
    qkv = Tensor(rand((2, 4, 12)), requires_grad=True)
    mask = causal_mask(4)[None, None]
    assert gradcheck(lambda t: F.multi_head_attention(t, t, t, 2, mask, width=4, columns=(0, 4, 8))[0], [qkv])


def test_fused_and_step_by_step_modules_agree_in_float32():
    """The model's own shapes and dtype: values and every parameter's gradient."""
    grads, outputs = [], []
    x = rand((4, 19, 64), np.float32)
    for fused in (True, False):
        mha = MultiHeadAttention(64, 4, fused=fused)
        for p, value in zip(mha.parameters(), [rand(p.shape, np.float32, i) * 0.2 for i, p in enumerate(mha.parameters())]):
            p.data = value
        xt = Tensor(x, requires_grad=True)
        out = mha(xt, xt, xt, causal_mask(19)[None, None])
        (out * Tensor(rand(out.shape, np.float32, 7))).sum().backward()
        outputs.append(out.data)
        grads.append([xt.grad] + [p.grad for p in mha.parameters()])
    np.testing.assert_allclose(outputs[0], outputs[1], rtol=1e-4, atol=1e-5)
    for fused_grad, plain_grad in zip(*grads):
        np.testing.assert_allclose(fused_grad, plain_grad, rtol=1e-3, atol=1e-4)


def test_fused_op_errors_name_the_shapes():
    with pytest.raises(ValueError, match=r"q \(2, 3, 8\), k \(2, 4, 6\)"):
        F.multi_head_attention(Tensor(rand((2, 3, 8))), Tensor(rand((2, 4, 6))), Tensor(rand((2, 4, 6))), 2)
    with pytest.raises(ValueError, match="not divisible by num_heads 3"):
        F.multi_head_attention(Tensor(rand((2, 3, 8))), Tensor(rand((2, 4, 8))), Tensor(rand((2, 4, 8))), 3)


def test_mask_as_bias_keeps_broadcast_axes_small():
    bias, strides = attention_kernels._mask_as_bias(np.tril(np.ones((5, 5), bool)), (3, 2, 5, 5), np.dtype(np.float32))
    assert bias.shape == (5, 5) and strides == (0, 0, 1)
    assert bias[0, 0] == 0 and bias[0, 1] == -np.inf
    bias, strides = attention_kernels._mask_as_bias(np.ones((3, 1, 1, 5), bool), (3, 2, 4, 5), np.dtype(np.float64))
    assert bias.shape == (3, 5) and strides == (1, 0, 0) and bias.dtype == np.float64


# ------------------------------------------------------------------------- ReLU
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_relu_kernels_match_numpy_including_nan_and_inf(dtype):
    x = np.concatenate([rand(1000, dtype), np.array([0.0, -0.0, np.nan, np.inf, -np.inf], dtype)]).reshape(5, 201)
    grad = rand(x.shape, dtype, 1)
    np.testing.assert_array_equal(kernels.relu(x), relu_kernels.relu_numpy(x))
    np.testing.assert_array_equal(kernels.relu_backward(kernels.relu(x), grad),
                                  relu_kernels.relu_backward_numpy(relu_kernels.relu_numpy(x), grad))


def test_relu_takes_non_contiguous_input():
    x = rand((6, 8), np.float32).T
    np.testing.assert_array_equal(kernels.relu(x), np.maximum(x, 0))
