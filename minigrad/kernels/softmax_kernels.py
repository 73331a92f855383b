"""Softmax and log-softmax over the last axis, with their backwards (math: ``ops/softmax.py``).

Kernel and twin alike: the row max is subtracted before exp; a row of all -inf (fully
masked) gives zeros from softmax, -inf from log-softmax, and no gradient; a NaN makes its
whole row NaN (no fastmath). Log-softmax is ``(x - max) - log(sum)``: the first subtraction
is exact near the max, so float32 keeps its precision even for logits of 1e6.
"""
import numpy as np

from .backend import numpy_selected
from .jit import jit
from .rows import kernel_fits, run_rowwise
from .simd import exp_nonpositive, hmax, hsum, lanes, vfma, vload, vmax, vsplat, vstore


def _shift_numpy(x):
    """The row max to subtract before exp, or 0 for a row of all -inf (-inf - -inf would be NaN)."""
    m = np.max(x, axis=-1, keepdims=True)  # NaN if the row holds a NaN
    return np.where(np.isneginf(m), x.dtype.type(0), m)


def softmax_numpy(x):
    """exp(x - max) / sum(exp(x - max)); a row of all -inf gives zeros."""
    e = np.exp(x - _shift_numpy(x))
    s = np.sum(e, axis=-1, keepdims=True)
    return e / np.where(s == 0, 1, s)  # masked row: 0 / 1


def softmax_backward_numpy(y, grad):
    """dx = y * (grad - sum(grad * y)) per row: O(W), no Jacobian."""
    return y * (grad - np.sum(grad * y, axis=-1, keepdims=True))


def log_softmax_numpy(x):
    """(x - max) - log(sum(exp(x - max))); a row of all -inf stays all -inf."""
    shifted = x - _shift_numpy(x)
    s = np.sum(np.exp(shifted), axis=-1, keepdims=True)
    return shifted - np.log(np.where(s == 0, 1, s))  # masked row: -inf - log(1)


def log_softmax_backward_numpy(y, grad):
    """dx = grad - exp(y) * sum(grad); zeros for a fully masked row (all -inf)."""
    dx = grad - np.exp(y) * np.sum(grad, axis=-1, keepdims=True)
    fully_masked = np.all(np.isneginf(y), axis=-1, keepdims=True)
    return np.where(fully_masked, 0, dx)


# ------------------------------------------------------------------ row helpers (also used by attention)
@jit(forceinline=True)
def softmax_shift(row):
    """The row's max, or 0 when it is -inf (``_shift_numpy``). The vector max may drop a NaN;
    exp(NaN - shift) then puts it back into the sum."""
    step, width = lanes(row), row.shape[0]
    minus_inf = row.dtype.type(-np.inf)
    peak = vsplat(minus_inf)
    for j in range(0, width, step):
        peak = vmax(peak, vload(row, j, width - j, minus_inf))
    row_max = hmax(peak)
    return row.dtype.type(0) if row_max == minus_inf else row_max


@jit(forceinline=True)
def shifted_exp_sum(row, shift, e):
    """e = exp(row - shift), returns sum(e): 0 for a row of all -inf, NaN if it holds a NaN."""
    step, width = lanes(row), row.shape[0]
    minus_inf = row.dtype.type(-np.inf)
    total = vsplat(row.dtype.type(0))
    for j in range(0, width, step):
        part = exp_nonpositive(vload(row, j, width - j, minus_inf) - shift)  # padding lanes: exp(-inf) = 0
        vstore(e, j, width - j, part)
        total = total + part
    return hsum(total)


@jit(forceinline=True)
def softmax_row(row, y):
    """y = softmax(row); row and y may be the same array."""
    step, width, zero = lanes(row), row.shape[0], row.dtype.type(0)
    total = shifted_exp_sum(row, softmax_shift(row), y)
    scale = row.dtype.type(1) / total if total != zero else zero  # all -inf: 0 * 0
    for j in range(0, width, step):
        vstore(y, j, width - j, vload(y, j, width - j, zero) * scale)


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
def _softmax_kernel(x, out):
    for r in range(x.shape[0]):
        softmax_row(x[r], out[r])


@jit()
def _softmax_backward_kernel(y, grad, out):
    one = y.dtype.type(1)
    for r in range(y.shape[0]):
        softmax_backward_row(y[r], grad[r], out[r], one)


@jit()
def _log_softmax_kernel(x, out):
    zero = x.dtype.type(0)
    step, width = lanes(x), x.shape[1]
    for r in range(x.shape[0]):
        row, y = x[r], out[r]
        shift = softmax_shift(row)
        total = shifted_exp_sum(row, shift, y)  # y is scratch here
        log_sum = np.log(total) if total != zero else zero  # all -inf: -inf - 0
        for j in range(0, width, step):
            vstore(y, j, width - j, (vload(row, j, width - j, zero) - shift) - log_sum)


# ------------------------------------------------------------------ public entry points
def softmax(x):
    """Softmax over the last axis."""
    if numpy_selected() or not kernel_fits(x):
        return softmax_numpy(x)
    return run_rowwise(_softmax_kernel, x)


def softmax_backward(y, grad):
    """Gradient of softmax: y is the forward output, grad the output gradient."""
    if numpy_selected() or not kernel_fits(y, grad):
        return softmax_backward_numpy(y, grad)
    return run_rowwise(_softmax_backward_kernel, y, grad)


def log_softmax(x):
    """Log-softmax over the last axis, computed directly (never log(softmax))."""
    if numpy_selected() or not kernel_fits(x):
        return log_softmax_numpy(x)
    return run_rowwise(_log_softmax_kernel, x)


def log_softmax_backward(y, grad):
    """Gradient of log-softmax from its output y. Always the numpy twin: the model never runs
    it (cross-entropy has its own backward), so a kernel would have no measured gain."""
    return log_softmax_backward_numpy(y, grad)
