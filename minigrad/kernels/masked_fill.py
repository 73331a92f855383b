"""Masked fill (``ops/select.py``'s ``masked_fill``) as ``a * keep + fill``, two passes in numpy."""
import numpy as np

from ..ops import select as op
from .registry import kernel_for


def _example(rng, dtype, size):
    """Attention scores (B, h, T, S) and a padding mask (B, 1, 1, S) broadcast over them."""
    batch, length = (3, 5) if size == "small" else (128, 19)
    scores = rng.standard_normal((batch, 4, length, length)).astype(dtype)
    return scores, rng.random((batch, 1, 1, length)) < 0.3, -np.inf


@kernel_for(op.masked_fill, fits=lambda a, mask, value: bool(np.isfinite(a).all()), example=_example)
def masked_fill(a, mask, value):
    """With an attention mask of shape (B, 1, 1, S) broadcast over (B, h, T, S) scores, np.where
    measured ~5x slower than these two passes; keep and fill have only the mask's small shape.
    Only for finite input (inf * 0 would be NaN)."""
    out = a * (~mask).astype(a.dtype)
    out += np.where(mask, a.dtype.type(value), a.dtype.type(0))
    return out
