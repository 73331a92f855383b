"""Masked fill: ``value`` where a boolean mask is True, the input elsewhere (the mask broadcasts)."""
import numpy as np

from .backend import numpy_selected


def masked_fill_numpy(a, mask, value):
    return np.where(mask, a.dtype.type(value), a)


def masked_fill(a, mask, value):
    """``np.where(mask, value, a)`` computed as ``a * keep + fill``: with an attention
    mask of shape (B, 1, 1, S) broadcast over (B, h, T, S) scores, np.where measured ~5x
    slower than these two passes; keep and fill have only the mask's small shape.
    Non-finite input takes np.where (inf * 0 would be NaN)."""
    if numpy_selected() or not np.isfinite(a).all():
        return masked_fill_numpy(a, mask, value)
    out = a * (~mask).astype(a.dtype)
    out += np.where(mask, a.dtype.type(value), a.dtype.type(0))
    return out
