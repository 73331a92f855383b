"""Column sums of a 2-D array (``ops/nn_ops.py``'s ``column_sums``: a bias gradient) as one BLAS product."""
import numpy as np

from ..ops import nn_ops as op
from .registry import kernel_for


def _example(rng, dtype, size):
    return (rng.standard_normal((37, 5) if size == "small" else (128 * 19, 256)).astype(dtype),)


@kernel_for(op.column_sums, fits=lambda rows: rows.ndim == 2 and rows.dtype in (np.float32, np.float64),
            example=_example, stage="training")
def column_sums(rows):
    """``ones @ rows``: numpy's sum over the first axis of a (2432, 64..256) float32 gradient was
    measured 2-5x slower."""
    return np.ones(rows.shape[0], dtype=rows.dtype) @ rows
