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


def multi_head_attention(q: Tensor, k: Tensor, v: Tensor, num_heads: int, mask=None, width: int = None,
                         columns=(0, 0, 0)):
    """Scaled dot-product attention in every head at once, as one fused op.

    q (B, Tq, width), k and v (B, Tk, width), width = num_heads * d_head, head h
    being the columns h*d_head : (h+1)*d_head; ``mask``: bool broadcastable to
    (B, num_heads, Tq, Tk), True where attending is allowed. Returns
    (output (B, Tq, width), weights (B, num_heads, Tq, Tk) as a numpy array).
    Same result as splitting the heads and running softmax(Q Kᵀ/sqrt(d)) V op by
    op; a query row with no allowed key gets zero weights and a zero output.

    Packed projections: pass the same tensor more than once with ``columns`` =
    where Q, K and V start in it (e.g. ``qkv, qkv, qkv, columns=(0, D, 2D), width=D``
    for ``qkv = x @ [W_q | W_k | W_v]``); ``width`` defaults to q's last dimension.
    """
    q, k, v = as_tensor(q), as_tensor(k), as_tensor(v)
    sources = []
    for t in (q, k, v):
        if not any(t is s for s in sources):
            sources.append(t)
    layout = tuple((next(i for i, s in enumerate(sources) if s is t), int(c)) for t, c in zip((q, k, v), columns))
    width = q.shape[-1] - columns[0] if width is None else width
    allowed = np.ones((1, 1, 1, 1), dtype=bool) if mask is None else np.asarray(mask)
    weights = []
    out = ops.MultiHeadAttentionCore.apply(*sources, num_heads=num_heads, width=width, layout=layout,
                                           allowed=allowed, weights_out=weights)
    return out, weights[0]


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
    return ops.CrossEntropy.apply(logits, Tensor(target_array), ignore_index=ignore_index,
                                  label_smoothing=label_smoothing)


def where(condition, a, b) -> Tensor:
    return ops.where(condition, a, b)


concatenate = ops.concatenate
stack = ops.stack
