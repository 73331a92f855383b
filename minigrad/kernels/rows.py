"""Shared plumbing of the row kernels (softmax, log-softmax, layer norm): the last axis is a row."""
import numpy as np


def as_rows(x):
    """x as a C-contiguous 2-D (rows, last axis) array (a view when possible)."""
    return np.ascontiguousarray(x).reshape(-1, x.shape[-1])


def float_arrays(*arrays):
    """Can the row kernels take these arrays? float32/float64 of one dtype, equal
    shapes, at least 1-D and not empty; anything else goes to the numpy definition."""
    first = arrays[0]
    return (first.dtype in (np.float32, np.float64) and first.ndim > 0 and first.size > 0
            and all(a.dtype == first.dtype and a.shape == first.shape for a in arrays))


def row_example(rng, dtype, size, arrays=1):
    """``arrays`` random arrays of rows: odd shapes when small, a batch's logits or activations
    (128 sentences x 19 positions, 64 features) for the model size."""
    shape = (3, 5, 13) if size == "small" else (128 * 19, 64)
    return tuple((rng.standard_normal(shape) * 3).astype(dtype) for _ in range(arrays))
