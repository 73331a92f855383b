"""Multi-head scaled dot-product attention as one op (the fused fast path).

The same computation written as separate ops (split heads, Q Kᵀ, / sqrt(d),
masked_fill, softmax, @ V, merge heads) is ``transformer.attention``'s
``scaled_dot_product_attention``: read that one to learn attention, and draw it
with ``viz``. These ops give the same values and gradients (tested) with one
graph node and one pass over memory each way; the arithmetic is in
``kernels/attention_kernels.py``.

Two ops with fixed inputs, one gradient per input, as nanoGPT packs its projections:
  SelfAttentionCore(qkv)     qkv = x @ W_qkv: Q, K, V side by side   (B, T, 3*width)
  CrossAttentionCore(q, kv)  q = x @ W_q, kv = memory @ W_kv: K, V side by side
Per head h (columns h*d : (h+1)*d of Q, K and V, d = width / heads):
  S = Q_h K_hᵀ / sqrt(d),  S[~allowed] = -inf,  P = softmax(S),  O_h = P V_h
backward, from the output gradient G:
  dP = G_h V_hᵀ,  dS = P * (dP - rowsum(P * dP)) / sqrt(d),
  dQ_h = dS K_h,  dK_h = dSᵀ Q_h,  dV_h = Pᵀ G_h
``allowed``: bool, broadcastable to (B, heads, Tq, Tk), True = may attend. The
weights P (B, heads, Tq, Tk) are handed to ``weights_out``: for inspection, they
carry no gradient.
"""
import numpy as np

from .. import kernels
from ..function import Function


def _check_heads(width, num_heads):
    if num_heads < 1 or width % num_heads:
        raise ValueError(f"attention: width {width} is not divisible by num_heads {num_heads}")


class SelfAttentionCore(Function):
    """Heads merged (B, T, width) from qkv (B, T, 3*width) = [Q | K | V]."""

    def forward(self, qkv, num_heads, allowed, weights_out):
        if qkv.ndim != 3 or qkv.shape[2] % 3:
            raise ValueError(f"self-attention: qkv must be (batch, length, 3 * width), Q, K and V side by "
                             f"side, got shape {qkv.shape}")
        width = qkv.shape[2] // 3
        _check_heads(width, num_heads)
        self.qkv, self.num_heads = np.ascontiguousarray(qkv), num_heads
        self.columns = (0, width, 2 * width)           # where Q, K and V start in qkv
        out, self.weights = kernels.attention(self.qkv, self.qkv, self.qkv, allowed, num_heads, width,
                                              self.columns)
        weights_out.append(self.weights)
        return out

    def backward(self, grad):
        d_qkv = np.empty_like(self.qkv)                # [dQ | dK | dV]: disjoint columns, each written whole
        kernels.attention_backward(np.ascontiguousarray(grad), self.qkv, self.qkv, self.qkv, self.weights,
                                   self.num_heads, d_qkv, d_qkv, d_qkv, self.columns)
        return d_qkv


class CrossAttentionCore(Function):
    """Heads merged (B, Tq, width) from q (B, Tq, width) and kv (B, Tk, 2*width) = [K | V]."""

    def forward(self, q, kv, num_heads, allowed, weights_out):
        width = q.shape[-1]
        if q.ndim != 3 or kv.ndim != 3 or kv.shape[0] != q.shape[0] or kv.shape[2] != 2 * width:
            raise ValueError(f"cross-attention: q {q.shape} and kv {kv.shape} do not fit: need q "
                             f"(batch, Tq, width) and kv (batch, Tk, 2 * width), K and V side by side")
        _check_heads(width, num_heads)
        self.q, self.kv, self.num_heads = np.ascontiguousarray(q), np.ascontiguousarray(kv), num_heads
        self.columns = (0, 0, width)                   # Q at 0 of q; K at 0, V at width of kv
        out, self.weights = kernels.attention(self.q, self.kv, self.kv, allowed, num_heads, width, self.columns)
        weights_out.append(self.weights)
        return out

    def backward(self, grad):
        d_q, d_kv = np.empty_like(self.q), np.empty_like(self.kv)   # [dK | dV]: disjoint columns, each written whole
        kernels.attention_backward(np.ascontiguousarray(grad), self.q, self.kv, self.kv, self.weights,
                                   self.num_heads, d_q, d_kv, d_kv, self.columns)
        return d_q, d_kv
