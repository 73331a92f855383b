"""Scaled dot-product attention and multi-head attention, with their masks.

Mask convention (one for the whole project, PyTorch SDPA's): a boolean array
broadcastable to (..., Tq, Tk), **True where attending is allowed**. Masked
scores become -inf before the softmax, so they get exactly zero weight and zero
gradient; a query row with no allowed key gets all-zero weights (never NaN).

The three uses in the model:
  encoder self-attention      padding_mask(src)                    (B, 1, 1, S)
  decoder masked self-attn    causal_mask(T) & padding_mask(tgt)   (B, 1, T, T)
  encoder-decoder (cross)     padding_mask(src)                    (B, 1, 1, S)
"""
import math

import numpy as np

from minigrad import Tensor, concatenate, nn
from minigrad import functional as F


def causal_mask(length: int) -> np.ndarray:
    """(T, T): position t may attend to positions <= t."""
    return np.tril(np.ones((length, length), dtype=bool))


def padding_mask(ids, pad_id: int) -> np.ndarray:
    """(B, 1, 1, T): True for real tokens, False for padding (broadcasts over heads and queries)."""
    ids = np.asarray(ids.data if isinstance(ids, Tensor) else ids)
    return (ids != pad_id)[:, None, None, :]


def scaled_dot_product_attention(q: Tensor, k: Tensor, v: Tensor, mask=None, dropout_p: float = 0.0,
                                 training: bool = False):
    """softmax(Q Kᵀ / sqrt(d_k)) V  ->  (output (..., Tq, dv), weights (..., Tq, Tk)).

    ``dropout_p`` drops attention weights while training (the returned weights are before dropout).
    """
    if q.shape[-1] != k.shape[-1] or k.shape[-2] != v.shape[-2]:
        raise ValueError(f"attention: q {q.shape}, k {k.shape} and v {v.shape} do not fit: q and k need the "
                         "same last dimension, k and v the same number of positions")
    d_k = q.shape[-1]
    scores = (q @ k.swapaxes(-1, -2)).named("scores")              # (..., Tq, Tk)
    scores = (scores / math.sqrt(d_k)).named("scaled scores")
    if mask is not None:
        mask = _check_mask(mask, scores.shape)
        scores = scores.masked_fill(~mask, -np.inf).named("masked scores")
    weights = scores.softmax(axis=-1).named("weights")
    dropped = F.dropout(weights, dropout_p, training)
    return (dropped @ v).named("attention output"), weights


def _check_mask(mask, scores_shape):
    mask = np.asarray(mask.data if isinstance(mask, Tensor) else mask)
    if mask.dtype != np.bool_:
        raise TypeError(f"attention mask must be boolean (True = may attend), got dtype {mask.dtype}")
    try:
        broadcast = np.broadcast_shapes(mask.shape, scores_shape)
    except ValueError:
        broadcast = None
    if broadcast != tuple(scores_shape):
        raise ValueError(f"attention mask of shape {mask.shape} does not broadcast to the scores' shape "
                         f"{tuple(scores_shape)} (batch, heads, queries, keys)")
    return mask


class MultiHeadAttention(nn.Module):
    """Project to ``num_heads`` heads, attend in each, concatenate, project back.

    ``last_weights`` keeps the most recent attention weights, (B, heads, Tq, Tk),
    as a numpy array for inspection and heatmaps.

    Two ways to run the middle part, same values and gradients (tested):
      * step by step (``fused = False``): split heads, ``scaled_dot_product_attention``
        op by op, merge heads. This is the version to read, and the one
        ``viz`` draws.
      * fused (``fused = True``, the default): ``F.multi_head_attention``, one op
        whose Numba kernel does all heads in one pass (training step ~1.3x faster).
        Attention dropout needs the step-by-step path, so a module with dropout
        uses it while training.
    """

    def __init__(self, d_model: int, num_heads: int, dropout: float = 0.0, fused: bool = True):
        if d_model % num_heads:
            raise ValueError(f"d_model {d_model} is not divisible by num_heads {num_heads}")
        self.d_model, self.num_heads, self.d_k = d_model, num_heads, d_model // num_heads
        self.w_q = nn.Linear(d_model, d_model)
        self.w_k = nn.Linear(d_model, d_model)
        self.w_v = nn.Linear(d_model, d_model)
        self.w_o = nn.Linear(d_model, d_model)
        self.dropout_p = dropout
        self.fused = fused
        self.last_weights = None

    def split_heads(self, x: Tensor) -> Tensor:
        batch, length, _ = x.shape
        return x.reshape(batch, length, self.num_heads, self.d_k).transpose(0, 2, 1, 3)  # (B, h, T, d_k)

    def merge_heads(self, x: Tensor) -> Tensor:
        batch, _, length, _ = x.shape
        return x.transpose(0, 2, 1, 3).reshape(batch, length, self.d_model)          # (B, T, h * d_k)

    def project_key_value(self, key: Tensor, value: Tensor):
        """Keys and values of all heads, (B, Tk, d_model) each (head h = columns h*d_k : (h+1)*d_k);
        cached by incremental decoding."""
        return self.w_k(key), self.w_v(value)

    def forward(self, query: Tensor, key: Tensor, value: Tensor, mask=None, key_value=None):
        """``key_value``: precomputed ``project_key_value`` output (then key/value are ignored)."""
        if query.ndim != 3 or query.shape[-1] != self.d_model:
            raise ValueError(f"MultiHeadAttention({self.d_model}, {self.num_heads}) expects query of shape "
                             f"(batch, length, {self.d_model}), got {query.shape}")
        if self.fused and not (self.training and self.dropout_p > 0):
            return self._fused_forward(query, key, value, mask, key_value)
        k, v = key_value if key_value is not None else self.project_key_value(key, value)
        q, k, v = self.split_heads(self.w_q(query)).named("Q"), self.split_heads(k).named("K"), \
            self.split_heads(v).named("V")
        out, weights = scaled_dot_product_attention(q, k, v, mask, self.dropout_p, self.training)  # (B, h, Tq, d_k)
        self.last_weights = weights.data
        return self.w_o(self.merge_heads(out).named("heads concatenated"))

    def _fused_forward(self, query, key, value, mask, key_value):
        """The same as the step-by-step path, with the projections that share an input done as
        one matrix product (x @ [W_q | W_k | W_v] for self-attention, memory @ [W_k | W_v] for
        cross-attention) and the heads by one fused op that reads Q, K, V from it in place."""
        d = self.d_model
        if key_value is not None:
            k, v = key_value
            sources, columns = (self.w_q(query), k, v), (0, 0, 0)
        elif query is key and key is value:
            qkv = self._packed_projection(query, self.w_q, self.w_k, self.w_v)
            sources, columns = (qkv, qkv, qkv), (0, d, 2 * d)
        elif key is value:
            q, kv = self.w_q(query), self._packed_projection(key, self.w_k, self.w_v)
            sources, columns = (q, kv, kv), (0, 0, d)
        else:
            q, (k, v) = self.w_q(query), self.project_key_value(key, value)
            sources, columns = (q, k, v), (0, 0, 0)
        if mask is not None:
            mask = _check_mask(mask, (query.shape[0], self.num_heads, query.shape[1], sources[1].shape[1]))
        out, self.last_weights = F.multi_head_attention(*sources, self.num_heads, mask, width=d, columns=columns)
        return self.w_o(out.named("attention output"))

    @staticmethod
    def _packed_projection(x, *linears):
        """x @ [W_1 | W_2 | ...] + [b_1 | b_2 | ...]: one product instead of one per projection."""
        weight = concatenate([linear.weight for linear in linears], axis=1)
        bias = concatenate([linear.bias for linear in linears], axis=0)
        return F.linear(x, weight, bias)

    def extra_repr(self):
        return f"d_model={self.d_model}, num_heads={self.num_heads}, fused={self.fused}"
