"""Multi-head scaled dot-product attention as one op (the fused fast path).

The same computation written as separate ops (split heads, Q Kᵀ, / sqrt(d),
masked_fill, softmax, @ V, merge heads) is ``transformer.attention``'s
``scaled_dot_product_attention``: read that one to learn attention, and draw it
with ``viz``. This op gives the same values and gradients (tested) with one
graph node and one pass over memory each way; the arithmetic is in
``kernels/attention_kernels.py``.
"""
import numpy as np

from .. import kernels
from ..function import Function


class MultiHeadAttentionCore(Function):
    """softmax(Q_h K_hᵀ / sqrt(d) + mask) V_h for every head h, heads merged.

    q (B, Tq, width), k and v (B, Tk, width), width = num_heads * d: head h is
    the column block h*d : (h+1)*d (the layout the projections produce).
    ``allowed``: bool, broadcastable to (B, num_heads, Tq, Tk), True = may attend.
    The attention weights (B, num_heads, Tq, Tk) are kept as ``self.weights``
    (and handed to ``weights_out``): they are for inspection and carry no gradient.
    """

    def forward(self, q, k, v, num_heads, allowed, weights_out):
        if q.ndim != 3 or k.ndim != 3 or v.ndim != 3 or not q.shape[0] == k.shape[0] == v.shape[0] \
                or not q.shape[2] == k.shape[2] == v.shape[2] or k.shape[1] != v.shape[1]:
            raise ValueError(f"attention: q {q.shape}, k {k.shape} and v {v.shape} do not fit: need q "
                             "(batch, Tq, width), k and v (batch, Tk, width)")
        if q.shape[2] % num_heads:
            raise ValueError(f"attention: width {q.shape[2]} is not divisible by num_heads {num_heads}")
        self.q, self.k, self.v, self.num_heads = q, k, v, num_heads
        out, self.weights = kernels.attention(q, k, v, allowed, num_heads)
        weights_out.append(self.weights)
        return out

    def backward(self, grad):
        return kernels.attention_backward(grad, self.q, self.k, self.v, self.weights, self.num_heads)
