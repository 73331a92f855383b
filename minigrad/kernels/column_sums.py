"""Column sums of a 2-D array (a bias gradient: the output gradient summed over all positions)."""
import numpy as np

from .backend import numpy_selected


def column_sums_numpy(rows):
    return rows.sum(axis=0)


def column_sums(rows):
    """rows.sum(axis=0) for a 2-D float array, as one BLAS product ``ones @ rows``: numpy's
    sum over the first axis of a (2432, 64..256) float32 gradient was measured 2-5x slower."""
    if numpy_selected() or rows.dtype not in (np.float32, np.float64):
        return column_sums_numpy(rows)
    return np.ones(rows.shape[0], dtype=rows.dtype) @ rows
