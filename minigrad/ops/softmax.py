"""softmax and log_softmax along one axis, through the Numba kernels.

Both are computed directly and stably (subtract the row max first); a row that
is entirely -inf (a fully masked attention row) gives zeros from softmax, never
NaN, and no gradient; a NaN anywhere in a row makes that row NaN.
"""
import numpy as np

from .. import kernels
from ..function import Function
from .checks import normalize_axis


class _LastAxisOp(Function):
    """Moves ``axis`` to the end for the kernels (which work on the last axis) and back."""

    def forward(self, a, axis=-1):
        if a.dtype.kind != "f":
            raise TypeError(f"{self.name.lower()} needs floating-point input, got dtype {a.dtype}")
        self.axis = normalize_axis(axis, a.ndim, self.name.lower())
        self.moved = self.axis != a.ndim - 1
        x = np.moveaxis(a, self.axis, -1) if self.moved else a
        self.out = self.kernel_forward(x)
        return np.moveaxis(self.out, -1, self.axis) if self.moved else self.out

    def backward(self, grad):
        g = np.moveaxis(grad, self.axis, -1) if self.moved else grad
        dx = self.kernel_backward(self.out, g)
        return np.moveaxis(dx, -1, self.axis) if self.moved else dx


class Softmax(_LastAxisOp):
    # y = exp(x - max) / sum(exp(x - max))          (max: the row max, 0 for a row of all -inf)
    kernel_forward = staticmethod(lambda x: kernels.softmax(x))
    # dx = y * (g - sum(g * y))
    kernel_backward = staticmethod(lambda y, g: kernels.softmax_backward(y, g))


class LogSoftmax(_LastAxisOp):
    # y = (x - max) - log(sum(exp(x - max)))        (in that order: exact near the max in float32)
    kernel_forward = staticmethod(lambda x: kernels.log_softmax(x))
    # dx = g - exp(y) * sum(g)                       (0 for a row of all -inf)
    kernel_backward = staticmethod(lambda y, g: kernels.log_softmax_backward(y, g))
