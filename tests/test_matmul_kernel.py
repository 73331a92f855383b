"""The batched-matmul kernel (minigrad/kernels/matmul_kernels.py): the kernel against its
plain-loop definition and np.matmul on every operand layout the model hands it, the dispatch
rule on the model's real shapes, and the SIMD helpers it is built from."""
import os
import subprocess
import sys
import tempfile
import textwrap

import numpy as np
import pytest

from minigrad import kernels
from minigrad.kernels import matmul_kernels, simd
from minigrad.ops.matmul import matmul_arrays

from test_kernels import DTYPES, REPO, TOL, numba_backend, rand  # noqa: F401  (numba_backend: an autouse fixture)


def heads(batch, length, dtype, seed, num_heads=4, d_k=16):
    """(batch, heads, length, d_k) the way MultiHeadAttention.split_heads makes it: a strided view."""
    return rand((batch, length, num_heads, d_k), dtype, seed).transpose(0, 2, 1, 3)


def layout(x, kind):
    """x with the same values, stored as is ("C"), as a transposed view ("T"), or with every
    other column of a wider array ("S": no contiguous axis)."""
    if kind == "T":
        return np.ascontiguousarray(x.swapaxes(-1, -2)).swapaxes(-1, -2)
    if kind == "S":
        return np.repeat(x, 2, axis=-1)[..., ::2]
    return x


# --------------------------------------------------------------------------- matmul, whatever the path
MATMUL_SHAPES = [
    ((128, 4, 19, 19), (128, 4, 19, 16)),  # P @ V, decoder self-attention
    ((3, 5, 7), (3, 7, 9)),
    ((2, 1, 1), (2, 1, 1)),
    ((4, 6, 1), (4, 1, 5)),  # K = 1
    ((4, 33, 17), (4, 17, 50)),  # above the kernel's sizes (BLAS)
    ((1, 3, 20, 16), (2, 3, 16, 20)),  # broadcast batch on the left
    ((2, 3, 20, 16), (3, 16, 20)),  # fewer batch dims on the right
    ((6, 0, 3), (6, 3, 4)),  # empty
    ((6, 4, 0), (6, 0, 4)),  # K = 0 gives zeros
    ((20, 16), (16, 20)),  # 2-D (BLAS)
    ((4, 20, 16), (16, 24)),  # shared 2-D weight (one BLAS call)
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape_a,shape_b", MATMUL_SHAPES)
def test_matmul_matches_numpy(shape_a, shape_b, dtype):
    a, b = rand(shape_a, dtype, 1), rand(shape_b, dtype, 2)
    out = matmul_arrays(a, b)
    assert out.dtype == dtype and out.shape == np.matmul(a, b).shape
    np.testing.assert_allclose(out, np.matmul(a, b), **TOL[dtype])


def test_matmul_read_only_and_reversed_inputs():
    a, b = rand((128, 20, 20), np.float32, 1), rand((128, 20, 16), np.float32, 2)
    a.flags.writeable = b.flags.writeable = False
    for x, y in [(a, b), (a.swapaxes(-1, -2), b), (a[::-1], b[:, ::-1]), (a[..., ::-1], b)]:
        np.testing.assert_allclose(matmul_arrays(x, y), np.matmul(x, y), **TOL[np.float32])


def test_matmul_mismatched_shapes_raise_like_numpy():
    with pytest.raises(ValueError):
        matmul_arrays(np.ones((2, 3, 4), np.float32), np.ones((2, 5, 6), np.float32))


# --------------------------------------------------------------------------- the kernel itself
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (3, 5, 2), (4, 4, 8), (5, 7, 17), (12, 16, 12), (19, 19, 16),
                                   (16, 19, 19), (19, 3, 33), (32, 32, 32)])
@pytest.mark.parametrize("a_kind,b_kind", [("C", "C"), ("T", "C"), ("S", "C"), ("C", "T"), ("T", "S")])
def test_kernel_equals_its_loops_and_numpy(m, k, n, a_kind, b_kind, dtype):
    """The tiled kernel and its plain-loop definition, called directly (whatever the dispatch
    rule picks): ragged rows (M below the tile height, a last tile that overlaps the one
    before), ragged columns (masked vectors), K not a multiple of 4, A read in place through
    its strides, B copied when its rows are not contiguous, a broadcast batch."""
    a = layout(rand((3, m, k), dtype, 3), a_kind)
    b = layout(rand((2, 1, k, n), dtype, 4), b_kind)
    want = np.matmul(a, b)  # (2, 3, m, n)
    np.testing.assert_allclose(matmul_kernels.matmul_batched(a, b), want, **TOL[dtype])
    if m * k * n <= 2000:  # plain Python loops: small cases only
        got = matmul_kernels.matmul_batched(a, b, kernel=matmul_kernels.matmul_loops)
        np.testing.assert_allclose(got, want, **TOL[dtype])


@pytest.mark.parametrize("dtype", DTYPES)
def test_kernel_on_the_attention_products(dtype):
    """The model's op-by-op attention: heads are strided views of the projections, in place."""
    q, k, v = heads(8, 19, dtype, 5), heads(8, 12, dtype, 6), heads(8, 12, dtype, 7)
    p = rand((8, 4, 19, 12), dtype, 8)
    g = heads(8, 19, dtype, 9)
    for a, b in [(q, k.swapaxes(-1, -2)), (p, v), (g, v.swapaxes(-1, -2)), (p.swapaxes(-1, -2), g),
                 (q.swapaxes(-1, -2), p), (q[:, :, :1], k.swapaxes(-1, -2))]:  # the last: decoding, one query
        np.testing.assert_allclose(matmul_kernels.matmul_batched(a, b), np.matmul(a, b), **TOL[dtype])


# --------------------------------------------------------------------------- the dispatch rule
def test_dispatch_rule_on_the_models_shapes():
    """Kernel where it measured faster (docs/kernels.md): P @ V, dS @ K and P^T @ g at 12 and 19
    positions, batch 128 x 4 heads; np.matmul for the rest."""
    use = matmul_kernels.use_numba_matmul
    f32 = np.float32
    wide = kernels.lanes(np.empty(0, f32)) == 16  # AVX-512: a tile is 32 columns, the head size 16 is not a whole one
    q, k, v = heads(128, 19, f32, 0), heads(128, 19, f32, 1), heads(128, 12, f32, 2)
    p, p_cross = rand((128, 4, 19, 19), f32), rand((128, 4, 19, 12), f32)
    assert use(p, k) != wide  # P @ V (and dS @ K): V a strided view, read in place
    assert use(p.swapaxes(-1, -2), q) != wide  # P^T @ g
    assert use(p_cross, v) != wide
    assert not use(q, k.swapaxes(-1, -2))  # Q @ K^T: B's rows are not contiguous
    assert not use(q.swapaxes(-1, -2), p)  # Q^T @ dS: N = 19 is not a whole tile
    assert use(rand((128, 4, 12, 12), f32), v) != wide  # encoder, 12 rows
    assert use(p_cross.swapaxes(-1, -2), q) != wide  # cross P^T @ g: 12 rows
    assert not use(rand((128, 4, 8, 8), f32), v[:, :, :8])  # 8 rows: np.matmul
    assert not use(rand((128, 4, 1, 12), f32), v)  # decoding with a cache: one query row
    assert not use(rand((8, 19, 19), f32), rand((8, 19, 16), f32))  # too few matrices to pay for the call
    for shape_a, shape_b in [((2560, 64), (64, 256)), ((128, 19, 64), (64, 256)), ((128, 40, 40), (128, 40, 16))]:
        assert not use(np.empty(shape_a, f32), np.empty(shape_b, f32))
    assert not use(p, k.astype(np.float64))
    assert not use(p.astype(np.int64), k.astype(np.int64))


def test_matmul_calls_the_kernel_exactly_where_the_rule_says(monkeypatch):
    calls, real = [], matmul_kernels.matmul_batched
    monkeypatch.setattr(matmul_kernels, "matmul_batched", lambda a, b: calls.append((a.shape, b.shape)) or real(a, b))
    cases = [(rand((128, 4, 19, 19), np.float32), heads(128, 19, np.float32, 1)),
             (heads(128, 19, np.float32, 2), heads(128, 19, np.float32, 3).swapaxes(-1, -2)),
             (rand((40, 64), np.float32), rand((64, 32), np.float32))]
    for a, b in cases:
        np.testing.assert_allclose(matmul_arrays(a, b), np.matmul(a, b), **TOL[np.float32])
    expected = [(a.shape, b.shape) for a, b in cases if matmul_kernels.use_numba_matmul(a, b)]
    assert calls == expected and len(expected) == (kernels.lanes(np.empty(0, np.float32)) != 16)


# --------------------------------------------------------------------------- other widths, no JIT
def run_python(code, **env):
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=REPO, capture_output=True,
                            text=True, env={**os.environ, **env}, timeout=600)
    assert result.returncode == 0, result.stderr
    return result.stdout


_KERNEL_CHECK = """
    import numpy as np
    from minigrad.kernels import matmul_kernels as MK, lanes
    r = np.random.default_rng(0)
    cases = [(np.float32, 19, 19, 16), (np.float32, 5, 3, 33), (np.float64, 19, 12, 16), (np.float64, 2, 9, 5)]
    for dt, m, k, n in cases:
        a = r.standard_normal((3, m, k)).astype(dt).swapaxes(-1, -2).copy().swapaxes(-1, -2)
        b = r.standard_normal((3, k, n)).astype(dt)
        tol = 2e-5 if dt == np.float32 else 1e-12
        np.testing.assert_allclose(MK.matmul_batched(a, b), a @ b, rtol=tol, atol=tol)
    print(lanes(np.empty(0, np.float32)))
"""


def test_kernel_with_the_other_vector_width():
    """MINIGRAD_VECTOR_BYTES=64 on an AVX2 machine (LLVM splits each vector in two), 32 on an
    AVX-512 one: the tile then covers another number of columns."""
    other = "64" if simd.VECTOR_BYTES == 32 else "32"
    with tempfile.TemporaryDirectory() as cache:
        assert run_python(_KERNEL_CHECK, MINIGRAD_VECTOR_BYTES=other, NUMBA_CACHE_DIR=cache).strip() == \
            str(int(other) // 4)


def test_kernel_runs_as_plain_python_with_jit_disabled():
    assert run_python(_KERNEL_CHECK, NUMBA_DISABLE_JIT="1").strip() == str(simd.VECTOR_BYTES // 4)


# --------------------------------------------------------------------------- the SIMD helpers it uses
@pytest.mark.parametrize("dtype", DTYPES)
def test_simd_helpers_compiled_match_plain_python(dtype):
    """vbroadcast and flat, compiled, against their plain-Python versions."""
    import numba

    @numba.njit
    def broadcast_from(x, index, out):
        simd.vstore(out, 0, out.size, simd.vbroadcast(simd.flat(x), index))

    lanes = kernels.lanes(np.empty(0, dtype))
    x, out = rand((3, 4), dtype, 30), np.zeros(lanes, dtype)
    broadcast_from(x, 7, out)
    np.testing.assert_array_equal(out, x.flat[7])
    np.testing.assert_array_equal(simd.vbroadcast(simd.flat(x), 7), out)
