"""Layer norm over the last axis, forward and backward, one pass per row (math: ``ops/nn_ops.py``)."""
import numpy as np

from .backend import numpy_selected
from .jit import jit
from .rows import as_rows, kernel_fits
from .simd import hsum, lanes, vfma, vload, vsplat, vstore


def layer_norm_numpy(x, weight, bias, eps):
    """y = (x - mean) * rstd * weight + bias, rstd = 1/sqrt(var + eps); returns (y, mean, rstd)."""
    eps = x.dtype.type(eps)
    mean = np.mean(x, axis=-1)
    centered = x - mean[..., None]
    rstd = 1 / np.sqrt(np.mean(centered * centered, axis=-1) + eps)
    return centered * rstd[..., None] * weight + bias, mean, rstd


def layer_norm_backward_numpy(grad, x, weight, mean, rstd):
    """(dx, dweight, dbias) for layer_norm_numpy."""
    x_hat = (x - mean[..., None]) * rstd[..., None]
    g = grad * weight
    dx = rstd[..., None] * (g - np.mean(g, axis=-1, keepdims=True)
                            - x_hat * np.mean(g * x_hat, axis=-1, keepdims=True))
    leading = tuple(range(x.ndim - 1))
    return dx, np.sum(grad * x_hat, axis=leading), np.sum(grad, axis=leading)


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


def layer_norm(x, weight, bias, eps):
    """Layer norm over the last axis; returns (y, mean, rstd), mean/rstd shaped x.shape[:-1]."""
    if (numpy_selected() or not kernel_fits(x) or not kernel_fits(weight, bias)
            or weight.dtype != x.dtype or weight.shape != x.shape[-1:]):
        return layer_norm_numpy(x, weight, bias, eps)
    rows = as_rows(x)
    y, mean, rstd = np.empty(rows.shape, x.dtype), np.empty(len(rows), x.dtype), np.empty(len(rows), x.dtype)
    _layer_norm_kernel(rows, np.ascontiguousarray(weight), np.ascontiguousarray(bias), x.dtype.type(eps), y, mean, rstd)
    return y.reshape(x.shape), mean.reshape(x.shape[:-1]), rstd.reshape(x.shape[:-1])


def layer_norm_backward(grad, x, weight, mean, rstd):
    """(dx, dweight, dbias) of layer_norm, from its saved mean and rstd."""
    if (numpy_selected() or not kernel_fits(grad, x) or not kernel_fits(mean, rstd)
            or weight.dtype != x.dtype or weight.shape != x.shape[-1:]
            or mean.dtype != x.dtype or mean.shape != x.shape[:-1]):
        return layer_norm_backward_numpy(grad, x, weight, mean, rstd)
    rows = as_rows(x)
    dx, dweight, dbias = np.empty(rows.shape, x.dtype), np.empty(x.shape[-1], x.dtype), np.empty(x.shape[-1], x.dtype)
    _layer_norm_backward_kernel(as_rows(grad), rows, np.ascontiguousarray(weight),
                                np.ascontiguousarray(mean).reshape(-1), np.ascontiguousarray(rstd).reshape(-1),
                                dx, dweight, dbias)
    return dx.reshape(x.shape), dweight, dbias
