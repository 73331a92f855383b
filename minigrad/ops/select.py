"""where and masked_fill: pick entries from one of two tensors by a boolean mask."""
import numpy as np

from ..function import Function
from .. import tensor_type
from . import xp
from .checks import broadcast_shape, unwrap


def masked_fill(a, mask, value):
    """``value`` where the boolean mask is True, ``a`` elsewhere (the mask broadcasts); arrays
    and Tensors alike.

    On a finite array it is ``a * keep + fill``, two passes whose ``keep`` and ``fill`` have the
    mask's shape: for attention scores (B, h, T, S) and a padding mask (B, 1, 1, S), np.where
    measured ~5x slower. Not for inf or NaN input (inf * 0 would be NaN): np.where then."""
    if xp.is_tensor(a) or not np.isfinite(a).all():
        return xp.where(mask, a.dtype.type(value), a)
    out = a * (~mask).astype(a.dtype)
    out += np.where(mask, a.dtype.type(value), a.dtype.type(0))
    return out


def _bool_mask(mask, op):
    mask = np.asarray(unwrap(mask))
    if mask.dtype != np.bool_:
        raise TypeError(f"{op}: the mask must be boolean, got dtype {mask.dtype} "
                        "(build it with a comparison, e.g. ids == PAD)")
    return mask


class Where(Function):
    """where(condition, a, b): a where condition is True, else b. Its rules use
    ``xp.where``, so they also run on Tensors (``differentiable_backward``)."""
    differentiable_backward = True

    def forward(self, a, b, condition):
        self.condition = _bool_mask(condition, "where")
        broadcast_shape("where", self.condition.shape, a.shape, b.shape)
        return np.where(self.condition, a, b)

    def backward(self, grad):
        zero = grad.dtype.type(0)
        need_a, need_b = self.needs_input_grad
        return (xp.where(self.condition, grad, zero) if need_a else None,
                xp.where(self.condition, zero, grad) if need_b else None)

    def jvp(self, da, db):
        zero = (da if db is None else db).dtype.type(0)      # a constant side has no tangent: 0 there
        return xp.where(self.condition, zero if da is None else da, zero if db is None else db)


class MaskedFill(Function):
    """x.masked_fill(mask, value): ``value`` where mask is True (PyTorch's convention).
    Backward and tangent are the same masking of the gradient (the op is linear in x but
    for its constant value), so they run on Tensors too (``differentiable_backward``)."""
    differentiable_backward = True

    def forward(self, a, mask, value):
        self.mask = _bool_mask(mask, "masked_fill")
        if broadcast_shape("masked_fill", self.mask.shape, a.shape) != a.shape:
            raise ValueError(f"masked_fill: mask of shape {self.mask.shape} would enlarge the tensor of "
                             f"shape {a.shape}; the mask must broadcast to the tensor's shape")
        return masked_fill(a, self.mask, value)

    def backward(self, grad):
        # da = where(mask, 0, g): a filled entry does not depend on a (PyTorch: g.masked_fill(mask, 0))
        return masked_fill(grad, self.mask, 0)

    jvp = backward      # a filled entry is a constant: its tangent is 0 too


def where(condition, a, b):
    """Entries of ``a`` where ``condition`` is True, else of ``b`` (numbers take the other's dtype)."""
    if isinstance(b, tensor_type.Tensor):
        a = tensor_type.operand_like(a, b)
    if isinstance(a, tensor_type.Tensor):
        b = tensor_type.operand_like(b, a)
    return Where.apply(tensor_type.as_tensor(a), tensor_type.as_tensor(b), condition=condition)


