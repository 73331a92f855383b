"""Softmax and log-softmax over the last axis, with their backwards.

A row of all -inf (a fully masked attention row) gives zeros, never NaN.
No fastmath: inf and NaN must keep their meaning.
"""
import numpy as np

from .backend import numpy_selected
from .jit import jit
from .rows import kernel_fits, run_rowwise
from .simd import exp_nonpositive, hmax, hsum, lanes, vfma, vload, vmax, vsplat, vstore


def softmax_numpy(x):
    """exp(x - max) / sum(exp(x - max)); a row of all -inf gives zeros."""
    m = np.max(x, axis=-1, keepdims=True)
    m = np.where(np.isneginf(m), 0, m)  # masked row: -inf - (-inf) would be NaN
    e = np.exp(x - m)
    s = np.sum(e, axis=-1, keepdims=True)
    return e / np.where(s == 0, 1, s)  # masked row: 0 / 1


def softmax_backward_numpy(y, grad):
    """dx = y * (grad - sum(grad * y)) per row: O(W), no Jacobian."""
    return y * (grad - np.sum(grad * y, axis=-1, keepdims=True))


def log_softmax_numpy(x):
    """x - max - log(sum(exp(x - max))); a row of all -inf stays all -inf."""
    m = np.max(x, axis=-1, keepdims=True)
    masked = np.isneginf(m)
    m = np.where(masked, 0, m)
    s = np.sum(np.exp(x - m), axis=-1, keepdims=True)
    log_sum = m + np.log(np.where(masked, 1, s))  # masked row: lse 0, so x - lse = -inf
    return x - log_sum


def log_softmax_backward_numpy(y, grad):
    """dx = grad - exp(y) * sum(grad); zeros for a fully masked row."""
    dx = grad - np.exp(y) * np.sum(grad, axis=-1, keepdims=True)
    fully_masked = np.all(np.isneginf(y), axis=-1, keepdims=True)
    return np.where(fully_masked, 0, dx)


# Rows of at most two vectors (attention: 20 keys) are done in registers:
# load once, max, exp, sum, scale, store. Longer rows take three passes over
# memory. The short path halves the instructions per row for the attention shape.
@jit(forceinline=True)
def _softmax_short_row(row, y):
    step, width = lanes(row), row.shape[0]
    minus_inf = row.dtype.type(-np.inf)
    low, high = vload(row, 0, width, minus_inf), vload(row, step, width - step, minus_inf)
    row_max = hmax(vmax(low, high))
    if row_max == minus_inf:  # fully masked row
        zeros = vsplat(row.dtype.type(0))
        vstore(y, 0, width, zeros)
        vstore(y, step, width - step, zeros)
        return
    e_low = exp_nonpositive(low - row_max)  # padding lanes: exp(-inf) = 0
    e_high = exp_nonpositive(high - row_max)
    scale = row.dtype.type(1) / hsum(e_low + e_high)
    vstore(y, 0, width, e_low * scale)
    vstore(y, step, width - step, e_high * scale)


@jit(forceinline=True)
def _softmax_long_row(row, y):
    step, width = lanes(row), row.shape[0]
    zero, minus_inf = row.dtype.type(0), row.dtype.type(-np.inf)
    peak = vsplat(minus_inf)
    for j in range(0, width, step):
        peak = vmax(peak, vload(row, j, width - j, minus_inf))
    row_max = hmax(peak)
    if row_max == minus_inf:  # fully masked row
        for j in range(0, width, step):
            vstore(y, j, width - j, vsplat(zero))
        return
    total = vsplat(zero)
    for j in range(0, width, step):
        e = exp_nonpositive(vload(row, j, width - j, minus_inf) - row_max)
        vstore(y, j, width - j, e)
        total = total + e
    scale = row.dtype.type(1) / hsum(total)
    for j in range(0, width, step):
        vstore(y, j, width - j, vload(y, j, width - j, zero) * scale)


@jit()
def _softmax_kernel(x, out):
    if x.shape[1] <= 2 * lanes(x):
        for r in range(x.shape[0]):
            _softmax_short_row(x[r], out[r])
    else:
        for r in range(x.shape[0]):
            _softmax_long_row(x[r], out[r])


@jit()
def _softmax_backward_kernel(y, grad, out):
    zero = y.dtype.type(0)
    step = lanes(y)
    for r in range(y.shape[0]):
        y_row, g_row, dx = y[r], grad[r], out[r]
        width = y_row.shape[0]
        dot = vsplat(zero)
        for j in range(0, width, step):
            dot = vfma(dot, vload(y_row, j, width - j, zero), vload(g_row, j, width - j, zero))
        s = hsum(dot)
        for j in range(0, width, step):
            y_part = vload(y_row, j, width - j, zero)
            vstore(dx, j, width - j, y_part * (vload(g_row, j, width - j, zero) - s))


@jit(forceinline=True)
def _log_softmax_short_row(row, y):
    step, width = lanes(row), row.shape[0]
    minus_inf = row.dtype.type(-np.inf)
    low, high = vload(row, 0, width, minus_inf), vload(row, step, width - step, minus_inf)
    row_max = hmax(vmax(low, high))
    if row_max == minus_inf:  # fully masked row stays -inf
        vstore(y, 0, width, low)
        vstore(y, step, width - step, high)
        return
    total = exp_nonpositive(low - row_max) + exp_nonpositive(high - row_max)
    log_sum = row_max + np.log(hsum(total))
    vstore(y, 0, width, low - log_sum)
    vstore(y, step, width - step, high - log_sum)


@jit(forceinline=True)
def _log_softmax_long_row(row, y):
    step, width = lanes(row), row.shape[0]
    zero, minus_inf = row.dtype.type(0), row.dtype.type(-np.inf)
    peak = vsplat(minus_inf)
    for j in range(0, width, step):
        peak = vmax(peak, vload(row, j, width - j, minus_inf))
    row_max = hmax(peak)
    if row_max == minus_inf:  # fully masked row stays -inf
        for j in range(0, width, step):
            vstore(y, j, width - j, peak)
        return
    total = vsplat(zero)
    for j in range(0, width, step):
        total = total + exp_nonpositive(vload(row, j, width - j, minus_inf) - row_max)
    log_sum = row_max + np.log(hsum(total))
    for j in range(0, width, step):
        vstore(y, j, width - j, vload(row, j, width - j, zero) - log_sum)


@jit()
def _log_softmax_kernel(x, out):
    if x.shape[1] <= 2 * lanes(x):
        for r in range(x.shape[0]):
            _log_softmax_short_row(x[r], out[r])
    else:
        for r in range(x.shape[0]):
            _log_softmax_long_row(x[r], out[r])


@jit()
def _log_softmax_backward_kernel(y, grad, out):
    zero, minus_inf = y.dtype.type(0), y.dtype.type(-np.inf)
    step = lanes(y)
    for r in range(y.shape[0]):
        y_row, g_row, dx = y[r], grad[r], out[r]
        width = y_row.shape[0]
        peak = vsplat(minus_inf)
        g_total = vsplat(zero)
        for j in range(0, width, step):
            peak = vmax(peak, vload(y_row, j, width - j, minus_inf))
            g_total = g_total + vload(g_row, j, width - j, zero)
        if hmax(peak) == minus_inf:  # fully masked row: no gradient
            for j in range(0, width, step):
                vstore(dx, j, width - j, vsplat(zero))
            continue
        g_sum = hsum(g_total)
        for j in range(0, width, step):
            p = exp_nonpositive(vload(y_row, j, width - j, minus_inf))
            vstore(dx, j, width - j, vload(g_row, j, width - j, zero) - p * g_sum)


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
    """Gradient of log-softmax: y is the forward output, grad the output gradient."""
    if numpy_selected() or not kernel_fits(y, grad):
        return log_softmax_backward_numpy(y, grad)
    return run_rowwise(_log_softmax_backward_kernel, y, grad)
