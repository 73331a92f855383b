"""sum, mean, max and min over any axes, with keepdims; argmax (no gradient).

Backward and tangent rules use only ``.sum`` and ``minigrad.ops.xp``, so they
run on numpy arrays and Tensors alike (``differentiable_backward``, see
``function.py``)."""
import numpy as np

from ..function import Function
from .. import tensor_type
from . import xp
from .checks import normalize_axes, normalize_axis, unwrap


def _expand_back(grad, axes, keepdims, shape):
    """Broadcast a reduced gradient back over the reduced axes."""
    if not keepdims:
        grad = xp.expand_dims(grad, axes)
    return xp.broadcast_to(grad, shape)


class Sum(Function):
    differentiable_backward = True

    def forward(self, a, axis=None, keepdims=False):
        self.axes = normalize_axes(axis, a.ndim, "sum")
        self.keepdims, self.shape = keepdims, a.shape
        return np.sum(a, axis=self.axes, keepdims=keepdims)

    def backward(self, grad):
        return _expand_back(grad, self.axes, self.keepdims, self.shape)

    def jvp(self, tangent):
        return tangent.sum(axis=self.axes, keepdims=self.keepdims)


class Mean(Function):
    differentiable_backward = True

    def forward(self, a, axis=None, keepdims=False):
        self.axes = normalize_axes(axis, a.ndim, "mean")
        self.keepdims, self.shape = keepdims, a.shape
        self.count = int(np.prod([a.shape[i] for i in self.axes]))
        return np.mean(a, axis=self.axes, keepdims=keepdims)

    def backward(self, grad):
        return _expand_back(grad / grad.dtype.type(self.count), self.axes, self.keepdims, self.shape)

    def jvp(self, tangent):
        return tangent.sum(axis=self.axes, keepdims=self.keepdims) / tangent.dtype.type(self.count)


class _Extreme(Function):
    """max or min; ties share the gradient equally (like ``torch.amax``/``amin``), and the
    tangent is the mean of the tied entries' tangents (the same rule, transposed). NaN rules
    as PyTorch's: docs/nan-rules.md."""
    pick = None
    differentiable_backward = True

    def forward(self, a, axis=None, keepdims=False):
        self.axes = normalize_axes(axis, a.ndim, self.name.lower())
        if a.size == 0:
            raise ValueError(f"{self.name.lower()} of an empty tensor of shape {a.shape} has no value")
        self.keepdims = keepdims
        out = self.pick(a, axis=self.axes, keepdims=True)
        self.is_extreme = a == out
        return out if keepdims else np.squeeze(out, axis=self.axes)

    def backward(self, grad):
        if not self.keepdims:
            grad = xp.expand_dims(grad, self.axes)
        ties = self.is_extreme.sum(axis=self.axes, keepdims=True).astype(grad.dtype)
        # a product, not a selection, as torch.amax: a slice whose extreme is NaN (no entry equals
        # it, 0 ties) gets NaN throughout, and so does a slice with a NaN or inf output gradient
        with np.errstate(divide="ignore", invalid="ignore"):
            return grad / ties * self.is_extreme.astype(grad.dtype)

    def jvp(self, tangent):
        ties = self.is_extreme.sum(axis=self.axes, keepdims=True).astype(tangent.dtype)
        picked = xp.where(self.is_extreme, tangent, tangent.dtype.type(0)).sum(axis=self.axes, keepdims=True)
        out = picked / ties
        return out if self.keepdims else out.reshape(tuple(n for i, n in enumerate(out.shape) if i not in self.axes))


class Max(_Extreme):
    pick = staticmethod(np.max)


class Min(_Extreme):
    pick = staticmethod(np.min)


def argmax(x, axis=None, keepdims=False):
    """Index of the largest entry (of the flattened tensor when axis is None), as an
    int64 Tensor without gradient; the first one wins ties, and NaN counts as the
    largest, as in PyTorch."""
    data = unwrap(x)
    if data.size == 0:
        raise ValueError(f"argmax of an empty tensor of shape {data.shape} has no value")
    if axis is not None:
        axis = normalize_axis(axis, data.ndim, "argmax")
    return tensor_type.Tensor(np.argmax(data, axis=axis, keepdims=keepdims).astype(np.int64))
