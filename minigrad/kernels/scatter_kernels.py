"""An embedding's gradient in one pass: each looked-up row's gradient added into the row it came
from (``ops/shape.py``'s ``scatter_add_rows``: numpy sorts the ids and sums runs of equal ids with
``np.add.reduceat``, ~220 µs at the date model's lookups of 1,216 ids; this loop ~20 µs).
Rows are added one after the other in the order of the ids (numpy's ``reduceat`` sums a run of
equal ids pairwise, so the last bits may differ)."""
import numpy as np

from ..ops import shape as op
from .jit import jit
from .registry import kernel_for


@jit()
def _scatter_add_rows_kernel(ids, rows, out):
    table_rows = out.shape[0]
    for i in range(ids.shape[0]):
        row = ids[i]
        if row < 0:                     # negative ids count from the end, as in the forward
            row += table_rows
        for j in range(rows.shape[1]):
            out[row, j] += rows[i, j]


def _fits(ids, grad, shape):
    return (grad.dtype in (np.float32, np.float64) and ids.dtype.kind in "iu" and ids.size > 0
            and len(shape) >= 1 and grad.shape == ids.shape + tuple(shape[1:]))


def _example(rng, dtype, size):
    count, table, width = (7, 5, 3) if size == "small" else (64 * 19, 68, 64)  # a half batch's target tokens
    ids = rng.integers(-table, table, size=count)
    return ids, rng.standard_normal((count, width)).astype(dtype), (table, width)


@kernel_for(op.scatter_add_rows, fits=_fits, example=_example, stage="training", compiled=[_scatter_add_rows_kernel])
def scatter_add_rows(ids, grad, shape):
    width = int(np.prod(shape[1:], dtype=np.int64))
    out = np.zeros((shape[0], width), dtype=grad.dtype)
    _scatter_add_rows_kernel(ids.reshape(-1), np.ascontiguousarray(grad).reshape(ids.size, width), out)
    return out.reshape(shape)
