"""Kernels for softmax, its backward and log-softmax over the last axis (the math, and what
a masked or NaN row gives: ``ops/softmax.py``; the kernels give the same, no fastmath).

Each kernel goes one row at a time and follows the numpy lines, in vectors of ``lanes``
floats (``simd.py``: ``vload`` reads up to a vector, filling lanes past the row's end).
"""
import numpy as np

from ..ops import softmax as op
from .jit import jit
from .registry import kernel_for
from .rows import as_rows, float_arrays, row_example
from .simd import exp_nonpositive, hmax, hsum, lanes, vfma, vload, vmax, vsplat, vstore


@jit(forceinline=True)
def softmax_backward_row(y, g, dx, scale):
    """dx = y * (g - sum(g * y)) * scale (scale 1, or attention's 1/sqrt(d)); g and dx may be one
    array. Returns sum(g * y)."""
    step, width, zero = lanes(y), y.shape[0], y.dtype.type(0)
    dot = vsplat(zero)
    for j in range(0, width, step):
        dot = vfma(dot, vload(y, j, width - j, zero), vload(g, j, width - j, zero))
    s = hsum(dot)
    for j in range(0, width, step):
        n = width - j
        vstore(dx, j, n, vload(y, j, n, zero) * (vload(g, j, n, zero) - s) * scale)
    return s


# ------------------------------------------------------------------ the kernels
@jit()
def _softmax_kernel(x, out, log):
    """softmax (or, if ``log``, log-softmax) of each row of x into out."""
    step, width = lanes(x), x.shape[1]
    zero, minus_inf = x.dtype.type(0), x.dtype.type(-np.inf)
    for r in range(x.shape[0]):
        row, y = x[r], out[r]
        peak = vsplat(minus_inf)                     # m = max(x); 0 for a row of all -inf
        for j in range(0, width, step):
            peak = vmax(peak, vload(row, j, width - j, minus_inf))
        m = hmax(peak)
        m = zero if m == minus_inf else m
        total = vsplat(zero)                         # s = sum(exp(x - m)); y = x - m or exp(x - m) for now
        for j in range(0, width, step):
            shifted = vload(row, j, width - j, minus_inf) - m   # the fill gives exp(-inf) = 0
            e = exp_nonpositive(shifted)
            vstore(y, j, width - j, shifted if log else e)
            total = total + e                        # a NaN dropped by vmax comes back here
        s = hsum(total)
        s = s if s != zero else x.dtype.type(1)      # a row of all -inf: 0 / 1 and -inf - log(1)
        if log:                                      # y = (x - m) - log(s)
            c = np.log(s)
            for j in range(0, width, step):
                vstore(y, j, width - j, vload(y, j, width - j, zero) - c)
        else:                                        # y = exp(x - m) / s
            inverse = x.dtype.type(1) / s
            for j in range(0, width, step):
                vstore(y, j, width - j, vload(y, j, width - j, zero) * inverse)


@jit()
def _softmax_backward_kernel(y, grad, out):
    one = y.dtype.type(1)
    for r in range(y.shape[0]):
        softmax_backward_row(y[r], grad[r], out[r], one)


def _run_softmax(x, log):
    rows = as_rows(x)
    out = np.empty(rows.shape, dtype=x.dtype)
    _softmax_kernel(rows, out, log)
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
