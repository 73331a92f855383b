"""NaN, inf and huge logits through the row kernels and the fused attention: each Numba
kernel must give exactly what its op's numpy function gives.

- NaN propagates: a NaN anywhere in a row makes softmax / log-softmax / layer norm of that
  row NaN, forward and backward, and never turns into a masked (all-zero) row;
- only a row whose entries are all -inf counts as fully masked;
- log-softmax is accurate to float32 rounding of its result, whatever the logits' offset.

The sweeps cover rows shorter than one vector, exactly one or two vectors, and longer
(lengths 1..40: a float32 vector is 8 or 16 lanes), with the special value at every position.
"""
import warnings

import numpy as np
import pytest

from minigrad import Tensor, kernels
from minigrad import functional as F
from minigrad.ops import attention as A, nn_ops as N, softmax as S

DTYPES = [np.float32, np.float64]
SPECIALS = [np.nan, np.inf, -np.inf]
LENGTHS = list(range(1, 41))


def both_backends(compute):
    """compute() with the Numba kernels and with the numpy twins, NumPy's warnings silenced."""
    results = []
    for backend in ("numba", "numpy"):
        with kernels.use_backend(backend), np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            results.append(compute())
    return results


def assert_same(got, want, dtype):
    """Equal NaN positions, equal infinities, finite values to rounding."""
    tol = dict(rtol=2e-5, atol=2e-6) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-13)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(np.isnan(g), np.isnan(w))
        np.testing.assert_array_equal(np.isposinf(g), np.isposinf(w))
        np.testing.assert_array_equal(np.isneginf(g), np.isneginf(w))
        np.testing.assert_allclose(g, w, equal_nan=True, **tol)


def special_rows(length, dtype, seed=0):
    """One row per (special value, position): random logits with NaN, +inf or -inf at that
    position; then the same on a row of all -inf (a masked row with one NaN or +inf in it);
    then a row of all -inf and a row of all NaN."""
    rng = np.random.default_rng(seed + length)
    rows = []
    for base in (rng.standard_normal((length,)) * 3, np.full(length, -np.inf)):
        for special in SPECIALS:
            for position in range(length):
                row = base.copy()
                row[position] = special
                rows.append(row)
    rows += [np.full(length, -np.inf), np.full(length, np.nan)]
    return np.array(rows, dtype=dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("length", LENGTHS)
def test_softmax_family_propagates_nan_as_numpy_does(length, dtype):
    x = special_rows(length, dtype)
    grad = np.random.default_rng(1).standard_normal(x.shape).astype(dtype)

    def compute():
        y, log_y = S.softmax(x), S.log_softmax(x)
        return y, log_y, S.softmax_backward(y, grad), S.log_softmax_backward(log_y, grad)
    got, want = both_backends(compute)
    assert_same(got, want, dtype)
    y, log_y, dy, dlog = got
    has_nan = np.isnan(x).any(axis=-1)
    assert np.isnan(y[has_nan]).all() and np.isnan(log_y[has_nan]).all()  # the whole row, never hidden
    assert np.isnan(dlog[has_nan]).any(axis=-1).all()
    fully_masked = np.isneginf(x).all(axis=-1)
    assert fully_masked.any()
    assert (y[fully_masked] == 0).all() and (dy[fully_masked] == 0).all() and (dlog[fully_masked] == 0).all()


def test_a_nan_is_never_hidden_by_a_kernel():
    """A NaN beside -inf entries, and a NaN logit, stay NaN through softmax and log-softmax's gradient."""
    with kernels.use_backend("numba"), np.errstate(all="ignore"):
        assert np.isnan(Tensor([[-np.inf, -np.inf, np.nan]]).softmax(-1).data).all()
        x = Tensor(np.array([[np.nan, 0.0, 1.0]], np.float32), requires_grad=True)
        x.log_softmax(-1).sum().backward()
        assert np.isnan(x.grad).all()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("length", [1, 3, 8, 9, 16, 17, 40])
def test_layer_norm_propagates_nan_and_inf_as_numpy_does(length, dtype):
    rng = np.random.default_rng(length)
    rows = []
    for special in SPECIALS:
        for position in range(length):
            row = rng.standard_normal(length)
            row[position] = special
            rows.append(row)
    x = np.array(rows, dtype=dtype)
    w, b = rng.standard_normal(length).astype(dtype), rng.standard_normal(length).astype(dtype)
    grad = rng.standard_normal(x.shape).astype(dtype)

    def compute():
        y, mean, rstd = N.layer_norm(x, w, b, 1e-5)
        return (y, mean, rstd) + tuple(N.layer_norm_backward(grad, x, w, mean, rstd))
    got, want = both_backends(compute)
    assert_same(got, want, dtype)
    if length > 1:
        assert np.isnan(got[0]).all(axis=-1).all()  # every row holds a NaN or an inf: all NaN


# ---------------------------------------------------------------------------- fused attention
def attention_case(k_len, dtype, where, special, heads=2, depth=5, q_len=6):
    """q, k, v, mask, grad with `special` in K (one key position per batch item, every
    position in turn), in Q (one query row per item) or in V. Q is positive so that +-inf
    in K gives +-inf scores, not inf - inf; the mask hides some keys (also ones holding
    the special value), and query row 1 sees no key at all."""
    rng = np.random.default_rng(k_len)
    batch = max(k_len, q_len)
    q = np.abs(rng.standard_normal((batch, q_len, heads * depth))) + 0.1
    k, v = rng.standard_normal((2, batch, k_len, heads * depth))
    target, length = {"k": (k, k_len), "q": (q, q_len), "v": (v, k_len)}[where]
    for b in range(batch):
        target[b, b % length] = special
    allowed = rng.random((batch, 1, q_len, k_len)) > 0.3
    allowed[:, :, 1] = False
    allowed[:, :, 0, 0] = True
    grad = rng.standard_normal((batch, q_len, heads * depth))
    return [a.astype(dtype) for a in (q, k, v)] + [allowed, grad.astype(dtype)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("special", SPECIALS)
@pytest.mark.parametrize("where", ["k", "q", "v"])
@pytest.mark.parametrize("k_len", [1, 5, 8, 9, 12, 16, 17, 19, 33, 40])
def test_fused_attention_propagates_nan_and_inf_as_numpy_does(k_len, where, special, dtype):
    heads = 2
    q, k, v, allowed, grad = attention_case(k_len, dtype, where, special, heads)

    def compute():
        out, weights = A.attention(q, k, v, allowed, heads, q.shape[2], (0, 0, 0))
        dq, dk, dv = A.attention_backward(grad, q, k, v, weights, allowed, heads, (0, 0, 0))
        return out, weights, dq, dk, dv
    got, want = both_backends(compute)
    assert_same(got, want, dtype)
    weights = got[1]
    assert (weights[:, :, 1] == 0).all()  # no key allowed: zeros, even with NaN scores behind the mask
    if where == "k" and np.isnan(special):
        assert np.isnan(weights).any()  # a NaN key that is allowed shows up, not hidden


def test_fused_attention_nan_in_the_whole_row():
    """A NaN query row: its weights are NaN in every backend, never the zero row of a masked query."""
    q, k, v, allowed, grad = attention_case(19, np.float32, "q", np.nan)
    with kernels.use_backend("numba"):
        _, weights = A.attention(q, k, v, np.ones((1,), bool), 2, q.shape[2], (0, 0, 0))
    assert np.isnan(weights[0, :, 0]).all() and not np.isnan(weights[0, :, 1:]).any()


# ---------------------------------------------------------------------------- log-softmax accuracy
OFFSETS = [0.0, 1.0, 10.0, 100.0, 1e3, 1e4, 1e5, 1e6]


@pytest.mark.parametrize("backend", kernels.BACKENDS)
@pytest.mark.parametrize("width", [4, 20, 68])
def test_log_softmax_accurate_to_the_results_rounding(width, backend):
    """Rows offset + [0, -1, -2, ...]: float32 log-softmax within 2 float32 eps of the float64 value
    (relative to the result, or absolute below 1), at every offset; x - (max + log(sum)) was off
    by 2.7e-3 at 1e5."""
    eps = np.finfo(np.float32).eps
    for offset in OFFSETS:
        x = (offset - np.arange(width, dtype=np.float64))[None].repeat(3, 0).astype(np.float32)
        exact = x.astype(np.float64) - x.max()
        exact -= np.log(np.sum(np.exp(exact), axis=-1, keepdims=True))
        with kernels.use_backend(backend):
            got = S.log_softmax(x)
        error = np.abs(got - exact) / np.maximum(1.0, np.abs(exact))
        assert error.max() <= 2 * eps, (offset, error.max() / eps)


@pytest.mark.parametrize("backend", kernels.BACKENDS)
def test_cross_entropy_of_large_equal_logits_is_log_2(backend):
    with kernels.use_backend(backend):
        loss = F.cross_entropy(Tensor(np.array([[1e4, 1e4, 0.0]], np.float32)), np.array([0]))
    assert loss.data.dtype == np.float32
    assert abs(float(loss.data) - np.log(2.0)) <= np.spacing(np.float32(np.log(2.0)))


# ---------------------------------------------------------------------------- column sums (bias gradients)
@pytest.mark.parametrize("dtype", DTYPES)
def test_column_sums_equal_numpy_sum(dtype):
    rows = np.random.default_rng(3).standard_normal((2432, 64)).astype(dtype)
    rows[5, 7] = np.nan
    tol = dict(rtol=1e-5, atol=1e-4) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-10)
    got = N.column_sums(rows)       # ones @ rows: one BLAS call, numpy code on either backend
    np.testing.assert_allclose(got, rows.sum(axis=0), equal_nan=True, **tol)
    assert np.isnan(got[7]) and got.dtype == dtype
