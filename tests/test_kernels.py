"""Tests for minigrad/kernels/: each Numba kernel against its numpy twin, the
edge cases (masked rows, huge logits, transposed operands), gradients against
finite differences, the backend switch and the cache fallback."""
import os
import subprocess
import sys
import tempfile
import textwrap
import warnings

import numpy as np
import pytest

from minigrad import kernels
from minigrad.kernels import jit, layer_norm_kernels, matmul_kernels, simd, softmax_kernels

DTYPES = [np.float32, np.float64]
TOL = {np.float32: dict(rtol=2e-5, atol=2e-5), np.float64: dict(rtol=1e-12, atol=1e-12)}
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(autouse=True)
def numba_backend():
    with kernels.use_backend("numba"):
        yield


def rand(shape, dtype, seed=0, scale=1.0):
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(dtype)


def run_python(code, **env):
    """Run code in a fresh interpreter from the repo root; returns stdout."""
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=REPO, capture_output=True,
                            text=True, env={**os.environ, **env}, timeout=600)
    assert result.returncode == 0, result.stderr
    return result.stdout


# --------------------------------------------------------------------------- matmul
MATMUL_SHAPES = [
    ((512, 20, 16), (512, 16, 20)),  # attention scores
    ((512, 20, 20), (512, 20, 16)),  # attention-weighted values
    ((3, 5, 7), (3, 7, 9)),
    ((2, 1, 1), (2, 1, 1)),
    ((4, 6, 1), (4, 1, 5)),  # K = 1
    ((4, 33, 17), (4, 17, 50)),  # ragged tails on every side
    ((2, 3, 8, 24), (2, 3, 24, 16)),  # 4-D batch, exact multiples of the vector width
    ((1, 3, 20, 16), (2, 3, 16, 20)),  # broadcast batch on the left
    ((2, 3, 20, 16), (3, 16, 20)),  # fewer batch dims on the right
    ((5, 32, 32), (5, 32, 32)),  # at the dispatch threshold (Numba)
    ((3, 33, 8), (3, 8, 40)),  # just above it (BLAS)
    ((4, 7, 3), (4, 3, 16)),  # one-vector rows (BLAS with AVX-512)
    ((6, 0, 3), (6, 3, 4)),  # empty
    ((6, 4, 0), (6, 0, 4)),  # K = 0 gives zeros
    ((20, 16), (16, 20)),  # 2-D (BLAS)
    ((4, 20, 16), (16, 24)),  # shared 2-D weight (one BLAS call)
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape_a,shape_b", MATMUL_SHAPES)
def test_matmul_matches_numpy(shape_a, shape_b, dtype):
    a, b = rand(shape_a, dtype, 1), rand(shape_b, dtype, 2)
    out = kernels.matmul(a, b)
    assert out.dtype == dtype and out.shape == np.matmul(a, b).shape
    np.testing.assert_allclose(out, np.matmul(a, b), **TOL[dtype])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("transpose_a,transpose_b", [(False, True), (True, False), (True, True)])
@pytest.mark.parametrize("shape_a,shape_b", [((512, 20, 16), (512, 16, 20)), ((3, 9, 13), (3, 13, 5)),
                                             ((2, 2, 20, 20), (1, 2, 20, 16))])
def test_matmul_transposed_views(shape_a, shape_b, transpose_a, transpose_b, dtype):
    """The autograd backward passes swapaxes(-1, -2) views; they must be read in place, correctly."""
    a, b = rand(shape_a, dtype, 3), rand(shape_b, dtype, 4)
    if transpose_a:
        a = np.ascontiguousarray(a.swapaxes(-1, -2)).swapaxes(-1, -2)
    if transpose_b:
        b = np.ascontiguousarray(b.swapaxes(-1, -2)).swapaxes(-1, -2)
    np.testing.assert_allclose(kernels.matmul(a, b), np.matmul(a, b), **TOL[dtype])


@pytest.mark.parametrize("dtype", DTYPES)
def test_matmul_other_strides_are_copied(dtype):
    a = rand((6, 20, 32), dtype, 5)[::2, :, ::2]  # no contiguous axis at all
    b = rand((3, 16, 12), dtype, 6)
    np.testing.assert_allclose(kernels.matmul(a, b), np.matmul(a, b), **TOL[dtype])


def _operands(m, k, n, dtype, a_transposed, b_transposed, batch=3):
    """(a, b, A, B): the operands as the batch kernels take them (A^T, B^T stored
    contiguous where transposed) and as plain A (batch x m x k), B (batch x k x n)."""
    a, b = rand((batch, m, k), dtype, 24), rand((batch, k, n), dtype, 25)
    a_arg = np.ascontiguousarray(a.swapaxes(-1, -2)) if a_transposed else a
    b_arg = np.ascontiguousarray(b.swapaxes(-1, -2)) if b_transposed else b
    return a_arg, b_arg, a, b


def _check_batch_kernel(kernel, m, k, n, dtype, a_transposed, b_transposed):
    a, b, a_plain, b_plain = _operands(m, k, n, dtype, a_transposed, b_transposed)
    out = np.full((3, m, n), np.nan, dtype=dtype)
    kernel(a, b, out, matmul_kernels._SAME_BATCH, matmul_kernels._SAME_BATCH)
    np.testing.assert_allclose(out, a_plain @ b_plain, **TOL[dtype])
    a_index, b_index = np.array([2, 0, 2, 1], dtype=np.int64), np.array([0, 0, 1, 2], dtype=np.int64)
    out = np.full((4, m, n), np.nan, dtype=dtype)  # broadcast batch: items picked by index
    kernel(a, b, out, a_index, b_index)
    np.testing.assert_allclose(out, a_plain[a_index] @ b_plain[b_index], **TOL[dtype])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m,k,n", [(20, 16, 20), (20, 20, 16), (1, 1, 1), (3, 5, 2), (9, 7, 8), (13, 3, 17),
                                   (5, 4, 33), (8, 2, 48), (17, 9, 50), (4, 0, 6), (16, 20, 20), (12, 13, 40),
                                   (11, 6, 16), (25, 32, 31)])
@pytest.mark.parametrize("a_transposed,b_transposed", matmul_kernels._LAYOUTS)
def test_batch_kernels_every_tile_shape(m, k, n, a_transposed, b_transposed, dtype):
    """The kernels for any sizes, directly, whatever the dispatch rule picks: every tile (10x1, 5x2,
    4x2) with ragged rows (M below the tile height, a last tile that overlaps the one before) and
    columns, K not a multiple of 4, all four layouts (A, B each as is or transposed), broadcast batches."""
    _check_batch_kernel(matmul_kernels._GENERAL_KERNELS[a_transposed, b_transposed], m, k, n, dtype,
                        a_transposed, b_transposed)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m,k,n,a_transposed,b_transposed", matmul_kernels._UNROLLED)
def test_unrolled_kernels(m, k, n, a_transposed, b_transposed, dtype):
    """The kernels compiled for one shape (the sizes as constants), and matmul picks them."""
    kernel = matmul_kernels._batch_kernel(m, k, n, a_transposed, b_transposed)
    assert kernel is matmul_kernels._UNROLLED_KERNELS[m, k, n, a_transposed, b_transposed]
    _check_batch_kernel(kernel, m, k, n, dtype, a_transposed, b_transposed)
    assert matmul_kernels._batch_kernel(m + 1, k, n, a_transposed, b_transposed) is \
        matmul_kernels._GENERAL_KERNELS[a_transposed, b_transposed]


def test_matmul_dispatch_rule():
    f32 = np.float32
    use = lambda a, b: matmul_kernels._use_numba_matmul(a, b)  # noqa: E731
    t = lambda shape: np.empty(shape[:-2] + shape[:-3:-1], f32).swapaxes(-1, -2)  # noqa: E731  a transposed view
    scores = (np.empty((512, 20, 16), f32), np.empty((512, 16, 20), f32))
    assert use(*scores)
    assert use(scores[0], t((512, 16, 20)))  # Q @ K.swapaxes: B^T is read in place
    wide = kernels.lanes(np.empty(0, f32)) == 16  # AVX-512
    assert use(t((512, 20, 20)), np.empty((512, 20, 16), f32)) == wide  # the backward's P^T @ g: read in place too
    assert not use(t((512, 20, 16)), np.empty((512, 16, 24), f32))  # other A^T: BLAS (its transpose flag)
    assert not use(t((512, 20, 20)), t((512, 20, 16)))  # A^T @ B^T: BLAS
    assert use(np.empty((1, 4, 20, 16), f32), np.empty((8, 4, 16, 20), f32))
    assert use(np.empty((512, 20, 20), f32), np.empty((512, 20, 16), f32))  # P @ V: one-vector rows
    blas = [((2560, 64), (64, 256)), ((1024, 1024), (1024, 1024)), ((128, 20, 64), (64, 256)),
            ((4, 128, 128), (4, 128, 128)), ((4, 20, 64), (4, 64, 20))]
    for shape_a, shape_b in blas:
        assert not use(np.empty(shape_a, f32), np.empty(shape_b, f32))
    assert not use(np.empty((8, 4, 24), np.float32), np.empty((8, 24, 24), np.float64))
    assert not use(np.empty((8, 4, 24), np.int64), np.empty((8, 24, 24), np.int64))


def test_matmul_uses_the_kernel_only_where_the_rule_says(monkeypatch):
    calls = []
    real = matmul_kernels._batch_kernel
    monkeypatch.setattr(matmul_kernels, "_batch_kernel", lambda *key: calls.append(key) or real(*key))
    a, b = rand((8, 20, 16), np.float32), rand((8, 16, 20), np.float32)
    kernels.matmul(a, b)
    kernels.matmul(a, np.ascontiguousarray(b.swapaxes(-1, -2)).swapaxes(-1, -2))
    p = rand((8, 20, 20), np.float32)
    kernels.matmul(p.swapaxes(-1, -2), rand((8, 20, 16), np.float32))
    wide = kernels.lanes(np.empty(0, np.float32)) == 16
    assert calls == [(20, 16, 20, False, False), (20, 16, 20, False, True)] + wide * [(20, 20, 16, True, False)]
    kernels.matmul(np.ascontiguousarray(b.swapaxes(-1, -2)).swapaxes(-1, -2), rand((8, 20, 24), np.float32))
    kernels.matmul(rand((40, 64), np.float32), rand((64, 32), np.float32))
    kernels.matmul(rand((8, 20, 64), np.float32), rand((64, 32), np.float32))
    kernels.matmul(p.swapaxes(-1, -2), p.swapaxes(-1, -2))  # A^T @ B^T
    assert len(calls) == 2 + wide


def test_matmul_with_256_bit_vectors():
    """MINIGRAD_VECTOR_BYTES=32 (the AVX2 width: 8 float32 / 4 float64 lanes, so the 5x2 tile
    covers 16 / 8 columns and N = 20 takes three tile columns). A fresh Numba cache: cached
    512-bit code would otherwise be loaded (Numba does not key its cache on globals)."""
    code = """
        import numpy as np
        from minigrad import kernels as K
        from minigrad.kernels import matmul_kernels as MK
        assert K.lanes(np.empty(0, np.float32)) == 8
        r = np.random.default_rng(0)
        cases = [(np.float32, 20, 16, 20, False, True), (np.float32, 20, 20, 16, False, False),
                 (np.float32, 16, 20, 20, True, False), (np.float32, 13, 7, 29, False, False),
                 (np.float64, 20, 20, 16, False, False), (np.float64, 11, 9, 21, False, True)]
        for dt, m, k, n, a_t, b_t in cases:
            a, b = r.standard_normal((4, m, k)).astype(dt), r.standard_normal((4, k, n)).astype(dt)
            a_stored = np.ascontiguousarray(a.swapaxes(-1, -2)) if a_t else a
            b_stored = np.ascontiguousarray(b.swapaxes(-1, -2)) if b_t else b
            tol = 2e-5 if dt == np.float32 else 1e-12
            np.testing.assert_allclose(K.matmul(a_stored.swapaxes(-1, -2) if a_t else a,
                                                b_stored.swapaxes(-1, -2) if b_t else b), a @ b, rtol=tol, atol=tol)
            out = np.empty((4, m, n), dt)  # the kernel itself, whatever the dispatch rule says
            MK._batch_kernel(m, k, n, a_t, b_t)(a_stored, b_stored, out, MK._SAME_BATCH, MK._SAME_BATCH)
            np.testing.assert_allclose(out, a @ b, rtol=tol, atol=tol)
        print("ok")
    """
    with tempfile.TemporaryDirectory() as cache:
        assert run_python(code, MINIGRAD_VECTOR_BYTES="32", NUMBA_CACHE_DIR=cache).strip() == "ok"


@pytest.mark.parametrize("dtype", DTYPES)
def test_simd_helpers_for_matmul(dtype):
    """vtranspose, vbroadcast, flat and rebase, compiled, against their plain-Python versions."""
    import numba

    @numba.njit
    def transpose(src, start, stride, rows, cols, dst, dst_start, dst_stride):
        simd.vtranspose(src, start, stride, rows, cols, dst, dst_start, dst_stride)

    @numba.njit
    def broadcast_from(x, start, index, out):
        simd.vstore(out, 0, out.size, simd.vbroadcast(simd.rebase(simd.flat(x), start), index))

    lanes = kernels.lanes(np.empty(0, dtype))
    src = np.arange(1000, dtype=dtype)
    # rows, cols (both clipped to lanes), start, stride, dst_start, dst_stride
    blocks = [(lanes, lanes, 0, 20, 3, 17), (4, lanes, 7, 16, 0, 20), (lanes + 3, 2, 1, 9, 5, lanes),
              (0, 3, 0, 5, 0, 5), (1, 1, 2, 3, 4, 5)]
    for rows, cols, start, stride, dst_start, dst_stride in blocks:
        want, got = np.full(600, -1, dtype=dtype), np.full(600, -1, dtype=dtype)
        simd.vtranspose(src, start, stride, rows, cols, want, dst_start, dst_stride)
        transpose(src, start, stride, rows, cols, got, dst_start, dst_stride)
        np.testing.assert_array_equal(got, want)
        r, c = min(rows, lanes) - 1, min(cols, lanes) - 1  # the last element of the block
        if r >= 0 and c >= 0:
            assert got[dst_start + c * dst_stride + r] == src[start + r * stride + c]
        assert (got != -1).sum() == max(r + 1, 0) * max(c + 1, 0)
    x, out = rand((3, 4), dtype, 30), np.zeros(lanes, dtype)
    broadcast_from(x, 5, 2, out)
    np.testing.assert_array_equal(out, x.flat[7])
    np.testing.assert_array_equal(simd.vbroadcast(simd.rebase(simd.flat(x), 5), 2), out)


def test_matmul_read_only_inputs():
    a, b = rand((4, 20, 20), np.float32, 1), rand((4, 20, 16), np.float32, 2)
    a.flags.writeable = b.flags.writeable = False
    for x, y in [(a, b), (a.swapaxes(-1, -2), b), (b.swapaxes(-1, -2), a)]:
        np.testing.assert_allclose(kernels.matmul(x, y), np.matmul(x, y), **TOL[np.float32])


def test_matmul_mismatched_shapes_raise_like_numpy():
    with pytest.raises(ValueError):
        kernels.matmul(np.ones((2, 3, 4), np.float32), np.ones((2, 5, 6), np.float32))


# --------------------------------------------------------------------------- softmax family
ROW_SHAPES = [(1, 1), (3, 7), (512, 20, 20), (2432, 68), (5, 100), (2, 3, 4, 9)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", ROW_SHAPES)
def test_softmax_and_log_softmax_match_numpy(shape, dtype):
    x = rand(shape, dtype, 7, scale=4.0)
    for kernel, twin in [(kernels.softmax, kernels.softmax_numpy), (kernels.log_softmax, kernels.log_softmax_numpy)]:
        out = kernel(x)
        assert out.dtype == dtype and out.shape == x.shape
        np.testing.assert_allclose(out, twin(x), **TOL[dtype])
    np.testing.assert_allclose(kernels.softmax(x).sum(-1), 1, rtol=1e-5 if dtype == np.float32 else 1e-13)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", ROW_SHAPES)
def test_backward_kernels_match_numpy(shape, dtype):
    x, grad = rand(shape, dtype, 8, scale=3.0), rand(shape, dtype, 9)
    y = kernels.softmax(x)
    dx = kernels.softmax_backward(y, grad)
    assert dx.dtype == dtype
    np.testing.assert_allclose(dx, kernels.softmax_backward_numpy(y, grad), **TOL[dtype])
    y = kernels.log_softmax(x)
    dx = kernels.log_softmax_backward(y, grad)
    assert dx.dtype == dtype
    np.testing.assert_allclose(dx, kernels.log_softmax_backward_numpy(y, grad), **TOL[dtype])


def non_contiguous_rows(dtype):
    return rand((6, 30), dtype, 10).T  # the kernels' wrappers must copy this


@pytest.mark.parametrize("dtype", DTYPES)
def test_softmax_non_contiguous_input(dtype):
    x = non_contiguous_rows(dtype)
    np.testing.assert_allclose(kernels.softmax(x), kernels.softmax_numpy(x), **TOL[dtype])
    np.testing.assert_allclose(kernels.log_softmax(x), kernels.log_softmax_numpy(x), **TOL[dtype])


@pytest.mark.parametrize("dtype", DTYPES)
def test_huge_logits_stay_finite(dtype):
    x = np.array([[1e4, -1e4, 0.0, 1e4 - 1], [-1e4, -1e4, -1e4, -1e4]], dtype=dtype)
    exact = kernels.softmax_numpy(x.astype(np.float64))
    for backend in kernels.BACKENDS:
        with kernels.use_backend(backend):
            y = kernels.softmax(x)
            log_y = kernels.log_softmax(x)
        assert np.isfinite(y).all() and np.isfinite(log_y).all()
        np.testing.assert_allclose(y, exact, rtol=1e-6, atol=1e-7)
        wide = x.astype(np.longdouble)  # the reference must not cancel at 1e4 either
        exact_log = (wide - wide.max(axis=-1, keepdims=True)) - np.log1p(np.exp(np.longdouble(-1)))
        exact_log[1] = np.log(np.longdouble(0.25))
        # (x - max) - log(sum) is exact up to the rounding of the result itself, not of |x| = 1e4
        resolution = 2 * np.finfo(dtype).eps * np.maximum(1.0, np.abs(exact_log))
        assert (np.abs(log_y - exact_log) <= resolution).all(), np.abs(log_y - exact_log) / resolution


def masked_logits(dtype, width=20):
    x = rand((4, width), dtype, 11, scale=3.0)
    x[1] = -np.inf  # fully masked row
    x[2, 5:] = -np.inf  # partly masked row
    x[3, ::2] = -np.inf
    return x


@pytest.mark.parametrize("width", [20, 40])  # rows done in registers, and longer rows
@pytest.mark.parametrize("backend", kernels.BACKENDS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_masked_rows_without_nan_or_warning(backend, dtype, width):
    x = masked_logits(dtype, width)
    grad = rand(x.shape, dtype, 12)
    with kernels.use_backend(backend), warnings.catch_warnings():
        warnings.simplefilter("error")  # any RuntimeWarning fails the test
        y = kernels.softmax(x)
        dy = kernels.softmax_backward(y, grad)
        log_y = kernels.log_softmax(x)
        dlog = kernels.log_softmax_backward(log_y, grad)
    assert not np.isnan(y).any() and not np.isnan(dy).any() and not np.isnan(log_y).any() and not np.isnan(dlog).any()
    assert (y[1] == 0).all() and (dy[1] == 0).all() and (dlog[1] == 0).all()
    assert np.isneginf(log_y[1]).all()
    assert (y[2, 5:] == 0).all() and np.isneginf(log_y[2, 5:]).all() and np.isneginf(log_y[3, ::2]).all()
    np.testing.assert_allclose(y[2, :5], kernels.softmax_numpy(x[2, :5]), rtol=1e-6)
    np.testing.assert_allclose(log_y[3, 1::2], kernels.log_softmax_numpy(x[3, 1::2]), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("width", [20, 40])
@pytest.mark.parametrize("dtype", DTYPES)
def test_masked_rows_kernel_equals_twin(dtype, width):
    x, grad = masked_logits(dtype, width), rand((4, width), dtype, 13)
    y, log_y = kernels.softmax(x), kernels.log_softmax(x)
    np.testing.assert_array_equal(np.isneginf(log_y), np.isneginf(kernels.log_softmax_numpy(x)))
    finite = np.isfinite(log_y)
    np.testing.assert_allclose(log_y[finite], kernels.log_softmax_numpy(x)[finite], **TOL[dtype])
    np.testing.assert_allclose(y, kernels.softmax_numpy(x), **TOL[dtype])
    np.testing.assert_allclose(kernels.softmax_backward(y, grad), kernels.softmax_backward_numpy(y, grad), **TOL[dtype])
    np.testing.assert_allclose(kernels.log_softmax_backward(log_y, grad),
                               kernels.log_softmax_backward_numpy(log_y, grad), **TOL[dtype])


@pytest.mark.parametrize("dtype", DTYPES)
def test_vector_exp_accuracy(dtype):
    """The hand-written exp against np.exp, from underflow to 0, with -inf and NaN."""
    lowest = -110.0 if dtype == np.float32 else -760.0
    x = np.concatenate([np.linspace(lowest, 0, 400_003), -np.logspace(-30, 2, 1001),
                        [-np.inf, -0.0, 0.0, np.nan]]).astype(dtype)
    out = np.empty_like(x)
    simd.exp_nonpositive_kernel(x, out)
    exact = np.exp(x.astype(np.longdouble))
    normal = exact >= np.finfo(dtype).tiny
    relative = np.abs(out[normal] - exact[normal]) / exact[normal]
    assert relative.max() <= 2 * np.finfo(dtype).eps
    below = ~normal & ~np.isnan(x)
    assert (out[below] >= 0).all() and (out[below] <= 2 * np.finfo(dtype).tiny).all()  # flushed towards 0
    assert out[np.isneginf(x)][0] == 0 and np.isnan(out[np.isnan(x)][0]) and (out[x == 0] == 1).all()
    assert out[x < (-88 if dtype == np.float32 else -709)].max() == 0


# --------------------------------------------------------------------------- layer norm
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1, 1), (7, 37), (128, 19, 64), (2560, 64), (3, 256)])
def test_layer_norm_matches_numpy(shape, dtype):
    x, w, b = rand(shape, dtype, 14, 2.0) + dtype(3), rand(shape[-1:], dtype, 15), rand(shape[-1:], dtype, 16)
    grad = rand(shape, dtype, 17)
    got, want = kernels.layer_norm(x, w, b, 1e-5), kernels.layer_norm_numpy(x, w, b, 1e-5)
    for g, e in zip(got, want):
        assert g.dtype == dtype and g.shape == e.shape
        np.testing.assert_allclose(g, e, **TOL[dtype])
    _, mean, rstd = want
    got = kernels.layer_norm_backward(grad, x, w, mean, rstd)
    want = kernels.layer_norm_backward_numpy(grad, x, w, mean, rstd)
    tol = dict(rtol=1e-4, atol=2e-4 * np.sqrt(x.size / shape[-1])) if dtype == np.float32 else TOL[dtype]
    for g, e in zip(got, want):
        assert g.dtype == dtype and g.shape == e.shape
        np.testing.assert_allclose(g, e, **tol)


# --------------------------------------------------------------------------- gradients vs finite differences
def numerical_gradient(f, x, eps=1e-6):
    grad = np.zeros_like(x)
    for index in np.ndindex(x.shape):
        old = x[index]
        x[index] = old + eps
        plus = f(x)
        x[index] = old - eps
        minus = f(x)
        x[index] = old
        grad[index] = (plus - minus) / (2 * eps)
    return grad


@pytest.mark.parametrize("backend", kernels.BACKENDS)
def test_backward_against_finite_differences(backend):
    x = rand((3, 11), np.float64, 18, 2.0)
    x[1, 4] = -np.inf  # a masked entry: its gradient is finite too
    weights = rand((3, 11), np.float64, 19)
    with kernels.use_backend(backend):
        y = kernels.softmax(x)
        np.testing.assert_allclose(kernels.softmax_backward(y, weights),
                                   numerical_gradient(lambda v: np.sum(weights * kernels.softmax(v)), x),
                                   rtol=1e-6, atol=1e-8)
        y = kernels.log_softmax(x)
        finite_weights = np.where(np.isinf(y), 0, weights)  # -inf outputs would poison the sum
        np.testing.assert_allclose(kernels.log_softmax_backward(y, finite_weights),
                                   numerical_gradient(lambda v: np.sum(finite_weights * np.where(
                                       np.isinf(v), 0, kernels.log_softmax(v))), x),
                                   rtol=1e-6, atol=1e-8)

        x = rand((4, 9), np.float64, 20)
        w, b, grad = rand(9, np.float64, 21), rand(9, np.float64, 22), rand((4, 9), np.float64, 23)
        _, mean, rstd = kernels.layer_norm(x, w, b, 1e-5)
        dx, dw, db = kernels.layer_norm_backward(grad, x, w, mean, rstd)
        loss = lambda x_, w_, b_: np.sum(grad * kernels.layer_norm(x_, w_, b_, 1e-5)[0])  # noqa: E731
        np.testing.assert_allclose(dx, numerical_gradient(lambda v: loss(v, w, b), x), rtol=1e-6, atol=1e-8)
        np.testing.assert_allclose(dw, numerical_gradient(lambda v: loss(x, v, b), w), rtol=1e-6, atol=1e-8)
        np.testing.assert_allclose(db, numerical_gradient(lambda v: loss(x, w, v), b), rtol=1e-6, atol=1e-8)


# --------------------------------------------------------------------------- backend switch
def test_set_get_and_use_backend():
    assert kernels.get_backend() == "numba"
    with kernels.use_backend("numpy"):
        assert kernels.get_backend() == "numpy"
    assert kernels.get_backend() == "numba"
    with pytest.raises(KeyError), kernels.use_backend("numpy"):
        raise KeyError("the block fails")
    assert kernels.get_backend() == "numba"  # restored anyway
    kernels.set_backend("numpy")
    assert kernels.get_backend() == "numpy"
    kernels.set_backend("numba")


def test_unknown_backend_lists_valid_names():
    with pytest.raises(ValueError, match="numba, numpy"):
        kernels.set_backend("cuda")
    assert kernels.get_backend() == "numba"


def test_numpy_backend_never_touches_numba(monkeypatch):
    def boom(*args):
        raise AssertionError("a Numba kernel ran")
    kernel_names = {matmul_kernels: ["_batch_kernel"],
                    softmax_kernels: ["_softmax_kernel", "_softmax_backward_kernel", "_log_softmax_kernel",
                                      "_log_softmax_backward_kernel"],
                    layer_norm_kernels: ["_layer_norm_kernel", "_layer_norm_backward_kernel"]}
    for module, names in kernel_names.items():
        for name in names:
            monkeypatch.setattr(module, name, boom)
    x, w = rand((8, 20, 16), np.float32), rand(16, np.float32)
    with pytest.raises(AssertionError, match="a Numba kernel ran"):
        kernels.softmax(x)
    with kernels.use_backend("numpy"):
        kernels.matmul(x, x.swapaxes(-1, -2))
        y = kernels.softmax(x)
        kernels.softmax_backward(y, x)
        kernels.log_softmax_backward(kernels.log_softmax(x), x)
        _, mean, rstd = kernels.layer_norm(x, w, w, 1e-5)
        kernels.layer_norm_backward(x, x, w, mean, rstd)


def test_backend_from_environment():
    code = "from minigrad import kernels; print(kernels.get_backend())"
    assert run_python(code, MINIGRAD_KERNELS="numpy").strip() == "numpy"
    env = {k: v for k, v in os.environ.items() if k != "MINIGRAD_KERNELS"}
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, env=env)
    assert result.stdout.strip() == "numba"
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                            env={**os.environ, "MINIGRAD_KERNELS": "fortran"})
    assert result.returncode != 0 and "numba, numpy" in result.stderr


# --------------------------------------------------------------------------- cache fallback, pure-Python mode
def test_jit_falls_back_when_the_cache_cannot_be_written(monkeypatch):
    """Numba raises at decoration time when it finds no writable cache directory."""
    import numba
    real_njit = numba.njit
    seen = []

    def njit_without_locator(*args, **options):
        seen.append(options.get("cache", False))
        if options.get("cache"):
            raise RuntimeError("cannot cache function 'add_one': no locator available for file '/ro/x.py'")
        return real_njit(*args, **options)

    monkeypatch.setattr(numba, "njit", njit_without_locator)

    def add_one(x):
        return x + 1

    compiled = jit.jit()(add_one)
    assert seen == [True, False]
    assert compiled(41) == 42 and hasattr(compiled, "signatures")  # a real Numba dispatcher


def test_jit_does_not_hide_other_errors(monkeypatch):
    import numba

    def broken_njit(*args, **options):
        raise RuntimeError("something else went wrong")

    monkeypatch.setattr(numba, "njit", broken_njit)
    with pytest.raises(RuntimeError, match="something else"):
        jit.jit()(lambda x: x)


def test_kernels_run_as_plain_python_with_jit_disabled():
    code = """
        import numpy as np
        from minigrad import kernels as K
        from minigrad.kernels import softmax_kernels
        assert not hasattr(softmax_kernels._softmax_kernel, "signatures")  # really not compiled
        r = np.random.default_rng(0)
        for dt in (np.float32, np.float64):
            a, b = r.standard_normal((2, 5, 3)).astype(dt), r.standard_normal((2, 9, 3)).astype(dt)
            np.testing.assert_allclose(K.matmul(a, b.swapaxes(-1, -2)), a @ b.swapaxes(-1, -2), rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(K.matmul(b.swapaxes(-1, -2), b), b.swapaxes(-1, -2) @ b, rtol=1e-5, atol=1e-6)
            a, b = r.standard_normal((2, 20, 20)).astype(dt), r.standard_normal((2, 20, 16)).astype(dt)
            np.testing.assert_allclose(K.matmul(a, b), a @ b, rtol=1e-5, atol=1e-5)  # a compiled-for-shape kernel
            x = r.standard_normal((3, 11)).astype(dt)
            x[1] = -np.inf
            g = r.standard_normal((3, 11)).astype(dt)
            for f, twin in [(K.softmax, K.softmax_numpy), (K.log_softmax, K.log_softmax_numpy)]:
                assert f(x).dtype == dt
                np.testing.assert_allclose(f(x), twin(x), rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(K.softmax_backward(K.softmax(x), g),
                                       K.softmax_backward_numpy(K.softmax_numpy(x), g), rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(K.log_softmax_backward(K.log_softmax(x), g),
                                       K.log_softmax_backward_numpy(K.log_softmax_numpy(x), g), rtol=1e-5, atol=1e-6)
            x, w = r.standard_normal((3, 11)).astype(dt), r.standard_normal(11).astype(dt)
            for got, want in zip(K.layer_norm(x, w, w, 1e-5), K.layer_norm_numpy(x, w, w, 1e-5)):
                np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
        print("ok")
    """
    assert run_python(code, NUMBA_DISABLE_JIT="1").strip() == "ok"


# ---------------------------------------------------------------------- Adam update
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("weight_decay", [0.0, 0.01])
def test_adam_update_kernel_matches_numpy_twin(dtype, weight_decay):
    rng = np.random.default_rng(7)
    shape = (13, 5)
    param, grad = rng.standard_normal(shape).astype(dtype), rng.standard_normal(shape).astype(dtype)
    m, v = rng.standard_normal(shape).astype(dtype), rng.random(shape).astype(dtype)
    twin = [a.copy() for a in (param, grad, m, v)]
    before = param.copy()
    args = (0.9, 0.98, 1e-3, 1e-9, weight_decay)
    kernels.adam_update(param, grad, m, v, *args)
    kernels.adam_update_numpy(*twin, *args)
    tol = 1e-6 if dtype == np.float32 else 1e-12
    for got, want in zip((param, m, v), (twin[0], twin[2], twin[3])):
        assert got.dtype == dtype
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    assert np.abs(param - before).min() > 0                      # every entry updated in place
    np.testing.assert_array_equal(grad, twin[1])                  # the gradient is left alone
