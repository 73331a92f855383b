"""Batched matrix product: a SIMD Numba kernel for batches of small matrices, BLAS for the rest.

The dispatch rule is one function, ``_use_numba_matmul``; ``matmul`` is the
public entry point and ``matmul_numpy`` its twin.
"""
import math

import numpy as np

from .backend import numpy_selected
from .jit import jit
from .simd import VECTOR_BYTES, lanes, vfma, vload, vsplat, vstore


def matmul_numpy(a, b):
    """The twin: ``np.matmul`` (BLAS)."""
    return np.matmul(a, b)


# The tiles: C[rows, j0:j0+w] = A[rows, :] @ B[:, j0:j0+w] for 4 rows and
# w = 3, 2 or 1 vectors of columns (or 8 rows and 1 vector), accumulated in
# 12, 8, 4 (or 8) registers while k runs. Each k step loads a piece of row k
# of B and broadcasts one element of A per row: this keeps the loads few and
# the inner loop free of memory writes. Row indices past the end repeat the
# last row (the same value is stored twice); columns past the end are masked.
@jit()
def _tile_4x3(A, B, C, i0, i1, i2, i3, j0):
    step = lanes(C)
    n0 = C.shape[1] - j0  # how many columns are left: vload/vstore clip to the lane count
    n1, n2 = n0 - step, n0 - 2 * step
    zero = C.dtype.type(0)
    c00 = c01 = c02 = c10 = c11 = c12 = c20 = c21 = c22 = c30 = c31 = c32 = vsplat(zero)
    for k in range(A.shape[1]):
        b_row = B[k]
        b0 = vload(b_row, j0, n0, zero)
        b1 = vload(b_row, j0 + step, n1, zero)
        b2 = vload(b_row, j0 + 2 * step, n2, zero)
        a = vsplat(A[i0, k])
        c00, c01, c02 = vfma(c00, a, b0), vfma(c01, a, b1), vfma(c02, a, b2)
        a = vsplat(A[i1, k])
        c10, c11, c12 = vfma(c10, a, b0), vfma(c11, a, b1), vfma(c12, a, b2)
        a = vsplat(A[i2, k])
        c20, c21, c22 = vfma(c20, a, b0), vfma(c21, a, b1), vfma(c22, a, b2)
        a = vsplat(A[i3, k])
        c30, c31, c32 = vfma(c30, a, b0), vfma(c31, a, b1), vfma(c32, a, b2)
    for i, v0, v1, v2 in ((i0, c00, c01, c02), (i1, c10, c11, c12), (i2, c20, c21, c22), (i3, c30, c31, c32)):
        vstore(C[i], j0, n0, v0)
        vstore(C[i], j0 + step, n1, v1)
        vstore(C[i], j0 + 2 * step, n2, v2)


@jit()
def _tile_4x2(A, B, C, i0, i1, i2, i3, j0):
    step = lanes(C)
    n0 = C.shape[1] - j0
    n1 = n0 - step
    zero = C.dtype.type(0)
    c00 = c01 = c10 = c11 = c20 = c21 = c30 = c31 = vsplat(zero)
    for k in range(A.shape[1]):
        b_row = B[k]
        b0 = vload(b_row, j0, n0, zero)
        b1 = vload(b_row, j0 + step, n1, zero)
        a = vsplat(A[i0, k])
        c00, c01 = vfma(c00, a, b0), vfma(c01, a, b1)
        a = vsplat(A[i1, k])
        c10, c11 = vfma(c10, a, b0), vfma(c11, a, b1)
        a = vsplat(A[i2, k])
        c20, c21 = vfma(c20, a, b0), vfma(c21, a, b1)
        a = vsplat(A[i3, k])
        c30, c31 = vfma(c30, a, b0), vfma(c31, a, b1)
    for i, v0, v1 in ((i0, c00, c01), (i1, c10, c11), (i2, c20, c21), (i3, c30, c31)):
        vstore(C[i], j0, n0, v0)
        vstore(C[i], j0 + step, n1, v1)


@jit()
def _tile_4x1(A, B, C, i0, i1, i2, i3, j0):
    n0 = C.shape[1] - j0
    zero = C.dtype.type(0)
    c0 = c1 = c2 = c3 = vsplat(zero)
    for k in range(A.shape[1]):
        b0 = vload(B[k], j0, n0, zero)
        c0 = vfma(c0, vsplat(A[i0, k]), b0)
        c1 = vfma(c1, vsplat(A[i1, k]), b0)
        c2 = vfma(c2, vsplat(A[i2, k]), b0)
        c3 = vfma(c3, vsplat(A[i3, k]), b0)
    vstore(C[i0], j0, n0, c0)
    vstore(C[i1], j0, n0, c1)
    vstore(C[i2], j0, n0, c2)
    vstore(C[i3], j0, n0, c3)


@jit()
def _tile_8x1(A, B, C, i0):
    """Rows i0..i0+7 of C when C is at most one vector wide: 8 rows keep 8
    independent accumulators going (4 would wait on the FMA latency)."""
    last = C.shape[0] - 1
    i1, i2, i3 = min(i0 + 1, last), min(i0 + 2, last), min(i0 + 3, last)
    i4, i5, i6, i7 = min(i0 + 4, last), min(i0 + 5, last), min(i0 + 6, last), min(i0 + 7, last)
    n0 = C.shape[1]
    zero = C.dtype.type(0)
    c0 = c1 = c2 = c3 = c4 = c5 = c6 = c7 = vsplat(zero)
    for k in range(A.shape[1]):
        b0 = vload(B[k], 0, n0, zero)
        c0 = vfma(c0, vsplat(A[i0, k]), b0)
        c1 = vfma(c1, vsplat(A[i1, k]), b0)
        c2 = vfma(c2, vsplat(A[i2, k]), b0)
        c3 = vfma(c3, vsplat(A[i3, k]), b0)
        c4 = vfma(c4, vsplat(A[i4, k]), b0)
        c5 = vfma(c5, vsplat(A[i5, k]), b0)
        c6 = vfma(c6, vsplat(A[i6, k]), b0)
        c7 = vfma(c7, vsplat(A[i7, k]), b0)
    for i, v in ((i0, c0), (i1, c1), (i2, c2), (i3, c3), (i4, c4), (i5, c5), (i6, c6), (i7, c7)):
        vstore(C[i], 0, n0, v)


@jit(forceinline=True)
def _matmul_one(A, B, C):
    """C = A @ B for one matrix; B and C have contiguous rows, A any strides."""
    M, N = C.shape
    step = lanes(C)
    if N <= step:  # one vector per row: 8 rows at a time
        for i0 in range(0, M, 8):
            _tile_8x1(A, B, C, i0)
        return
    for i0 in range(0, M, 4):
        i1, i2, i3 = min(i0 + 1, M - 1), min(i0 + 2, M - 1), min(i0 + 3, M - 1)
        j0 = 0
        while j0 < N:  # widest tile first; a tile of fewer vectors for the last columns
            if N - j0 > 2 * step:
                _tile_4x3(A, B, C, i0, i1, i2, i3, j0)
                j0 += 3 * step
            elif N - j0 > step:
                _tile_4x2(A, B, C, i0, i1, i2, i3, j0)
                j0 += 2 * step
            else:
                _tile_4x1(A, B, C, i0, i1, i2, i3, j0)
                j0 += step


# The batch loops: one for B stored as is, one for B stored transposed (the
# common case: Q @ K.swapaxes(-1, -2) and the backward's g @ B.swapaxes).
# Two small loops rather than one with a runtime flag: LLVM optimised the
# single big loop ~40% worse.
@jit(forceinline=True)
def _item(index, p):
    """Which item of an operand's own batch output item p uses (empty index: p itself)."""
    return index[p] if index.size else p


@jit()
def _matmul_batch(a, b, out, a_index, b_index):
    """out[p] = a[i] @ b[j] for every output item p (i, j from the index arrays)."""
    for p in range(out.shape[0]):
        _matmul_one(a[_item(a_index, p)], b[_item(b_index, p)], out[p])


@jit()
def _matmul_batch_b_transposed(a, b_t, out, a_index, b_index):
    """Same, but b_t holds B^T (each item N x K): the tiles load rows of B, so
    each B^T is first copied into a K x N panel, small enough to stay in L1.
    (Still 1.4x faster than np.matmul, which reads B^T in place.)"""
    N, K = b_t.shape[1], b_t.shape[2]
    panel = np.empty((K, N), dtype=out.dtype)
    for p in range(out.shape[0]):
        b_item = b_t[_item(b_index, p)]
        for j in range(N):
            for k in range(K):
                panel[k, j] = b_item[j, k]
        _matmul_one(a[_item(a_index, p)], panel, out[p])


_NUMBA_MATMUL_MAX_DIM = 32  # largest M, K or N for the Numba kernel (measured: 0.8-1.0x of BLAS at 64)


def _use_numba_matmul(a, b):
    """THE dispatch rule: Numba kernel or BLAS (np.matmul) for ``a @ b``?

    Numba: a batch of small matrices where both sides bring their own batch
    (attention's Q @ K^T, and g @ V^T in the backward), because numpy then
    calls BLAS once per tiny matrix. BLAS everywhere else, each case measured
    (examples/benchmark_kernels.py, AVX-512 Xeon, float32):
      * 2-D products, and a batch times one shared 2-D weight (``matmul``
        folds that into a single 2-D BLAS call);
      * any of M, K, N above _NUMBA_MATMUL_MAX_DIM;
      * output rows that fit one vector register (N <= 16 float32 with
        AVX-512): BLAS's small-matrix kernel is as fast (kernel 0.9x);
      * A given as a transposed view (the backward's A^T @ g): BLAS reads it
        in place through its transpose flag (kernel 0.75x).
    """
    if a.ndim < 3 or b.ndim < 3:
        return False
    M, K, N, limit = a.shape[-2], a.shape[-1], b.shape[-1], _NUMBA_MATMUL_MAX_DIM
    if M > limit or K > limit or N > limit or K != b.shape[-2]:  # (a K mismatch: np.matmul raises)
        return False
    if a.dtype != b.dtype or a.dtype.char not in "fd":  # float32 / float64
        return False
    if N <= VECTOR_BYTES // a.itemsize:
        return False
    return a.flags.c_contiguous or not a.swapaxes(-1, -2).flags.c_contiguous


def _contiguous_or_transposed(x):
    """(array, transposed): the C-contiguous array to hand a kernel for ``x``.

    A ``swapaxes(-1, -2)`` view of a contiguous array is passed as that array
    plus transposed=True (no copy); any other layout is copied."""
    if x.flags.c_contiguous:
        return x, False
    swapped = x.swapaxes(-1, -2)
    if swapped.flags.c_contiguous:
        return swapped, True
    return np.ascontiguousarray(x), False


_SAME_BATCH = np.empty(0, dtype=np.int64)  # index array meaning "no broadcasting on this side"


def _batch_index(batch_shape, out_batch_shape):
    """For each output batch item (flattened), which item of this operand's own batch it uses."""
    if batch_shape == out_batch_shape:
        return _SAME_BATCH
    own = np.arange(math.prod(batch_shape), dtype=np.int64).reshape(batch_shape)
    return np.broadcast_to(own, out_batch_shape).flatten()  # a fresh writeable array: one Numba signature


def matmul(a, b):
    """``a @ b`` for arrays with ndim >= 2 (batch dims broadcast like np.matmul)."""
    if numpy_selected():
        return matmul_numpy(a, b)
    if not _use_numba_matmul(a, b):
        if b.ndim == 2 and a.ndim > 2 and a.dtype == b.dtype and a.shape[-1] == b.shape[0]:
            # one shared weight: fold the batch into the rows, one BLAS call
            rows = a.reshape(-1, a.shape[-1])
            return np.matmul(rows, b).reshape(a.shape[:-1] + (b.shape[-1],))
        return np.matmul(a, b)
    a_batch, b_batch = a.shape[:-2], b.shape[:-2]
    out_batch = a_batch if a_batch == b_batch else np.broadcast_shapes(a_batch, b_batch)
    a = np.ascontiguousarray(a)
    b_array, b_transposed = _contiguous_or_transposed(b)
    kernel = _matmul_batch_b_transposed if b_transposed else _matmul_batch
    out = np.empty(out_batch + (a.shape[-2], b.shape[-1]), dtype=a.dtype)
    kernel(a.reshape((math.prod(a_batch),) + a.shape[-2:]),
           b_array.reshape((math.prod(b_batch),) + b_array.shape[-2:]),
           out.reshape((math.prod(out_batch),) + out.shape[-2:]),
           _batch_index(a_batch, out_batch), _batch_index(b_batch, out_batch))
    return out
