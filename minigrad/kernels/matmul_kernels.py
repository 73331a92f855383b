"""Batched matrix product: a SIMD Numba kernel for batches of small matrices, BLAS for the rest.

The dispatch rule is one function, ``_use_numba_matmul``; ``matmul`` is the
public entry point and ``matmul_numpy`` its twin.

Where the time goes (float32, 512 matrices, AVX-512 Xeon, 2 vCPUs shared
with other work): np.matmul calls BLAS once per 20x20 matrix, ~250-450 ns
each. The kernel computes a matrix in ~120 ns of arithmetic (P @ V: 400
vector FMAs, each with a broadcast load of one element of A), so a batch
costs mostly the memory traffic: reading A and B and writing C (2.1 MB)
alone takes ~90-120 us here, and the kernel takes ~100-150 us. That, and
not the arithmetic, bounds the speed-up over np.matmul: P @ V measured
1.3x (quiet machine, numpy ~137 us) to 1.6x (busy machine, numpy ~240 us);
Q @ K^T 1.6-1.8x; Q @ K.swapaxes(-1, -2) 2.5-2.9x (numpy is slow on B^T).
What made the kernel fast (each measured, examples/benchmark_kernels.py):
  * reading A through ``vbroadcast`` (no negative-index check: 1.5x) and
    the batch through flat views (``flat``: no reference counting per
    matrix, ~10%) instead of ``a[p]`` views and tile calls with array args;
  * copies of the loops compiled for the attention shapes (1.15-1.45x);
  * A addressed at constant offsets from one register (``rebase``: ~7%);
  * B^T transposed with lane shuffles (``vtranspose``): LLVM vectorised a
    scalar transposing loop with gathers, ~30 cycles each on this CPU (the
    B^T product ran ~2.8x slower than the same product with B as is).
Tried and dropped: software prefetching of the next matrices (5-30%
slower), non-temporal stores of C (25% slower: they go to DRAM), a 20-row
tile for P @ V (same speed), 64-byte aligned operands (2%), a prange over
the batch (see examples/benchmark_kernels.py: slower once BLAS threads
have run). The benchmark's "memory floor" rows time a kernel that only
moves the bytes: at the P @ V shape it is ~1.5x np.matmul on a quiet
machine, the ceiling for any one-core kernel.
"""
import math

import numpy as np

from .backend import numpy_selected
from .jit import jit
from .simd import VECTOR_BYTES, flat, lanes, rebase, vbroadcast, vfma, vload, vsplat, vstore, vtranspose


def matmul_numpy(a, b):
    """The twin: ``np.matmul`` (BLAS)."""
    return np.matmul(a, b)


# The kernels work on the flattened arrays with element offsets: one matrix
# is a block of M*K (K*N, M*N) elements, and nothing creates an array view
# per matrix or per row. A may also be stored transposed (each item K x M):
# the tiles read A[i, k] at a0 + i*lda_i + k*lda_k, so A^T is read in place.
#
# The tiles: C[rows, j:j+w] = A[rows, :] @ B[:, j:j+w] for 10 rows and one
# vector of columns, or 5 (or 4) rows and two vectors: 10 (8) accumulator
# registers, enough to keep both FMA units busy (4-cycle latency), and few
# enough for AVX2's 16 registers. Each k step loads a piece of row k of B
# and broadcasts one element of A per row straight from memory into the FMA;
# the loop writes no memory. Columns past the end are masked; rows come from
# _rows_10 / _rows_5 / _rows_4. Four k steps per trip, with A read through
# rebase() from A[rows[0], k] on: with the sizes known at compile time every
# A offset within a trip is then a constant.
@jit(forceinline=True)
def _fma_10x1(acc, a, a_rows, k, b0):
    """One k step of the 10x1 tile: acc[r] += a[a_rows[r] + k] * b0."""
    return (vfma(acc[0], vbroadcast(a, a_rows[0] + k), b0), vfma(acc[1], vbroadcast(a, a_rows[1] + k), b0),
            vfma(acc[2], vbroadcast(a, a_rows[2] + k), b0), vfma(acc[3], vbroadcast(a, a_rows[3] + k), b0),
            vfma(acc[4], vbroadcast(a, a_rows[4] + k), b0), vfma(acc[5], vbroadcast(a, a_rows[5] + k), b0),
            vfma(acc[6], vbroadcast(a, a_rows[6] + k), b0), vfma(acc[7], vbroadcast(a, a_rows[7] + k), b0),
            vfma(acc[8], vbroadcast(a, a_rows[8] + k), b0), vfma(acc[9], vbroadcast(a, a_rows[9] + k), b0))


@jit(forceinline=True)
def _fma_5x2(acc, a, a_rows, k, b0, b1):
    """One k step of the 5x2 tile: acc[2r], acc[2r+1] += a[a_rows[r] + k] * (b0, b1)."""
    s0, s1, s2 = vbroadcast(a, a_rows[0] + k), vbroadcast(a, a_rows[1] + k), vbroadcast(a, a_rows[2] + k)
    s3, s4 = vbroadcast(a, a_rows[3] + k), vbroadcast(a, a_rows[4] + k)
    return (vfma(acc[0], s0, b0), vfma(acc[1], s0, b1), vfma(acc[2], s1, b0), vfma(acc[3], s1, b1),
            vfma(acc[4], s2, b0), vfma(acc[5], s2, b1), vfma(acc[6], s3, b0), vfma(acc[7], s3, b1),
            vfma(acc[8], s4, b0), vfma(acc[9], s4, b1))


@jit(forceinline=True)
def _fma_4x2(acc, a, a_rows, k, b0, b1):
    """One k step of the 4x2 tile: acc[2r], acc[2r+1] += a[a_rows[r] + k] * (b0, b1)."""
    s0, s1 = vbroadcast(a, a_rows[0] + k), vbroadcast(a, a_rows[1] + k)
    s2, s3 = vbroadcast(a, a_rows[2] + k), vbroadcast(a, a_rows[3] + k)
    return (vfma(acc[0], s0, b0), vfma(acc[1], s0, b1), vfma(acc[2], s1, b0), vfma(acc[3], s1, b1),
            vfma(acc[4], s2, b0), vfma(acc[5], s2, b1), vfma(acc[6], s3, b0), vfma(acc[7], s3, b1))


@jit(forceinline=True)
def _rows_10(i0, M):
    """The 10 row indices of the tile that starts at row i0. The last tile of
    a matrix is moved up to end at row M-1 (overlapping the one before: a few
    rows are computed twice) so that its rows stay consecutive: with M known
    at compile time the A offsets are then constants. Only for M < 10 is the
    last row repeated (the same value is stored twice)."""
    first, last = max(min(i0, M - 10), 0), M - 1
    return (first, min(first + 1, last), min(first + 2, last), min(first + 3, last), min(first + 4, last),
            min(first + 5, last), min(first + 6, last), min(first + 7, last), min(first + 8, last),
            min(first + 9, last))


@jit(forceinline=True)
def _rows_5(i0, M):
    """Same for the 5-row tile."""
    first, last = max(min(i0, M - 5), 0), M - 1
    return (first, min(first + 1, last), min(first + 2, last), min(first + 3, last), min(first + 4, last))


@jit(forceinline=True)
def _rows_4(i0, M):
    """Same for the 4-row tile."""
    first, last = max(min(i0, M - 4), 0), M - 1
    return (first, min(first + 1, last), min(first + 2, last), min(first + 3, last))


@jit(forceinline=True)
def _tile_10x1(a, a0, lda_i, lda_k, b, c, j, N, rows, K):
    """C[rows, j:j+step] where A[i, k] = a[a0 + i*lda_i + k*lda_k], B[k, j] =
    b[k*N + j] and C[i, j] = c[i*N + j] (b and c start at this matrix)."""
    n = N - j  # columns left: vload/vstore clip to one vector
    zero = c.dtype.type(0)
    a_first, i0 = a0 + rows[0] * lda_i, rows[0]
    a_rows = (0, (rows[1] - i0) * lda_i, (rows[2] - i0) * lda_i, (rows[3] - i0) * lda_i, (rows[4] - i0) * lda_i,
              (rows[5] - i0) * lda_i, (rows[6] - i0) * lda_i, (rows[7] - i0) * lda_i, (rows[8] - i0) * lda_i,
              (rows[9] - i0) * lda_i)
    z = vsplat(zero)
    acc = (z, z, z, z, z, z, z, z, z, z)
    k = 0
    while k + 4 <= K:
        a_k, b_k = rebase(a, a_first + k * lda_k), k * N + j
        acc = _fma_10x1(acc, a_k, a_rows, 0, vload(b, b_k, n, zero))
        acc = _fma_10x1(acc, a_k, a_rows, lda_k, vload(b, b_k + N, n, zero))
        acc = _fma_10x1(acc, a_k, a_rows, 2 * lda_k, vload(b, b_k + 2 * N, n, zero))
        acc = _fma_10x1(acc, a_k, a_rows, 3 * lda_k, vload(b, b_k + 3 * N, n, zero))
        k += 4
    while k < K:
        acc = _fma_10x1(acc, rebase(a, a_first + k * lda_k), a_rows, 0, vload(b, k * N + j, n, zero))
        k += 1
    vstore(c, rows[0] * N + j, n, acc[0]), vstore(c, rows[1] * N + j, n, acc[1])
    vstore(c, rows[2] * N + j, n, acc[2]), vstore(c, rows[3] * N + j, n, acc[3])
    vstore(c, rows[4] * N + j, n, acc[4]), vstore(c, rows[5] * N + j, n, acc[5])
    vstore(c, rows[6] * N + j, n, acc[6]), vstore(c, rows[7] * N + j, n, acc[7])
    vstore(c, rows[8] * N + j, n, acc[8]), vstore(c, rows[9] * N + j, n, acc[9])


@jit(forceinline=True)
def _tile_5x2(a, a0, lda_i, lda_k, b, c, j, N, rows, K):
    """C[rows, j:j+2*step], same arguments."""
    step = lanes(c)
    n0 = N - j
    n1 = n0 - step
    zero = c.dtype.type(0)
    a_first, i0 = a0 + rows[0] * lda_i, rows[0]
    a_rows = (0, (rows[1] - i0) * lda_i, (rows[2] - i0) * lda_i, (rows[3] - i0) * lda_i, (rows[4] - i0) * lda_i)
    z = vsplat(zero)
    acc = (z, z, z, z, z, z, z, z, z, z)
    k = 0
    while k + 4 <= K:
        a_k, b_k = rebase(a, a_first + k * lda_k), k * N + j
        acc = _fma_5x2(acc, a_k, a_rows, 0, vload(b, b_k, n0, zero), vload(b, b_k + step, n1, zero))
        b_k += N
        acc = _fma_5x2(acc, a_k, a_rows, lda_k, vload(b, b_k, n0, zero), vload(b, b_k + step, n1, zero))
        b_k += N
        acc = _fma_5x2(acc, a_k, a_rows, 2 * lda_k, vload(b, b_k, n0, zero), vload(b, b_k + step, n1, zero))
        b_k += N
        acc = _fma_5x2(acc, a_k, a_rows, 3 * lda_k, vload(b, b_k, n0, zero), vload(b, b_k + step, n1, zero))
        k += 4
    while k < K:
        b_k = k * N + j
        acc = _fma_5x2(acc, rebase(a, a_first + k * lda_k), a_rows, 0,
                       vload(b, b_k, n0, zero), vload(b, b_k + step, n1, zero))
        k += 1
    vstore(c, rows[0] * N + j, n0, acc[0]), vstore(c, rows[0] * N + j + step, n1, acc[1])
    vstore(c, rows[1] * N + j, n0, acc[2]), vstore(c, rows[1] * N + j + step, n1, acc[3])
    vstore(c, rows[2] * N + j, n0, acc[4]), vstore(c, rows[2] * N + j + step, n1, acc[5])
    vstore(c, rows[3] * N + j, n0, acc[6]), vstore(c, rows[3] * N + j + step, n1, acc[7])
    vstore(c, rows[4] * N + j, n0, acc[8]), vstore(c, rows[4] * N + j + step, n1, acc[9])


@jit(forceinline=True)
def _tile_4x2(a, a0, lda_i, lda_k, b, c, j, N, rows, K):
    """C[rows, j:j+2*step] with 4 rows (8 accumulators: still enough for the FMA latency)."""
    step = lanes(c)
    n0 = N - j
    n1 = n0 - step
    zero = c.dtype.type(0)
    a_first, i0 = a0 + rows[0] * lda_i, rows[0]
    a_rows = (0, (rows[1] - i0) * lda_i, (rows[2] - i0) * lda_i, (rows[3] - i0) * lda_i)
    z = vsplat(zero)
    acc = (z, z, z, z, z, z, z, z)
    k = 0
    while k + 4 <= K:
        a_k, b_k = rebase(a, a_first + k * lda_k), k * N + j
        acc = _fma_4x2(acc, a_k, a_rows, 0, vload(b, b_k, n0, zero), vload(b, b_k + step, n1, zero))
        b_k += N
        acc = _fma_4x2(acc, a_k, a_rows, lda_k, vload(b, b_k, n0, zero), vload(b, b_k + step, n1, zero))
        b_k += N
        acc = _fma_4x2(acc, a_k, a_rows, 2 * lda_k, vload(b, b_k, n0, zero), vload(b, b_k + step, n1, zero))
        b_k += N
        acc = _fma_4x2(acc, a_k, a_rows, 3 * lda_k, vload(b, b_k, n0, zero), vload(b, b_k + step, n1, zero))
        k += 4
    while k < K:
        b_k = k * N + j
        acc = _fma_4x2(acc, rebase(a, a_first + k * lda_k), a_rows, 0,
                       vload(b, b_k, n0, zero), vload(b, b_k + step, n1, zero))
        k += 1
    vstore(c, rows[0] * N + j, n0, acc[0]), vstore(c, rows[0] * N + j + step, n1, acc[1])
    vstore(c, rows[1] * N + j, n0, acc[2]), vstore(c, rows[1] * N + j + step, n1, acc[3])
    vstore(c, rows[2] * N + j, n0, acc[4]), vstore(c, rows[2] * N + j + step, n1, acc[5])
    vstore(c, rows[3] * N + j, n0, acc[6]), vstore(c, rows[3] * N + j + step, n1, acc[7])


@jit(forceinline=True)
def _matmul_one(a, a0, lda_i, lda_k, b, c, M, K, N):
    """C = A @ B for one matrix (A as in _tile_10x1; b, c start at this matrix)."""
    step = lanes(c)
    j = np.intp(0)  # (a literal 0 would compile each tile twice: for j == 0 and for any j)
    while j < N:  # two vectors of columns at a time; one for the last (or only) vector
        if N - j > step and M % 5 == 0:
            for i0 in range(0, M, 5):
                _tile_5x2(a, a0, lda_i, lda_k, b, c, j, N, _rows_5(i0, M), K)
            j += 2 * step
        elif N - j > step:  # fewer rows computed twice (M = 16: 16 rows instead of 20, measured 1.15x)
            for i0 in range(0, M, 4):
                _tile_4x2(a, a0, lda_i, lda_k, b, c, j, N, _rows_4(i0, M), K)
            j += 2 * step
        else:
            for i0 in range(0, M, 10):
                _tile_10x1(a, a0, lda_i, lda_k, b, c, j, N, _rows_10(i0, M), K)
            j += step


@jit(forceinline=True)
def _item(index, p):
    """Which item of an operand's own batch output item p uses (empty index: p itself)."""
    return index[p] if index.size else p


@jit(forceinline=True)
def _transpose_into(panel, bt, K, N):
    """panel (K x N) = bt (N x K) transposed, one lanes x lanes block at a time."""
    step = lanes(panel)
    for j0 in range(0, N, step):
        for k0 in range(0, K, step):
            vtranspose(bt, j0 * K + k0, K, N - j0, K - k0, panel, k0 * N + j0, N)


@jit(forceinline=True)
def _batch(a, b, out, a_index, b_index, M, K, N, a_transposed, b_transposed):
    """out[p] = A[i] @ B[j] for every output item p (i, j from the index arrays).
    a holds A (items M x K) or, a_transposed, A^T (items K x M); b holds B
    (K x N) or, b_transposed, B^T (N x K). The tiles load rows of B, so each
    B^T is first transposed into a K x N panel, small enough to stay in L1."""
    af, bf, cf = flat(a), flat(b), flat(out)
    lda_i, lda_k = (1, M) if a_transposed else (K, 1)
    panel = np.empty(K * N if b_transposed else 0, dtype=out.dtype)
    for p in range(out.shape[0]):
        b_item = rebase(bf, _item(b_index, p) * (K * N))
        if b_transposed:
            _transpose_into(panel, b_item, K, N)
            b_item = panel
        _matmul_one(af, _item(a_index, p) * (M * K), lda_i, lda_k, b_item, rebase(cf, p * (M * N)), M, K, N)


def _kernel(a_transposed, b_transposed, sizes=None):
    """The compiled batch loop for one layout of A and B: (a, b, out, a_index,
    b_index) -> None. sizes=(M, K, N) compiles it for those sizes only, as
    constants: LLVM then unrolls the row loop, folds the row arithmetic and
    the column masks, and reads A at constant offsets (measured 1.15-1.45x
    faster than the copy for any sizes). Numba freezes a closure's values as
    constants. Each kernel is compiled on its first call: the first one ~5-6 s
    with an empty cache (mostly the shared helpers), each further one <1 s."""
    unrolled = sizes is not None
    M0, K0, N0 = sizes if unrolled else (0, 0, 0)

    @jit()
    def kernel(a, b, out, a_index, b_index):
        M, N = out.shape[1], out.shape[2]
        K = a.shape[1] if a_transposed else a.shape[2]
        if unrolled:  # np.intp: plain ints to Numba, so every kernel shares one compiled _batch
            M, K, N = np.intp(M0), np.intp(K0), np.intp(N0)  # (LLVM still sees constants once it inlines)
        _batch(a, b, out, a_index, b_index, M, K, N, a_transposed, b_transposed)
    return kernel


# The kernels for any sizes, one per layout: B stored as is, B stored
# transposed (Q @ K.swapaxes(-1, -2) and the backward's g @ B.swapaxes), and
# the same with A stored transposed (the backward's A.swapaxes(-1, -2) @ g).
_LAYOUTS = ((False, False), (False, True), (True, False), (True, True))  # (a_transposed, b_transposed)
_GENERAL_KERNELS = {layout: _kernel(*layout) for layout in _LAYOUTS}

# And compiled for one shape each: the attention products of this repo's
# transformer with T = 20 positions and head size 16, forward and backward.
_UNROLLED = (  # (M, K, N, a_transposed, b_transposed)
    (20, 16, 20, False, True),   # scores Q @ K^T (K.swapaxes), and g @ V^T in the backward
    (20, 16, 20, False, False),  # the same with K^T stored contiguous
    (20, 20, 16, False, False),  # P @ V, and dS @ K in the backward
    (20, 20, 16, True, False),   # P^T @ g in the backward (A a transposed view)
    (16, 20, 20, True, False),   # Q^T @ dS in the backward (the gradient of K^T)
)
_UNROLLED_KERNELS = {key: _kernel(key[3], key[4], key[:3]) for key in _UNROLLED}


def _batch_kernel(M, K, N, a_transposed, b_transposed):
    """The kernel for these sizes and layout: the unrolled one if there is one."""
    kernel = _UNROLLED_KERNELS.get((M, K, N, a_transposed, b_transposed))
    return kernel if kernel is not None else _GENERAL_KERNELS[a_transposed, b_transposed]


_NUMBA_MATMUL_MAX_DIM = 32  # largest M, K or N for the Numba kernel (measured ~1.0x of BLAS at 32, 0.8-1.0x at 64)


def _use_numba_matmul(a, b):
    """THE dispatch rule: Numba kernel or BLAS (np.matmul) for ``a @ b``?

    Numba: a batch of small matrices where both sides bring their own batch
    (attention's Q @ K^T and P @ V, and their backward products), because
    numpy then calls BLAS once per tiny matrix. Measured (float32, 512
    items, examples/benchmark_kernels.py; ranges over quiet and busy runs):
    Q @ K^T 1.6-1.8x, P @ V 1.3-1.6x, Q @ K.swapaxes 2.5-2.9x, P^T @ g
    1.2-1.4x, Q^T @ g 1.1x; the kernel for any sizes: 1.2-2x where M, K, N
    <= 20, ~1.0x at 32x32x32. BLAS everywhere else:
      * 2-D products, and a batch times one shared 2-D weight (``matmul``
        folds that into a single 2-D BLAS call);
      * any of M, K, N above _NUMBA_MATMUL_MAX_DIM;
      * A given as a transposed view (the backward's A^T @ g), unless there
        is a kernel compiled for that shape (_UNROLLED) and the vectors are
        512-bit: BLAS reads A^T in place through its transpose flag and is
        fast at it; the kernel for any sizes measured 0.9-1.2x there, and the
        compiled-for-shape ones 0.8-1.0x with 256-bit vectors;
      * A and B both transposed views (kernel 0.5-1.2x).
    """
    if a.ndim < 3 or b.ndim < 3:
        return False
    (M, K), (K_b, N) = a.shape[-2:], b.shape[-2:]
    limit = _NUMBA_MATMUL_MAX_DIM
    if M > limit or K > limit or N > limit or K != K_b:  # (a K mismatch: np.matmul raises)
        return False
    if a.dtype != b.dtype or a.dtype.char not in "fd":  # float32 / float64
        return False
    if not _is_transposed(a):
        return True
    return VECTOR_BYTES == 64 and (M, K, N, True, _is_transposed(b)) in _UNROLLED_KERNELS


def _is_transposed(x):
    """True for a ``swapaxes(-1, -2)`` view of a C-contiguous array."""
    return not x.flags.c_contiguous and x.swapaxes(-1, -2).flags.c_contiguous


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
    a_array, a_transposed = _contiguous_or_transposed(a)
    b_array, b_transposed = _contiguous_or_transposed(b)
    (M, K), N = a.shape[-2:], b.shape[-1]
    kernel = _batch_kernel(M, K, N, a_transposed, b_transposed)
    a_batch, b_batch = a.shape[:-2], b.shape[:-2]
    if a_batch == b_batch and len(a_batch) == 1:  # the common case, kept short (every us counts at ~100 us)
        out = np.empty((a_batch[0], M, N), dtype=a.dtype)
        kernel(a_array, b_array, out, _SAME_BATCH, _SAME_BATCH)
        return out
    out_batch = a_batch if a_batch == b_batch else np.broadcast_shapes(a_batch, b_batch)
    out = np.empty(out_batch + (M, N), dtype=a.dtype)
    kernel(a_array.reshape((math.prod(a_batch),) + a_array.shape[-2:]),
           b_array.reshape((math.prod(b_batch),) + b_array.shape[-2:]),
           out.reshape((math.prod(out_batch),) + out.shape[-2:]),
           _batch_index(a_batch, out_batch), _batch_index(b_batch, out_batch))
    return out
