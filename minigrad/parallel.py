"""Large matrix products cut into a fixed number of pieces, run on one thread or two.

OpenBLAS's last bits depend on how many threads it uses, so letting BLAS spread a
product over the cores makes a run's numbers depend on the machine's load. Here the
cut is ours and it is FIXED: a product of at least ``MIN_SPLIT_FLOPS`` is cut into
``PIECES`` pieces along the longer side of its result (halves of the rows of ``x @ W``
and ``g @ Wᵀ``; of the columns of the weight gradient ``xᵀ @ g``, each piece still
summing over every position). The cut depends on the shapes only, never on the machine
or its load, and each piece is one BLAS call on one thread. Every number of the result
is therefore computed by the same call on the same numbers whether the pieces run one
after the other on the calling thread or side by side on two (numpy releases the GIL
inside BLAS): ``piece_workers(n)`` changes the speed, never a bit.

Training chooses the worker count by timing its steps (``transformer/threads.py``); outside
``piece_workers`` the pieces run one after the other.
"""
import contextlib
from concurrent.futures import ThreadPoolExecutor

import numpy as np

PIECES = 2                   # fixed: part of the arithmetic, not of the machine
MIN_SPLIT_FLOPS = 24_000_000  # smaller products stay whole: handing a piece over costs ~45 µs (docs/kernels.md)

_workers = 1                 # threads running the pieces of one product (1 = the caller alone)
_helper = None               # the second thread, made once on first use and kept


def _second_thread():
    global _helper
    if _helper is None:
        _helper = ThreadPoolExecutor(max_workers=1, thread_name_prefix="minigrad-pieces")
    return _helper


@contextlib.contextmanager
def piece_workers(count: int):
    """Run the block with the pieces of each product on ``count`` threads (1 or 2); restored after."""
    global _workers
    if count not in (1, 2):
        raise ValueError(f"piece_workers: 1 or 2 threads, got {count!r}")
    previous, _workers = _workers, count
    try:
        yield count
    finally:
        _workers = previous


def workers() -> int:
    """Threads the pieces of a product run on now (1 outside ``piece_workers``)."""
    return _workers


def cut(shape):
    """(axis, bounds) of the fixed cut of a result of ``shape`` (M, N) into ``PIECES`` pieces:
    along the rows when M >= N, else along the columns."""
    axis = 0 if shape[0] >= shape[1] else 1
    n = shape[axis]
    return axis, [(n * i // PIECES, n * (i + 1) // PIECES) for i in range(PIECES)]


def product(a, b):
    """``a @ b`` for 2-D arrays; at least ``MIN_SPLIT_FLOPS`` in ``PIECES`` fixed pieces (see above)."""
    (M, K), N = a.shape, b.shape[1]
    if 2 * M * K * N < MIN_SPLIT_FLOPS:
        return np.matmul(a, b)
    out = np.empty((M, N), dtype=np.result_type(a, b))
    axis, bounds = cut(out.shape)
    if axis == 0:
        pieces = [(a[lo:hi], b, out[lo:hi]) for lo, hi in bounds]
    else:
        pieces = [(a, b[:, lo:hi], out[:, lo:hi]) for lo, hi in bounds]
    if _workers == 1:
        for left, right, into in pieces:
            np.matmul(left, right, out=into)
    else:
        handed = _second_thread().submit(np.matmul, *pieces[-1][:2], out=pieces[-1][2])
        for left, right, into in pieces[:-1]:
            np.matmul(left, right, out=into)
        handed.result()
    return out


def over_rows(multiply, x, w):
    """``multiply(x, w)`` (a matrix product) for x (..., K) and a 2-D w (K, N), every leading
    dimension of x folded into the rows: one product for the whole batch, not one per item.
    Arrays and Tensors alike (``multiply`` decides which product runs)."""
    rows = multiply(x.reshape(-1, x.shape[-1]), w)
    return rows.reshape(x.shape[:-1] + (w.shape[-1],))


def summed_over_rows(multiply, x, g):
    """``xᵀ @ g`` summed over every leading position of x (..., K) and g (..., N): the gradient
    of a w shared by all rows of ``x @ w``, as one product of the folded rows."""
    return multiply(x.reshape(-1, x.shape[-1]).T, g.reshape(-1, g.shape[-1]))


def product_over_rows(x, w):
    """``x @ w`` for x (..., K) and a 2-D w: one ``product`` of the folded rows."""
    return over_rows(product, x, w)
