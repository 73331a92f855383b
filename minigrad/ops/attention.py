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

    Inputs are the distinct arrays that hold Q, K and V ("sources"): Q, K and V
    may be three arrays, or one array with the three projections side by side
    (self-attention: x @ [W_q | W_k | W_v] is one matrix product), or Q in one
    and K, V in another (cross-attention). ``layout`` gives, for Q, K and V,
    (which source, first column); each is ``width`` columns wide, head h being
    columns h*d : (h+1)*d of it. ``allowed``: bool, broadcastable to
    (B, num_heads, Tq, Tk), True = may attend. The weights (B, num_heads, Tq, Tk)
    are handed to ``weights_out``: for inspection, they carry no gradient.
    """

    def forward(self, *sources, num_heads, width, layout, allowed, weights_out):
        q, k, v = (sources[s] for s, _ in layout)
        if not (q.ndim == k.ndim == v.ndim == 3 and q.shape[0] == k.shape[0] == v.shape[0]
                and k.shape[1] == v.shape[1]) or any(c + width > x.shape[2] for x, (_, c) in zip((q, k, v), layout)):
            raise ValueError(f"attention: q {q.shape}, k {k.shape} and v {v.shape} do not fit: need q "
                             f"(batch, Tq, {width}), k and v (batch, Tk, {width})")
        if width % num_heads:
            raise ValueError(f"attention: width {width} is not divisible by num_heads {num_heads}")
        self.sources = [np.ascontiguousarray(s) for s in sources]
        self.num_heads, self.width, self.layout = num_heads, width, layout
        self.columns = tuple(c for _, c in layout)
        # per head h:  S = Q_h K_hᵀ / sqrt(d),  S[~allowed] = -inf,  P = softmax(S),  O_h = P V_h
        out, self.weights = kernels.attention(*(self.sources[s] for s, _ in layout), allowed, num_heads,
                                              width, self.columns)
        weights_out.append(self.weights)
        return out

    def backward(self, grad):
        grads = [np.zeros_like(s) for s in self.sources]
        targets, claimed, separate = [], [[] for _ in self.sources], []
        for source, column in self.layout:
            if any(abs(column - other) < self.width for other in claimed[source]):
                target = np.zeros_like(self.sources[source])    # overlaps another role: add it afterwards
                separate.append((source, target))
            else:
                target = grads[source]
                claimed[source].append(column)
            targets.append(target)
        # dP = G_h V_hᵀ,  dS = P * (dP - sum(P * dP)) / sqrt(d)  (softmax backward),
        # dQ_h = dS K_h,  dK_h = dSᵀ Q_h,  dV_h = Pᵀ G_h
        kernels.attention_backward(np.ascontiguousarray(grad), *(self.sources[s] for s, _ in self.layout),
                                   self.weights, self.num_heads, *targets, self.columns)
        for source, target in separate:
            grads[source] += target
        return tuple(grads)
