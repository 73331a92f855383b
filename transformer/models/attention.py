"""Scaled dot-product attention and multi-head attention, with their masks.

Mask convention (one for the whole project, PyTorch SDPA's): a boolean array
broadcastable to (..., Tq, Tk), **True where attending is allowed**. Masked
scores become -inf before the softmax, so they get exactly zero weight and zero
gradient; a query row with no allowed key gets all-zero weights (never NaN).

The three uses in the model:
  encoder self-attention      SelfAttention,  padding_mask(src)                    (B, 1, 1, S)
  decoder masked self-attn    SelfAttention,  padding_mask(tgt, causal=causal_mask(T))  (B, 1, T, T)
  encoder-decoder (cross)     CrossAttention, padding_mask(src)                    (B, 1, 1, S)

Projections are packed as in nanoGPT: self-attention projects x once with
``w_qkv`` (d_model -> 3*d_model: Q, K, V side by side) and splits the result;
cross-attention projects the decoder's x with ``w_q`` and the encoder's memory
with ``w_kv`` (K, V side by side). One parameter, one product per input.
"""
import functools
import math

import numpy as np

from minigrad import Tensor, concatenate, nn
from minigrad import functional as F


@functools.lru_cache(maxsize=64)
def causal_mask(length: int) -> np.ndarray:
    """(T, T): position t may attend to positions <= t. Made once per length and read-only: the
    same array on every call, which a traced step (``minigrad.trace``) may keep."""
    mask = np.tril(np.ones((length, length), dtype=bool))
    mask.flags.writeable = False
    return mask


@functools.lru_cache(maxsize=64)
def future_mask(length: int) -> np.ndarray:
    """(T, T): ``~causal_mask(T)``, the positions after t (made once, read-only, as above)."""
    mask = ~causal_mask(length)
    mask.flags.writeable = False
    return mask


def padding_mask(ids, pad_id: int, causal=None) -> np.ndarray:
    """(B, 1, 1, T): True for real tokens, False for padding (broadcasts over heads and queries);
    with ``causal`` (T, T) the and of both, (B, 1, T, T). Computed by an op from the ids, so that
    a traced step computes it anew for every batch instead of keeping the first batch's."""
    return F.array_function(_not_padding, ids, pad_id=pad_id, causal=causal)


def _not_padding(ids, pad_id, causal):
    mask = (ids != pad_id)[:, None, None, :]
    return mask if causal is None else causal & mask


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
        mask = check_mask(mask, scores.shape)
        scores = scores.masked_fill(~mask, -np.inf).named("masked scores")
    weights = scores.softmax(axis=-1).named("weights")
    dropped = F.dropout(weights, dropout_p, training)
    return (dropped @ v).named("attention output"), weights


def check_mask(mask, scores_shape):
    """``mask`` as a boolean array that broadcasts to ``scores_shape``, or a one-line error."""
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


# The packed projections and the separate d_model x d_model matrices they hold, in order
# (``xavier_init`` initialises each block as a matrix of its own).
PACKED_PROJECTIONS = {"w_qkv": ("w_q", "w_k", "w_v"), "w_kv": ("w_k", "w_v")}


def packed_linear(d_model: int, parts: int) -> nn.Linear:
    """Linear(d_model, parts * d_model): ``parts`` projections side by side, one product."""
    return nn.Linear(d_model, parts * d_model)


class MultiHeadAttention(nn.Module):
    """What self- and cross-attention share: the heads, attention in each, the output
    projection ``w_o``. Build a ``SelfAttention`` or a ``CrossAttention``.

    ``last_weights`` keeps the most recent attention weights, (B, heads, Tq, Tk),
    as a numpy array for inspection and heatmaps.

    Two ways to run the middle part, same values and gradients (tested):
      * step by step (``fused = False``): split Q, K, V and the heads,
        ``scaled_dot_product_attention`` op by op, merge heads. This is the version
        to read, and the one ``viz`` draws.
      * fused (``fused = True``, the default): ``F.self_attention`` /
        ``F.cross_attention``, one op whose Numba kernel reads Q, K, V straight from
        the packed projection and does all heads in one pass (training step ~1.3x
        faster). Attention dropout needs the step-by-step path, so a module with
        dropout uses it while training.
    """

    def __init__(self, d_model: int, num_heads: int, dropout: float = 0.0, fused: bool = True):
        if num_heads < 1 or d_model % num_heads:
            raise ValueError(f"d_model {d_model} is not divisible by num_heads {num_heads}")
        self.d_model, self.num_heads, self.d_k = d_model, num_heads, d_model // num_heads
        self.dropout_p = dropout
        self.fused = fused
        self.last_weights = None

    def split_heads(self, x: Tensor) -> Tensor:
        batch, length, _ = x.shape
        return x.reshape(batch, length, self.num_heads, self.d_k).transpose(0, 2, 1, 3)  # (B, h, T, d_k)

    def merge_heads(self, x: Tensor) -> Tensor:
        batch, _, length, _ = x.shape
        return x.transpose(0, 2, 1, 3).reshape(batch, length, self.d_model)          # (B, T, h * d_k)

    def split(self, packed: Tensor, parts: int):
        """(B, T, parts * d_model) -> parts x (B, T, d_model): Q, K, V out of a packed projection."""
        d = self.d_model
        return tuple(packed[..., i * d:(i + 1) * d] for i in range(parts))

    def attend(self, q: Tensor, k: Tensor, v: Tensor, mask=None) -> Tensor:
        """The step-by-step path: q (B, Tq, d_model), k, v (B, Tk, d_model) -> (B, Tq, d_model)."""
        # 3 x (B, T, d) -> 3 x (B, h, T, d_k)
        q, k, v = self.split_heads(q).named("Q"), self.split_heads(k).named("K"), self.split_heads(v).named("V")
        out, weights = scaled_dot_product_attention(q, k, v, mask, self.dropout_p, self.training)  # (B, h, Tq, d_k)
        self.last_weights = weights.data
        return self.merge_heads(out).named("heads concatenated")                              # (B, Tq, d_model)

    def use_fused(self) -> bool:
        return self.fused and not (self.training and self.dropout_p > 0)

    def attend_to(self, q: Tensor, kv: Tensor, mask=None) -> Tensor:
        """Queries q (B, Tq, d_model) over kv (B, Tk, 2*d_model) = [K | V] -> (B, Tq, d_model)."""
        if mask is not None:
            mask = check_mask(mask, (q.shape[0], self.num_heads, q.shape[1], kv.shape[1]))
        if not self.use_fused():
            k, v = self.split(kv, 2)                                     # (B, Tk, 2*d) -> 2 x (B, Tk, d)
            return self.attend(q, k, v, mask)
        out, self.last_weights = F.cross_attention(q, kv, self.num_heads, mask)
        return out.named("attention output")

    def _check_input(self, x: Tensor, what: str):
        if x.ndim != 3 or x.shape[-1] != self.d_model:
            raise ValueError(f"{type(self).__name__}({self.d_model}, {self.num_heads}) expects {what} of shape "
                             f"(batch, length, {self.d_model}), got {x.shape}")

    def extra_repr(self):
        return f"d_model={self.d_model}, num_heads={self.num_heads}, fused={self.fused}"


class SelfAttention(MultiHeadAttention):
    """Every position of x attends to the positions of x (the mask says which).

    One projection ``w_qkv`` = [W_q | W_k | W_v] (nanoGPT's ``c_attn``), then split.
    """

    def __init__(self, d_model: int, num_heads: int, dropout: float = 0.0, fused: bool = True):
        super().__init__(d_model, num_heads, dropout, fused)
        self.w_qkv = packed_linear(d_model, 3)
        self.w_o = nn.Linear(d_model, d_model)

    def forward(self, x: Tensor, mask=None, cache=None) -> Tensor:
        """x (B, T, d_model) -> (B, T, d_model). ``cache`` (a dict, incremental decoding): x
        holds only the newest position(s); their keys and values are appended to
        ``cache["kv"]`` and the queries attend over all of them."""
        self._check_input(x, "x")
        qkv = self.w_qkv(x).named("qkv")                                # (B, T, 3*d)
        if cache is not None:
            q, kv = qkv[..., :self.d_model], qkv[..., self.d_model:]     # (B, T, d), (B, T, 2*d)
            if "kv" in cache:
                kv = concatenate([cache["kv"], kv], axis=1)              # (B, T_cached + T, 2*d)
            cache["kv"] = kv
            return self.w_o(self.attend_to(q, kv, mask))
        if mask is not None:
            mask = check_mask(mask, (x.shape[0], self.num_heads, x.shape[1], x.shape[1]))
        if self.use_fused():
            out, self.last_weights = F.self_attention(qkv, self.num_heads, mask)
            return self.w_o(out.named("attention output"))
        q, k, v = self.split(qkv, 3)                                     # (B, T, 3*d) -> 3 x (B, T, d)
        return self.w_o(self.attend(q, k, v, mask))


class CrossAttention(MultiHeadAttention):
    """The decoder's positions x attend to the encoder's output ``memory``.

    ``w_q`` projects x; ``w_kv`` = [W_k | W_v] projects memory once, then split.
    """

    def __init__(self, d_model: int, num_heads: int, dropout: float = 0.0, fused: bool = True):
        super().__init__(d_model, num_heads, dropout, fused)
        self.w_q = nn.Linear(d_model, d_model)
        self.w_kv = packed_linear(d_model, 2)
        self.w_o = nn.Linear(d_model, d_model)

    def forward(self, x: Tensor, memory: Tensor, mask=None, cache=None) -> Tensor:
        """x (B, Tq, d_model), memory (B, Tk, d_model) -> (B, Tq, d_model). ``cache`` (a dict,
        incremental decoding): memory's keys and values are projected once, into ``cache["kv"]``."""
        self._check_input(x, "x")
        self._check_input(memory, "memory")
        q = self.w_q(x)                                                  # (B, Tq, d)
        if cache is None:
            kv = self.w_kv(memory).named("kv")                          # (B, Tk, 2*d)
        else:
            if "kv" not in cache:
                cache["kv"] = self.w_kv(memory)
            kv = cache["kv"]
        return self.w_o(self.attend_to(q, kv, mask))
