"""Batched matrix product: a Numba kernel for batches of small matrices.

``matmul(a, b)``, registered for ``ops/matmul.py``'s ``matmul_arrays`` where it fits, is
``a @ b`` with numpy's broadcasting. Attention run op by op multiplies
hundreds of tiny matrices per call (128 sentences x 4 heads, 12-19 positions, 16 features),
where ``np.matmul`` calls BLAS once per matrix; the kernel does the batch in one call,
reading the strided head views in place. ``matmul_loops`` is the kernel as plain loops.
"""
import functools
import math

import numpy as np

from ..ops.matmul import matmul_arrays
from .jit import jit
from .registry import kernel_for
from .simd import flat, lanes, vbroadcast, vfma, vload, vsplat, vstore


# The kernel sees each operand as a flat array over its memory, where each matrix starts
# (one offset per output item: a broadcast batch repeats offsets) and its strides in elements:
# A_p[i, k] = a[a_items[p] + i * a_row + k * a_col], B_p[k, j] = b[b_items[p] + k * b_row + j].
def matmul_loops(a, a_items, a_row, a_col, b, b_items, b_row, out, K):
    """What the kernel computes, as plain loops: out[p, i, j] = sum over k of A_p[i, k] * B_p[k, j]."""
    items, M, N = out.shape
    for p in range(items):
        for i in range(M):
            for j in range(N):
                total = out.dtype.type(0)
                for k in range(K):
                    total += a[a_items[p] + i * a_row + k * a_col] * b[b_items[p] + k * b_row + j]
                out[p, i, j] = total


@jit(forceinline=True)
def four_rows_times(a, a_rows, a_col, b, b_start, b_row, c, c_rows, N, K):
    """Four rows of a product on flat arrays: for r < 4 and j < N,
    c[c_rows[r] + j] = sum over k < K of a[a_rows[r] + k * a_col] * b[b_start + k * b_row + j].

    A tile is 4 rows x 2 vectors of columns, its 8 sums in registers while k runs: per k,
    two vectors of B's row k and one broadcast element of A per row give 8 FMAs."""
    step, zero = lanes(c), c.dtype.type(0)
    for j in range(0, N, 2 * step):
        n_lo, n_hi = N - j, N - j - step  # columns left for each vector (<= 0: none)
        s0 = t0 = s1 = t1 = s2 = t2 = s3 = t3 = vsplat(zero)
        for k in range(K):
            b_k = b_start + k * b_row + j
            lo, hi = vload(b, b_k, n_lo, zero), vload(b, b_k + step, n_hi, zero)
            x = vbroadcast(a, a_rows[0] + k * a_col)
            s0, t0 = vfma(s0, x, lo), vfma(t0, x, hi)
            x = vbroadcast(a, a_rows[1] + k * a_col)
            s1, t1 = vfma(s1, x, lo), vfma(t1, x, hi)
            x = vbroadcast(a, a_rows[2] + k * a_col)
            s2, t2 = vfma(s2, x, lo), vfma(t2, x, hi)
            x = vbroadcast(a, a_rows[3] + k * a_col)
            s3, t3 = vfma(s3, x, lo), vfma(t3, x, hi)
        for r, s, t in ((0, s0, t0), (1, s1, t1), (2, s2, t2), (3, s3, t3)):
            vstore(c, c_rows[r] + j, n_lo, s)
            vstore(c, c_rows[r] + j + step, n_hi, t)


@jit(forceinline=True)
def rows_times(a, a_start, a_row, a_col, b, b_start, b_row, c, c_start, c_row, M, N, K):
    """C = A @ B, (M, K) @ (K, N), on flat arrays: A[i, k] = a[a_start + i * a_row + k * a_col],
    B[k, j] = b[b_start + k * b_row + j], C[i, j] = c[c_start + i * c_row + j]. Rows go 4 at a
    time; the last group ends at row M - 1 (some rows computed twice); M < 4 repeats the last."""
    last = M - 1
    for i0 in range(0, M, 4):
        i = max(min(i0, M - 4), 0)
        rows = (i, min(i + 1, last), min(i + 2, last), min(i + 3, last))
        a_rows = (a_start + rows[0] * a_row, a_start + rows[1] * a_row, a_start + rows[2] * a_row,
                  a_start + rows[3] * a_row)
        c_rows = (c_start + rows[0] * c_row, c_start + rows[1] * c_row, c_start + rows[2] * c_row,
                  c_start + rows[3] * c_row)
        four_rows_times(a, a_rows, a_col, b, b_start, b_row, c, c_rows, N, K)


@jit()
def _matmul_kernel(a, a_items, a_row, a_col, b, b_items, b_row, out, K):
    """``matmul_loops`` for B with contiguous rows (b_col = 1), fast."""
    items, M, N = out.shape
    for p in range(items):
        rows_times(a, a_items[p], a_row, a_col, b, b_items[p], b_row, flat(out), p * M * N, N, M, N, K)


def use_numba_matmul(a, b):
    """The kernel where it measured faster than np.matmul: >= 64 float matrices of 12 to 32 rows,
    K <= 32, N whole tiles up to 32, B's rows contiguous (op-by-op attention's P @ V, dS @ K, Pᵀ @ G)."""
    if a.ndim < 3 or b.ndim < 3 or a.dtype != b.dtype or a.dtype.char not in "fd":
        return False
    (M, K), (K_b, N) = a.shape[-2:], b.shape[-2:]
    return (K == K_b and 12 <= M <= 32 and 0 < K <= 32 and 0 < N <= 32 and N % (2 * lanes(a)) == 0
            and b.strides[-1] == b.itemsize and max(math.prod(a.shape[:-2]), math.prod(b.shape[:-2])) >= 64)


def _memory(x):
    """(flat, row, col, batch): x's memory as a read-only 1-D array from its first element,
    and its strides in elements (views with negative or odd strides are copied first)."""
    size = x.itemsize
    if any(s < 0 or s % size for s in x.strides):
        x = np.ascontiguousarray(x)
    strides = [s // size for s in x.strides]
    span = 1 + sum((n - 1) * s for n, s in zip(x.shape, strides))
    flat = np.lib.stride_tricks.as_strided(x, shape=(span,), strides=(size,), writeable=False)
    return flat, strides[-2], strides[-1], tuple(strides[:-2])


@functools.lru_cache(maxsize=256)
def _item_offsets(batch_shape, batch_strides, out_batch):
    """Where each output item's matrix starts in an operand (in elements), its batch
    dimensions broadcast to ``out_batch`` like np.matmul's."""
    offsets = np.zeros((), dtype=np.int64)
    for n, stride in zip(batch_shape, batch_strides):
        offsets = offsets[..., None] + np.arange(n, dtype=np.int64) * stride
    return np.broadcast_to(offsets, out_batch).flatten()


def _example(rng, dtype, size):
    """A batch of small matrices (the Numba kernel's case; 32 columns are whole tiles at any
    vector width), or op-by-op attention's P @ V at the model's shapes."""
    batch, length, columns = (64, 12, 32) if size == "small" else (128 * 4, 19, 16)
    return (rng.random((batch, length, length)).astype(dtype),
            rng.standard_normal((batch, length, columns)).astype(dtype))


@kernel_for(matmul_arrays, fits=use_numba_matmul, example=_example, compiled=[_matmul_kernel])
def matmul(a, b):
    """``a @ b`` for a batch of small matrices (batch dims broadcast like np.matmul)."""
    return matmul_batched(a, b)


def matmul_batched(a, b, kernel=None):
    """``a @ b`` by ``kernel`` (the Numba kernel; ``matmul_loops`` in the tests) into a fresh
    C-contiguous array (operands without empty dimensions)."""
    kernel = _matmul_kernel if kernel is None else kernel
    if b.strides[-1] != b.itemsize:
        b = np.ascontiguousarray(b)  # the kernel reads rows of B
    (M, K), N = a.shape[-2:], b.shape[-1]
    a_batch, b_batch = a.shape[:-2], b.shape[:-2]
    out_batch = a_batch if a_batch == b_batch else np.broadcast_shapes(a_batch, b_batch)
    out = np.empty(out_batch + (M, N), dtype=a.dtype)
    a_flat, a_row, a_col, a_strides = _memory(a)
    b_flat, b_row, _, b_strides = _memory(b)
    kernel(a_flat, _item_offsets(a_batch, a_strides, out_batch), a_row, a_col,
           b_flat, _item_offsets(b_batch, b_strides, out_batch), b_row,
           out.reshape((math.prod(out_batch), M, N)), K)
    return out
