"""softmax and log_softmax along one axis, through the Numba kernels.

Both are computed directly and stably (subtract the row max first); a row that
is entirely -inf (a fully masked attention row) gives zeros from softmax, never
NaN, and no gradient.
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
    kernel_forward = staticmethod(lambda x: kernels.softmax(x))
    kernel_backward = staticmethod(lambda y, g: kernels.softmax_backward(y, g))


class LogSoftmax(_LastAxisOp):
    kernel_forward = staticmethod(lambda x: kernels.log_softmax(x))
    kernel_backward = staticmethod(lambda y, g: kernels.log_softmax_backward(y, g))
