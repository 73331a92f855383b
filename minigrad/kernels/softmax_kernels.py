"""Kernels for softmax, its backward and log-softmax over the last axis (the math, and what
a masked or NaN row gives: ``ops/softmax.py``; the kernels give the same, no fastmath)."""
import numpy as np

from ..ops import softmax as op
from .jit import jit
from .registry import kernel_for
from .rows import as_rows, float_arrays, row_example
from .simd import exp_nonpositive, hmax, hsum, lanes, vfma, vload, vmax, vsplat, vstore


# ------------------------------------------------------------------ four rows at a time (also used by attention)
# One row's max, exp and sum are a chain of dependent steps (~150 cycles of latency for little
# work); four rows side by side overlap four chains (docs/kernels-rows.md).
@jit(forceinline=True)
def _scores_and_max(x, bias, scores, j, n, scale, peak):
    """scores[j:j+n] = x[j:j+n] * scale + bias[j:j+n]; returns peak updated with their max."""
    v = vfma(vload(bias, j, n, x.dtype.type(-np.inf)), vload(x, j, n, x.dtype.type(0)), scale)
    vstore(scores, j, n, v)
    return vmax(peak, v)


@jit(forceinline=True)
def _exp_sum(scores, j, n, shift, total, log):
    """total + exp(scores[j:j+n] - shift) (padding lanes add exp(-inf) = 0); stores back the
    exp, or for log-softmax the shifted scores."""
    shifted = vload(scores, j, n, scores.dtype.type(-np.inf)) - shift
    e = exp_nonpositive(shifted)
    vstore(scores, j, n, shifted if log else e)
    return total + e


@jit(forceinline=True)
def _shift(peak, zero):
    """What to subtract before exp: the row max, or 0 for a row of all -inf (``ops/softmax.py``'s ``_shift``)."""
    row_max = hmax(peak)
    return zero if row_max == -np.inf else row_max


@jit(forceinline=True)
def _normalizer(total, log, zero, one):
    """(k, c) with y = k * stored + c: softmax exp * (1 / sum), log-softmax shifted - log(sum).
    A row of all -inf (sum 0) gives 0 * 0 and -inf - 0."""
    if log:
        return vsplat(one), vsplat(-np.log(total) if total != zero else zero)
    return vsplat(one / total if total != zero else zero), vsplat(zero)


@jit(forceinline=True)
def four_softmax_rows(x, x_rows, bias, bias_rows, scale, block, out, out_rows, log):
    """out[out_rows[r]] = softmax(x[x_rows[r]] * scale + bias[bias_rows[r]]) for r < 4, or
    log-softmax if ``log``. Bias rows hold 0 (may attend) or -inf (masked); block (4, width) is
    scratch, so rows may repeat. Returns True when a row came out NaN. The vector max may drop
    a NaN; exp(NaN - shift) then puts it back into the sum."""
    step, width, zero, one = lanes(block), block.shape[1], block.dtype.type(0), block.dtype.type(1)
    scale_v, s0, s1, s2, s3 = vsplat(scale), block[0], block[1], block[2], block[3]
    x0, x1, x2, x3 = x[x_rows[0]], x[x_rows[1]], x[x_rows[2]], x[x_rows[3]]
    b0, b1, b2, b3 = bias[bias_rows[0]], bias[bias_rows[1]], bias[bias_rows[2]], bias[bias_rows[3]]
    m0 = m1 = m2 = m3 = vsplat(block.dtype.type(-np.inf))
    for j in range(0, width, step):  # scores and their max
        n = width - j
        m0, m1 = _scores_and_max(x0, b0, s0, j, n, scale_v, m0), _scores_and_max(x1, b1, s1, j, n, scale_v, m1)
        m2, m3 = _scores_and_max(x2, b2, s2, j, n, scale_v, m2), _scores_and_max(x3, b3, s3, j, n, scale_v, m3)
    m0, m1, m2, m3 = _shift(m0, zero), _shift(m1, zero), _shift(m2, zero), _shift(m3, zero)
    t0 = t1 = t2 = t3 = vsplat(zero)
    for j in range(0, width, step):  # exp(scores - shift) and their sum
        n = width - j
        t0, t1 = _exp_sum(s0, j, n, m0, t0, log), _exp_sum(s1, j, n, m1, t1, log)
        t2, t3 = _exp_sum(s2, j, n, m2, t2, log), _exp_sum(s3, j, n, m3, t3, log)
    t0, t1, t2, t3 = hsum(t0), hsum(t1), hsum(t2), hsum(t3)
    (k0, c0), (k1, c1) = _normalizer(t0, log, zero, one), _normalizer(t1, log, zero, one)
    (k2, c2), (k3, c3) = _normalizer(t2, log, zero, one), _normalizer(t3, log, zero, one)
    o0, o1, o2, o3 = out[out_rows[0]], out[out_rows[1]], out[out_rows[2]], out[out_rows[3]]
    for j in range(0, width, step):  # y = k * stored + c (one rounding, as a plain * or -)
        n = width - j
        vstore(o0, j, n, vfma(c0, vload(s0, j, n, zero), k0))
        vstore(o1, j, n, vfma(c1, vload(s1, j, n, zero), k1))
        vstore(o2, j, n, vfma(c2, vload(s2, j, n, zero), k2))
        vstore(o3, j, n, vfma(c3, vload(s3, j, n, zero), k3))
    return t0 != t0 or t1 != t1 or t2 != t2 or t3 != t3  # a NaN sum: the row is NaN


@jit(forceinline=True)
def softmax_backward_row(y, g, dx, scale):
    """dx = y * (g - sum(g * y)) * scale (scale 1, or attention's 1/sqrt(d)); g and dx may be one array."""
    step, width, zero = lanes(y), y.shape[0], y.dtype.type(0)
    dot = vsplat(zero)
    for j in range(0, width, step):
        dot = vfma(dot, vload(y, j, width - j, zero), vload(g, j, width - j, zero))
    s = hsum(dot)
    for j in range(0, width, step):
        n = width - j
        vstore(dx, j, n, vload(y, j, n, zero) * (vload(g, j, n, zero) - s) * scale)


# ------------------------------------------------------------------ the kernels
@jit()
def _softmax_kernel(x, zero_bias, block, out, log):
    """Softmax (or log-softmax) of each row of x, four rows at a time; past the end the last repeats."""
    last, one, start = x.shape[0] - 1, x.dtype.type(1), np.intp(0)
    for i in range(0, last + 1, 4):
        rows = (i, min(i + 1, last), min(i + 2, last), min(i + 3, last))
        four_softmax_rows(x, rows, zero_bias, (start, start, start, start), one, block, out, rows, log)


@jit()
def _softmax_backward_kernel(y, grad, out):
    one = y.dtype.type(1)
    for r in range(y.shape[0]):
        softmax_backward_row(y[r], grad[r], out[r], one)


def _run_softmax(x, log):
    rows = as_rows(x)
    out, width = np.empty(rows.shape, dtype=x.dtype), rows.shape[1]
    _softmax_kernel(rows, np.zeros((1, width), x.dtype), np.empty((4, width), x.dtype), out, log)
    return out.reshape(x.shape)


# ------------------------------------------------------------------ registered for the op's functions
@kernel_for(op.softmax, fits=float_arrays, example=row_example, compiled=[_softmax_kernel])
def softmax(x):
    return _run_softmax(x, False)


@kernel_for(op.softmax_backward, fits=float_arrays, example=lambda rng, dtype, size: row_example(rng, dtype, size, 2),
            compiled=[_softmax_backward_kernel])
def softmax_backward(y, grad):
    dx = np.empty(y.shape, y.dtype)
    _softmax_backward_kernel(as_rows(y), as_rows(grad), dx.reshape(-1, y.shape[-1]))
    return dx


@kernel_for(op.log_softmax, fits=float_arrays, example=row_example, stage="training", compiled=[_softmax_kernel])
def log_softmax(x):
    return _run_softmax(x, True)
