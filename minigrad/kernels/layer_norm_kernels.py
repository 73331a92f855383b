"""Layer norm over the last axis, forward and backward, one pass per row: kernels for
``ops/nn_ops.py``'s ``layer_norm`` and ``layer_norm_backward`` (the math is there)."""
import numpy as np

from ..ops import nn_ops as op
from .jit import jit
from .registry import kernel_for
from .rows import as_rows, float_arrays
from .simd import hsum, lanes, vfma, vload, vsplat, vstore


@jit()
def _layer_norm_kernel(x, weight, bias, eps, out, mean_out, rstd_out):
    zero, width, step = x.dtype.type(0), x.shape[1], lanes(weight)
    inverse_width = x.dtype.type(1) / x.dtype.type(width)
    for r in range(x.shape[0]):
        row, y = x[r], out[r]
        total = vsplat(zero)
        for j in range(0, width, step):
            total = total + vload(row, j, width - j, zero)
        mean = hsum(total) * inverse_width
        squares = vsplat(zero)
        for j in range(0, width, step):
            d = vload(row, j, width - j, mean) - mean  # padding lanes hold mean: d = 0
            squares = vfma(squares, d, d)
        rstd = x.dtype.type(1) / np.sqrt(hsum(squares) * inverse_width + eps)
        for j in range(0, width, step):
            x_hat = (vload(row, j, width - j, zero) - mean) * rstd
            vstore(y, j, width - j, vfma(vload(bias, j, width - j, zero), x_hat, vload(weight, j, width - j, zero)))
        mean_out[r] = mean
        rstd_out[r] = rstd


@jit()
def _layer_norm_backward_kernel(grad, x, weight, mean, rstd, dx, dweight, dbias):
    zero, width, step = x.dtype.type(0), x.shape[1], lanes(weight)
    inverse_width = x.dtype.type(1) / x.dtype.type(width)
    dweight[:] = zero
    dbias[:] = zero
    for r in range(x.shape[0]):
        x_row, g_row, dx_row = x[r], grad[r], dx[r]
        m, s = mean[r], rstd[r]
        g_sum = vsplat(zero)
        g_xhat_sum = vsplat(zero)
        for j in range(0, width, step):
            n = width - j
            g = vload(g_row, j, n, zero)
            x_hat = (vload(x_row, j, n, zero) - m) * s
            gw = g * vload(weight, j, n, zero)
            g_sum = g_sum + gw
            g_xhat_sum = vfma(g_xhat_sum, gw, x_hat)
            vstore(dweight, j, n, vfma(vload(dweight, j, n, zero), g, x_hat))
            vstore(dbias, j, n, vload(dbias, j, n, zero) + g)
        g_mean = hsum(g_sum) * inverse_width
        g_xhat_mean = hsum(g_xhat_sum) * inverse_width
        for j in range(0, width, step):
            n = width - j
            x_hat = (vload(x_row, j, n, zero) - m) * s
            gw = vload(g_row, j, n, zero) * vload(weight, j, n, zero)
            vstore(dx_row, j, n, (gw - g_mean - x_hat * g_xhat_mean) * s)


def _fits(x, weight, bias, eps):
    return (float_arrays(x) and float_arrays(weight, bias) and weight.dtype == x.dtype
            and weight.shape == x.shape[-1:])


def _backward_fits(grad, x, weight, mean, rstd):
    return (float_arrays(grad, x) and float_arrays(mean, rstd) and weight.dtype == x.dtype
            and weight.shape == x.shape[-1:] and mean.dtype == x.dtype and mean.shape == x.shape[:-1])


def _example(rng, dtype, size):
    shape = (3, 5, 13) if size == "small" else (128, 19, 64)
    x, weight, bias = (rng.standard_normal(s).astype(dtype) for s in (shape, shape[-1:], shape[-1:]))
    return x, weight, bias, 1e-5


def _backward_example(rng, dtype, size):
    x, weight, bias, eps = _example(rng, dtype, size)
    _, mean, rstd = op.layer_norm.numpy(x, weight, bias, eps)
    return rng.standard_normal(x.shape).astype(dtype), x, weight, mean, rstd


@kernel_for(op.layer_norm, fits=_fits, example=_example, stage="forward", compiled=[_layer_norm_kernel])
def layer_norm(x, weight, bias, eps):
    rows = as_rows(x)
    y, mean, rstd = np.empty(rows.shape, x.dtype), np.empty(len(rows), x.dtype), np.empty(len(rows), x.dtype)
    _layer_norm_kernel(rows, np.ascontiguousarray(weight), np.ascontiguousarray(bias), x.dtype.type(eps), y, mean, rstd)
    return y.reshape(x.shape), mean.reshape(x.shape[:-1]), rstd.reshape(x.shape[:-1])


@kernel_for(op.layer_norm_backward, fits=_backward_fits, example=_backward_example, stage="training",
            compiled=[_layer_norm_backward_kernel])
def layer_norm_backward(grad, x, weight, mean, rstd):
    rows = as_rows(x)
    dx, dweight, dbias = np.empty(rows.shape, x.dtype), np.empty(x.shape[-1], x.dtype), np.empty(x.shape[-1], x.dtype)
    _layer_norm_backward_kernel(as_rows(grad), rows, np.ascontiguousarray(weight),
                                np.ascontiguousarray(mean).reshape(-1), np.ascontiguousarray(rstd).reshape(-1),
                                dx, dweight, dbias)
    return dx.reshape(x.shape), dweight, dbias
