"""Functions of tensors used by layers and losses (like ``torch.nn.functional``)."""
import numpy as np

from . import ops, rng
from .tensor import Tensor, as_tensor


def linear(x: Tensor, weight: Tensor, bias: Tensor = None) -> Tensor:
    """x @ weight + bias (weight is (in, out)); one fused op when there is a bias."""
    if bias is None:
        return x @ weight
    return ops.Linear.apply(x, weight, bias)


def relu(x: Tensor) -> Tensor:
    return ops.ReLU.apply(x)


def gelu(x: Tensor) -> Tensor:
    """GELU, tanh approximation (PyTorch's ``gelu(x, approximate='tanh')``)."""
    return ops.GELU.apply(x)


def sigmoid(x: Tensor) -> Tensor:
    return ops.Sigmoid.apply(x)


def abs(x: Tensor) -> Tensor:  # noqa: A001  (torch.abs; shadows the builtin only in this module)
    return ops.Abs.apply(x)


def clamp(x: Tensor, min=None, max=None) -> Tensor:  # noqa: A002
    """Limit entries to [min, max]; the gradient passes where min <= x <= max (PyTorch's rule)."""
    return ops.Clamp.apply(x, low=min, high=max)


clip = clamp


def amin(x: Tensor, axis=None, keepdims=False) -> Tensor:
    """Smallest entry over ``axis``; ties share the gradient (``torch.amin``)."""
    return ops.Min.apply(x, axis=axis, keepdims=keepdims)


def amax(x: Tensor, axis=None, keepdims=False) -> Tensor:
    """Largest entry over ``axis``; ties share the gradient (``torch.amax``)."""
    return ops.Max.apply(x, axis=axis, keepdims=keepdims)


def argmax(x: Tensor, axis=None, keepdims=False) -> Tensor:
    """Index of the largest entry, an int64 tensor without gradient."""
    return ops.argmax(x, axis=axis, keepdims=keepdims)


def softmax(x: Tensor, axis: int = -1) -> Tensor:
    return ops.Softmax.apply(x, axis=axis)


def log_softmax(x: Tensor, axis: int = -1) -> Tensor:
    return ops.LogSoftmax.apply(x, axis=axis)


def layer_norm(x: Tensor, weight=None, bias=None, eps: float = 1e-5) -> Tensor:
    """Normalise over the last axis, then scale by ``weight`` and shift by ``bias``."""
    x = as_tensor(x)
    dim = x.shape[-1]
    weight = Tensor(np.ones(dim, x.dtype)) if weight is None else weight
    bias = Tensor(np.zeros(dim, x.dtype)) if bias is None else bias
    return ops.LayerNorm.apply(x, weight, bias, eps=eps)


def self_attention(qkv: Tensor, num_heads: int, mask=None):
    """Multi-head self-attention as one fused op, from the packed projection qkv = x @ W_qkv.

    qkv (B, T, 3*width) holds Q, K and V side by side (nanoGPT's ``c_attn`` output), head h
    being columns h*d : (h+1)*d of each (d = width / num_heads); ``mask``: bool broadcastable
    to (B, num_heads, T, T), True where attending is allowed. Returns (output (B, T, width),
    weights (B, num_heads, T, T) as a numpy array). Same result as splitting Q, K, V and the
    heads and running softmax(Q Kᵀ/sqrt(d)) V op by op; a query row with no allowed key gets
    zero weights and a zero output. One gradient: d(qkv), in the same packed layout.
    """
    weights = []
    out = ops.SelfAttentionCore.apply(qkv, num_heads=num_heads, allowed=_allowed(mask), weights_out=weights)
    return out, weights[0]


def cross_attention(q: Tensor, kv: Tensor, num_heads: int, mask=None):
    """Multi-head attention of queries q (B, Tq, width) over kv (B, Tk, 2*width) = [K | V]
    (kv = memory @ W_kv), as one fused op; otherwise as ``self_attention``. Gradients: dq, d(kv)."""
    weights = []
    out = ops.CrossAttentionCore.apply(q, kv, num_heads=num_heads, allowed=_allowed(mask), weights_out=weights)
    return out, weights[0]


def _allowed(mask):
    if mask is None:
        return np.ones((1, 1, 1, 1), dtype=bool)
    mask = np.asarray(mask.data if isinstance(mask, Tensor) else mask)
    if mask.dtype != np.bool_:
        raise TypeError(f"attention mask must be boolean (True = may attend), got dtype {mask.dtype}")
    return mask


def dropout(x: Tensor, p: float = 0.5, training: bool = True) -> Tensor:
    """Zero entries with probability ``p`` and scale the rest by 1/(1-p); identity when not training."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout: p must be between 0 and 1, got {p}")
    if not training or p == 0.0:
        return x
    if p == 1.0:
        return x * 0.0
    return ops.Dropout.apply(x, p=p, generator=rng.generator())


def cross_entropy(logits: Tensor, targets, ignore_index=None, label_smoothing: float = 0.0) -> Tensor:
    """Mean cross-entropy of ``logits`` (..., C) against integer class ``targets`` (...).

    The class axis is the last one. ``ignore_index`` targets (e.g. ``<pad>``)
    add no loss and no gradient and are left out of the mean; if every target
    is ignored the result is NaN, as in PyTorch. ``label_smoothing`` in [0, 1]
    blends the one-hot target with a uniform distribution over all C classes.
    """
    logits = as_tensor(logits)
    target_array = np.asarray(targets.data if isinstance(targets, Tensor) else targets)
    if target_array.dtype.kind not in "iu":
        raise TypeError(f"cross_entropy: targets must be integer class ids, got dtype {target_array.dtype}")
    if target_array.shape != logits.shape[:-1]:
        raise ValueError(f"cross_entropy: logits of shape {logits.shape} need targets of shape "
                         f"{logits.shape[:-1]} (the class axis is last), got {target_array.shape}")
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"cross_entropy: label_smoothing must be in [0, 1], got {label_smoothing}")
    # the targets' own array (apply makes the tensor): a traced step then sees the batch's targets,
    # and CrossEntropy counts the non-pad ones in its forward, anew for every batch
    return ops.CrossEntropy.apply(logits, target_array, ignore_index=ignore_index,
                                  label_smoothing=label_smoothing)


def array_function(fn, *arrays, **options) -> np.ndarray:
    """``fn(*arrays, **options)`` (a numpy function of the batch: a mask, the targets to score) run
    as an op, so that a traced step recomputes it from each batch (see ``ops/data.py``)."""
    arrays = [a.data if isinstance(a, Tensor) else a for a in arrays]
    return ops.ArrayFunction.apply(*arrays, fn=fn, **options).data


def where(condition, a, b) -> Tensor:
    return ops.where(condition, a, b)


concatenate = ops.concatenate
stack = ops.stack
