"""softmax and log_softmax along one axis: the math, in numpy, and the ops.

Both are computed directly and stably (subtract the row max first); a row that
is entirely -inf (a fully masked attention row) gives zeros from softmax, never
NaN, and no gradient; a NaN anywhere in a row makes that row NaN. Log-softmax is
``(x - max) - log(sum)``: exact near the max, so float32 keeps its precision for
logits of 1e6. The functions below work on the last axis; ``kernels/softmax_kernels.py``
registers faster versions of the ones marked ``@accelerated``.
"""
import numpy as np

from ..accelerated import accelerated
from ..function import Function
from . import xp
from .checks import normalize_axis


def _shift(x):
    """The row max to subtract before exp, or 0 for a row of all -inf (-inf - -inf would be NaN)."""
    m = np.max(x, axis=-1, keepdims=True)  # NaN if the row holds a NaN
    return np.where(np.isneginf(m), x.dtype.type(0), m)


@accelerated
def softmax(x):
    """y = exp(x - max) / sum(exp(x - max)) per row; a row of all -inf gives zeros."""
    e = np.exp(x - _shift(x))
    s = np.sum(e, axis=-1, keepdims=True)
    return e / np.where(s == 0, 1, s)  # masked row: 0 / 1


@accelerated
def softmax_backward(y, grad):
    """dx = y * (grad - sum(grad * y)) per row: O(width), no Jacobian. The Jacobian
    diag(y) - y yᵀ is symmetric, so this is also the tangent rule (J v = vᵀ J)."""
    return y * (grad - (grad * y).sum(axis=-1, keepdims=True))


@accelerated
def log_softmax(x):
    """y = (x - max) - log(sum(exp(x - max))) per row; a row of all -inf stays all -inf."""
    shifted = x - _shift(x)
    s = np.sum(np.exp(shifted), axis=-1, keepdims=True)
    return shifted - np.log(np.where(s == 0, 1, s))  # masked row: -inf - log(1)


def log_softmax_backward(y, grad):
    """dx = grad - exp(y) * sum(grad) per row; zeros for a fully masked row (all -inf).
    No kernel: the model never runs it (cross-entropy has its own backward)."""
    dx = grad - xp.exp(y) * grad.sum(axis=-1, keepdims=True)
    return xp.where(_fully_masked(y), dx.dtype.type(0), dx)


def log_softmax_jvp(y, tangent):
    """dy = tangent - sum(exp(y) * tangent) per row (the Jacobian I - 1 pᵀ is not symmetric,
    so forward mode has its own line); zeros for a fully masked row."""
    dy = tangent - (xp.exp(y) * tangent).sum(axis=-1, keepdims=True)
    return xp.where(_fully_masked(y), dy.dtype.type(0), dy)


def _fully_masked(y):
    """Rows of log-softmax output that are all -inf (every input was -inf): a constant mask."""
    return np.all(np.isneginf(xp.constant(y)), axis=-1, keepdims=True)


class _LastAxisOp(Function):
    """Moves ``axis`` to the end (the functions above work on the last axis) and back.

    Backward and tangent rules use ``xp``, so they run on arrays (kernels when they fit)
    and on Tensors (``differentiable_backward``); they need only the saved output."""
    differentiable_backward = True

    def forward(self, a, axis=-1):
        op = self.rows_forward.__name__
        if a.dtype.kind != "f":
            raise TypeError(f"{op} needs floating-point input, got dtype {a.dtype}")
        self.axis = normalize_axis(axis, a.ndim, op)
        if a.ndim == 0:
            raise ValueError(f"{op} needs at least 1-D input, got a 0-d tensor; reshape it to (1,) first")
        if a.shape[self.axis] == 0:
            raise ValueError(f"{op} over an axis of length 0 (input of shape {a.shape}, axis {axis}) "
                             "has no value; give it at least one entry along that axis")
        self.moved = self.axis != a.ndim - 1
        x = np.moveaxis(a, self.axis, -1) if self.moved else a
        out = self.rows_forward(x)
        return np.moveaxis(out, -1, self.axis) if self.moved else out

    def backward(self, grad, *, out):
        return self._by_rows(self.rows_backward, out, grad)

    def jvp(self, tangent, *, out):
        return self._by_rows(self.rows_jvp, out, tangent)

    def _by_rows(self, rule, out, vector):
        """``rule(out, vector)`` with the op's axis moved last for the call, then back."""
        if not self.moved:
            return xp.call(rule, out, vector)
        rows = xp.call(rule, xp.moveaxis(out, self.axis, -1), xp.moveaxis(vector, self.axis, -1))
        return xp.moveaxis(rows, -1, self.axis)


class Softmax(_LastAxisOp):
    rows_forward = staticmethod(softmax)
    rows_backward = rows_jvp = staticmethod(softmax_backward)     # symmetric Jacobian


class LogSoftmax(_LastAxisOp):
    rows_forward = staticmethod(log_softmax)
    rows_backward = staticmethod(log_softmax_backward)
    rows_jvp = staticmethod(log_softmax_jvp)


