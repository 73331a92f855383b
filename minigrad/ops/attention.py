"""Multi-head scaled dot-product attention as one op (the fused fast path).

The same computation written as separate ops (split heads, Q Kᵀ, / sqrt(d),
masked_fill, softmax, @ V, merge heads) is each op's ``composition`` below, and
``transformer.models.attention``'s ``scaled_dot_product_attention``: read those to learn
attention, and draw them with ``viz``. These ops give the same values and
gradients (tested) with one graph node and one pass over memory each way;
``kernels/attention_kernels.py`` registers kernels for ``attention`` and
``attention_backward``.

Two ops with fixed inputs, one gradient per input, as nanoGPT packs its projections:
  SelfAttentionCore(qkv)     qkv = x @ W_qkv: Q, K, V side by side   (B, T, 3*width)
  CrossAttentionCore(q, kv)  q = x @ W_q, kv = memory @ W_kv: K, V side by side
Per head h (columns h*d : (h+1)*d of Q, K and V, d = width / heads):
  S = Q_h K_hᵀ / sqrt(d),  S[~allowed] = -inf,  P = softmax(S),  O_h = P V_h
backward, from the output gradient G:
  dP = G_h V_hᵀ,  dS = P * (dP - rowsum(P * dP)) / sqrt(d)  (0 where P is 0),
  dQ_h = dS K_h,  dK_h = dSᵀ Q_h,  dV_h = Pᵀ G_h
``allowed``: bool, broadcastable to (B, heads, Tq, Tk), True = may attend. The
weights P (B, heads, Tq, Tk) are handed to ``weights_out``: for inspection, they
carry no gradient. A query row whose scores are all -inf gets zero weights (a zero output
unless V holds NaN or inf), whether the mask hides every key or an inf in Q or K makes every allowed score -inf:
softmax's rule for an all -inf row, so op by op gives the same (PyTorch's
scaled_dot_product_attention too; its op-by-op softmax gives NaN, docs/nan-rules.md).

NaN: dS is 0 where the mask hides the key, even when the output gradient of that query is
NaN or its weights are NaN, so a NaN of one query does not reach the gradients of keys it
cannot see: as op by op (masked_fill's gradient is 0 there) and as PyTorch. Elsewhere dS is
the plain product, also where P is 0: 0 * NaN is NaN, as op by op (a NaN or +inf score makes
its row NaN, and the gradients of everything that row read, as in PyTorch). dV = Pᵀ G is a
plain product too.
"""
import math

import numpy as np

from ..accelerated import accelerated
from ..function import Function
from .softmax import softmax, softmax_backward


def split_heads(x, num_heads):
    """(B, T, heads * D) -> (B, heads, T, D); arrays and Tensors alike."""
    batch, length, width = x.shape
    return x.reshape(batch, length, num_heads, width // num_heads).transpose(0, 2, 1, 3)


def merge_heads(x):
    """(B, heads, T, D) -> (B, T, heads * D)."""
    batch, heads, length, depth = x.shape
    return x.transpose(0, 2, 1, 3).reshape(batch, length, heads * depth)


@accelerated
def attention(q, k, v, allowed, num_heads, width, columns):
    """(output (B, Tq, width), weights P (B, heads, Tq, Tk)) of multi-head attention.

    q (B, Tq, *), k and v (B, Tk, *): Q is q's columns columns[0] : columns[0] + width, and
    so on for K and V, so one array may hold several projections side by side."""
    q_h, k_h, v_h = (split_heads(x[..., c:c + width], num_heads) for x, c in zip((q, k, v), columns))
    scale = q.dtype.type(1 / math.sqrt(q_h.shape[-1]))
    scores = np.where(allowed, (q_h @ k_h.swapaxes(-1, -2)) * scale, q.dtype.type(-np.inf))
    weights = softmax.numpy(scores)   # a row of all -inf: zeros, however its scores got there
    return merge_heads(weights @ v_h), weights


def gradient_arrays(inputs, columns, width, allocate):
    """One gradient array per distinct input array (q, k and v may be one array): allocated by
    ``allocate`` (np.empty or np.zeros); an error if two inputs' columns in one array overlap."""
    for i in range(3):
        for j in range(i + 1, 3):
            if inputs[i] is inputs[j] and abs(columns[i] - columns[j]) < width:
                raise ValueError(f"attention_backward: q, k and v overlap (one array, columns {tuple(columns)}, "
                                 f"width {width}); give each its own array or columns")
    grads = {}
    for x in inputs:
        grads.setdefault(id(x), allocate(x.shape, x.dtype))
    return tuple(grads[id(x)] for x in inputs)


@accelerated
def attention_backward(grad, q, k, v, weights, allowed, num_heads, columns):
    """(dq, dk, dv), each shaped like its input with the gradient at the columns it was read
    from (zeros elsewhere; inputs that are one array share one gradient array). ``allowed``
    is forward's mask: a hidden key gets no gradient."""
    width = grad.shape[2]
    grads = gradient_arrays((q, k, v), columns, width, np.zeros)
    q_h, k_h, v_h = (split_heads(x[..., c:c + width], num_heads) for x, c in zip((q, k, v), columns))
    g_h = split_heads(grad, num_heads)
    scale = q.dtype.type(1 / math.sqrt(q_h.shape[-1]))
    d_weights = g_h @ v_h.swapaxes(-1, -2)
    d_scores = softmax_backward.numpy(weights, d_weights) * scale
    d_scores = np.where(allowed, d_scores, q.dtype.type(0))  # hidden keys: no gradient, even from NaN
    parts = (d_scores @ k_h, d_scores.swapaxes(-1, -2) @ q_h, weights.swapaxes(-1, -2) @ g_h)
    for d, c, part in zip(grads, columns, parts):
        d[..., c:c + width] = merge_heads(part)
    return grads


def _check_heads(width, num_heads):
    if num_heads < 1 or width % num_heads:
        raise ValueError(f"attention: width {width} is not divisible by num_heads {num_heads}")


def attention_composition(q, k, v, num_heads, allowed, weights_out=None):
    """softmax(Q Kᵀ / sqrt(d), hidden keys -inf) V per head, from public ops on Tensors (B, T, width);
    the weights go to weights_out (if given) as an array."""
    q_h, k_h, v_h = (split_heads(x, num_heads) for x in (q, k, v))
    scores = (q_h @ k_h.swapaxes(-1, -2)) * (1 / math.sqrt(q_h.shape[-1]))
    weights = scores.masked_fill(~np.broadcast_to(allowed, scores.shape), -np.inf).softmax(-1)
    if weights_out is not None:
        weights_out.append(weights.data)
    return merge_heads(weights @ v_h)


class _AttentionCore(Function):
    """What both ops share: the inputs' arrays (Q, K and V at ``columns`` of them), one call each way."""

    def attend(self, arrays, columns, width, num_heads, allowed, weights_out):
        _check_heads(width, num_heads)
        self.arrays = tuple(np.ascontiguousarray(a) for a in arrays)
        self.inputs_of_qkv = tuple(self.arrays[0 if len(arrays) == 1 or i == 0 else 1] for i in range(3))
        self.columns, self.num_heads, self.allowed = columns, num_heads, allowed
        out, self.weights = attention(*self.inputs_of_qkv, allowed, num_heads, width, columns)
        weights_out.append(self.weights)
        return out

    def compose(self, inputs, options):
        # the weights were handed out by forward; the composition must not add a second copy
        return self.composition(*inputs, **dict(options, weights_out=None))

    def backward(self, grad):
        grads = attention_backward(np.ascontiguousarray(grad), *self.inputs_of_qkv, self.weights, self.allowed,
                                   self.num_heads, self.columns)
        return grads[0] if len(self.arrays) == 1 else grads[:2]   # one per input: d(qkv), or d(q), d(kv)


class SelfAttentionCore(_AttentionCore):
    """Heads merged (B, T, width) from qkv (B, T, 3*width) = [Q | K | V]."""

    def forward(self, qkv, num_heads, allowed, weights_out):
        if qkv.ndim != 3 or qkv.shape[2] % 3:
            raise ValueError(f"self-attention: qkv must be (batch, length, 3 * width), Q, K and V side by "
                             f"side, got shape {qkv.shape}")
        width = qkv.shape[2] // 3                      # Q, K and V start at columns 0, width, 2 * width
        return self.attend((qkv,), (0, width, 2 * width), width, num_heads, allowed, weights_out)

    @staticmethod
    def composition(qkv, num_heads, allowed, weights_out=None):
        """The same op from public ops: split qkv into Q, K and V, then ``attention_composition``."""
        width = qkv.shape[2] // 3
        return attention_composition(qkv[..., :width], qkv[..., width:2 * width], qkv[..., 2 * width:],
                                     num_heads, allowed, weights_out)


class CrossAttentionCore(_AttentionCore):
    """Heads merged (B, Tq, width) from q (B, Tq, width) and kv (B, Tk, 2*width) = [K | V]."""

    def forward(self, q, kv, num_heads, allowed, weights_out):
        width = q.shape[-1]
        if q.ndim != 3 or kv.ndim != 3 or kv.shape[0] != q.shape[0] or kv.shape[2] != 2 * width:
            raise ValueError(f"cross-attention: q {q.shape} and kv {kv.shape} do not fit: need q "
                             f"(batch, Tq, width) and kv (batch, Tk, 2 * width), K and V side by side")
        # Q at column 0 of q; K at 0 and V at width of kv
        return self.attend((q, kv), (0, 0, width), width, num_heads, allowed, weights_out)

    @staticmethod
    def composition(q, kv, num_heads, allowed, weights_out=None):
        """The same op from public ops: split kv into K and V, then ``attention_composition``."""
        width = q.shape[-1]
        return attention_composition(q, kv[..., :width], kv[..., width:], num_heads, allowed, weights_out)


