"""Tests for minigrad/kernels/: each Numba kernel against its numpy twin, the
edge cases (masked rows, huge logits, transposed operands), gradients against
finite differences, the backend switch and the cache fallback."""
import os
import subprocess
import sys
import textwrap
import warnings

import numba
import numpy as np
import pytest

from minigrad import kernels
from minigrad.optim import adam_update
from minigrad.ops import nn_ops as N, softmax as S
from minigrad.kernels import jit, simd

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


# --------------------------------------------------------------------------- softmax family
ROW_SHAPES = [(1, 1), (3, 7), (512, 20, 20), (2432, 68), (5, 100), (2, 3, 4, 9)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", ROW_SHAPES)
def test_softmax_and_log_softmax_match_numpy(shape, dtype):
    x = rand(shape, dtype, 7, scale=4.0)
    for kernel, twin in [(S.softmax, S.softmax.numpy), (S.log_softmax, S.log_softmax.numpy)]:
        out = kernel(x)
        assert out.dtype == dtype and out.shape == x.shape
        np.testing.assert_allclose(out, twin(x), **TOL[dtype])
    np.testing.assert_allclose(S.softmax(x).sum(-1), 1, rtol=1e-5 if dtype == np.float32 else 1e-13)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", ROW_SHAPES)
def test_backward_kernels_match_numpy(shape, dtype):
    x, grad = rand(shape, dtype, 8, scale=3.0), rand(shape, dtype, 9)
    y = S.softmax(x)
    dx = S.softmax_backward(y, grad)
    assert dx.dtype == dtype
    np.testing.assert_allclose(dx, S.softmax_backward.numpy(y, grad), **TOL[dtype])
    y = S.log_softmax(x)
    dx = S.log_softmax_backward(y, grad)
    assert dx.dtype == dtype
    np.testing.assert_allclose(dx, S.log_softmax_backward(y, grad), **TOL[dtype])


def non_contiguous_rows(dtype):
    return rand((6, 30), dtype, 10).T  # the kernels' wrappers must copy this


@pytest.mark.parametrize("dtype", DTYPES)
def test_softmax_non_contiguous_input(dtype):
    x = non_contiguous_rows(dtype)
    np.testing.assert_allclose(S.softmax(x), S.softmax.numpy(x), **TOL[dtype])
    np.testing.assert_allclose(S.log_softmax(x), S.log_softmax.numpy(x), **TOL[dtype])


@pytest.mark.parametrize("dtype", DTYPES)
def test_huge_logits_stay_finite(dtype):
    x = np.array([[1e4, -1e4, 0.0, 1e4 - 1], [-1e4, -1e4, -1e4, -1e4]], dtype=dtype)
    exact = S.softmax.numpy(x.astype(np.float64))
    for backend in kernels.BACKENDS:
        with kernels.use_backend(backend):
            y = S.softmax(x)
            log_y = S.log_softmax(x)
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
        y = S.softmax(x)
        dy = S.softmax_backward(y, grad)
        log_y = S.log_softmax(x)
        dlog = S.log_softmax_backward(log_y, grad)
    assert not np.isnan(y).any() and not np.isnan(dy).any() and not np.isnan(log_y).any() and not np.isnan(dlog).any()
    assert (y[1] == 0).all() and (dy[1] == 0).all() and (dlog[1] == 0).all()
    assert np.isneginf(log_y[1]).all()
    assert (y[2, 5:] == 0).all() and np.isneginf(log_y[2, 5:]).all() and np.isneginf(log_y[3, ::2]).all()
    np.testing.assert_allclose(y[2, :5], S.softmax.numpy(x[2, :5]), rtol=1e-6)
    np.testing.assert_allclose(log_y[3, 1::2], S.log_softmax.numpy(x[3, 1::2]), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("width", [20, 40])
@pytest.mark.parametrize("dtype", DTYPES)
def test_masked_rows_kernel_equals_twin(dtype, width):
    x, grad = masked_logits(dtype, width), rand((4, width), dtype, 13)
    y, log_y = S.softmax(x), S.log_softmax(x)
    np.testing.assert_array_equal(np.isneginf(log_y), np.isneginf(S.log_softmax.numpy(x)))
    finite = np.isfinite(log_y)
    np.testing.assert_allclose(log_y[finite], S.log_softmax.numpy(x)[finite], **TOL[dtype])
    np.testing.assert_allclose(y, S.softmax.numpy(x), **TOL[dtype])
    np.testing.assert_allclose(S.softmax_backward(y, grad), S.softmax_backward.numpy(y, grad), **TOL[dtype])
    np.testing.assert_allclose(S.log_softmax_backward(log_y, grad),
                               S.log_softmax_backward(log_y, grad), **TOL[dtype])


@numba.njit
def _exp_nonpositive_kernel(x, out):
    """out = exp(x) for a 1-D array of x <= 0: the vector exp on a whole array."""
    width = x.shape[0]
    for j in range(0, width, simd.lanes(x)):
        simd.vstore(out, j, width - j, simd.exp_nonpositive(simd.vload(x, j, width - j, x.dtype.type(0))))


def test_simd_helpers_say_what_they_need():
    """A wrong argument type is one typing error that names the helper and what it needs."""
    @numba.njit
    def load_from_matrix(x):
        return simd.hsum(simd.vload(x, 0, 4, x.dtype.type(0)))

    @numba.njit
    def mixed_fma(x, y):
        return simd.vfma(simd.vsplat(x[0]), simd.vsplat(x[0]), simd.vsplat(y[0]))

    with pytest.raises(numba.core.errors.TypingError, match="vload needs a contiguous 1-D float32/float64 array"):
        load_from_matrix(np.zeros((2, 4), np.float32))
    with pytest.raises(numba.core.errors.TypingError, match="vfma needs three vectors of one dtype"):
        mixed_fma(np.zeros(4, np.float32), np.zeros(4, np.float64))


@pytest.mark.parametrize("dtype", DTYPES)
def test_vector_exp_accuracy(dtype):
    """The hand-written exp against np.exp, from underflow to 0, with -inf and NaN."""
    lowest = -110.0 if dtype == np.float32 else -760.0
    x = np.concatenate([np.linspace(lowest, 0, 400_003), -np.logspace(-30, 2, 1001),
                        [-np.inf, -0.0, 0.0, np.nan]]).astype(dtype)
    out = np.empty_like(x)
    _exp_nonpositive_kernel(x, out)
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
    got, want = N.layer_norm(x, w, b, 1e-5), N.layer_norm.numpy(x, w, b, 1e-5)
    for g, e in zip(got, want):
        assert g.dtype == dtype and g.shape == e.shape
        np.testing.assert_allclose(g, e, **TOL[dtype])
    _, mean, rstd = want
    got = N.layer_norm_backward(grad, x, w, mean, rstd)
    want = N.layer_norm_backward.numpy(grad, x, w, mean, rstd)
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
        y = S.softmax(x)
        np.testing.assert_allclose(S.softmax_backward(y, weights),
                                   numerical_gradient(lambda v: np.sum(weights * S.softmax(v)), x),
                                   rtol=1e-6, atol=1e-8)
        y = S.log_softmax(x)
        finite_weights = np.where(np.isinf(y), 0, weights)  # -inf outputs would poison the sum
        np.testing.assert_allclose(S.log_softmax_backward(y, finite_weights),
                                   numerical_gradient(lambda v: np.sum(finite_weights * np.where(
                                       np.isinf(v), 0, S.log_softmax(v))), x),
                                   rtol=1e-6, atol=1e-8)

        x = rand((4, 9), np.float64, 20)
        w, b, grad = rand(9, np.float64, 21), rand(9, np.float64, 22), rand((4, 9), np.float64, 23)
        _, mean, rstd = N.layer_norm(x, w, b, 1e-5)
        dx, dw, db = N.layer_norm_backward(grad, x, w, mean, rstd)
        loss = lambda x_, w_, b_: np.sum(grad * N.layer_norm(x_, w_, b_, 1e-5)[0])  # noqa: E731
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
    """Every registered kernel's Numba functions replaced by a trap: the numpy backend runs every
    op function without springing one, the Numba backend springs them."""
    def boom(*args):
        raise AssertionError("a Numba kernel ran")
    traps = []
    for kernel in kernels.registered():
        # a kernel's module globals hold its Numba functions; an @elementwise kernel holds its loop
        namespace = getattr(kernel.run, "__globals__", None) or vars(kernel.run)
        names = [name for name, value in namespace.items() if any(value is f for f in kernel.compiled)]
        assert len(names) == len(kernel.compiled), kernel
        traps += [(namespace, name) for name in names]
    for namespace, name in traps:
        monkeypatch.setitem(namespace, name, boom)
    for kernel in kernels.registered():
        args = kernel.example(np.random.default_rng(0), np.dtype(np.float32), "small")
        with kernels.use_backend("numpy"):
            kernel.op(*args)
        if kernel.compiled:
            with pytest.raises(AssertionError, match="a Numba kernel ran"):
                kernel.run(*args)           # the kernel itself: its op runs it only where it pays here
            if kernel.pays and kernel.fits(*args):
                with pytest.raises(AssertionError, match="a Numba kernel ran"):
                    kernel.op(*args)


def test_backend_from_environment():
    code = "from minigrad import kernels; print(kernels.get_backend())"
    assert run_python(code, MINIGRAD_KERNELS="numpy").strip() == "numpy"
    env = {k: v for k, v in os.environ.items() if k != "MINIGRAD_KERNELS"}
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, env=env)
    assert result.stdout.strip() == "numba"
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                            env={**os.environ, "MINIGRAD_KERNELS": "fortran"})
    assert result.returncode != 0 and "numba, numpy" in result.stderr


@pytest.mark.parametrize("setting", ["bogus", ""])
def test_a_bad_backend_setting_is_one_line_and_exit_2_for_a_command(setting, tmp_path):
    """Checked with the arguments, before any work; empty is refused too (not taken for unset)."""
    result = subprocess.run([sys.executable, os.path.join(REPO, "examples", "translate_dates.py"), "1996-09-08"],
                            cwd=tmp_path, capture_output=True, text=True, timeout=120,
                            env={**os.environ, "MINIGRAD_KERNELS": setting})
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    assert result.stderr == (f"error: MINIGRAD_KERNELS={setting!r} is not a kernel backend; valid names: "
                             "numba, numpy (or leave it unset: numba)\n")


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
        from minigrad.kernels import relu_kernels, softmax_kernels
        from minigrad.ops import elementwise as E, nn_ops as N, softmax as S
        from minigrad.ops.matmul import matmul_arrays
        assert not hasattr(softmax_kernels._softmax_kernel, "signatures")  # really not compiled
        assert not hasattr(relu_kernels.relu.loop, "signatures")           # an @elementwise loop neither
        r = np.random.default_rng(0)
        for dt in (np.float32, np.float64):
            a, b = r.standard_normal((2, 5, 3)).astype(dt), r.standard_normal((2, 9, 3)).astype(dt)
            np.testing.assert_allclose(matmul_arrays(a, b.swapaxes(-1, -2)), a @ b.swapaxes(-1, -2), rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(matmul_arrays(b.swapaxes(-1, -2), b), b.swapaxes(-1, -2) @ b, rtol=1e-5, atol=1e-6)
            a, b = r.standard_normal((2, 20, 20)).astype(dt), r.standard_normal((2, 20, 16)).astype(dt)
            np.testing.assert_allclose(matmul_arrays(a, b), a @ b, rtol=1e-5, atol=1e-5)  # a compiled-for-shape kernel
            x = r.standard_normal((3, 11)).astype(dt)
            x[1] = -np.inf
            g = r.standard_normal((3, 11)).astype(dt)
            for f, twin in [(S.softmax, S.softmax.numpy), (S.log_softmax, S.log_softmax.numpy)]:
                assert f(x).dtype == dt
                np.testing.assert_allclose(f(x), twin(x), rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(S.softmax_backward(S.softmax(x), g),
                                       S.softmax_backward.numpy(S.softmax.numpy(x), g), rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(S.log_softmax_backward(S.log_softmax(x), g),
                                       S.log_softmax_backward(S.log_softmax.numpy(x), g), rtol=1e-5, atol=1e-6)
            x, w = r.standard_normal((3, 11)).astype(dt), r.standard_normal(11).astype(dt)
            for got, want in zip(N.layer_norm(x, w, w, 1e-5), N.layer_norm.numpy(x, w, w, 1e-5)):
                np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
            x[0, :3] = (np.nan, -0.0, -np.inf)
            assert E.relu(x).dtype == dt and E.relu(x).tobytes() == E.relu.numpy(x).tobytes()
            assert E.relu_backward(x, w * x).tobytes() == E.relu_backward.numpy(x, w * x).tobytes()
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
    adam_update(param, grad, m, v, *args)
    adam_update.numpy(*twin, *args)
    tol = 1e-6 if dtype == np.float32 else 1e-12
    for got, want in zip((param, m, v), (twin[0], twin[2], twin[3])):
        assert got.dtype == dtype
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    assert np.abs(param - before).min() > 0                      # every entry updated in place
    np.testing.assert_array_equal(grad, twin[1])                  # the gradient is left alone
