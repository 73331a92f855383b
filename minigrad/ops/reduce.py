"""sum, mean and max over any axes, with keepdims."""
import numpy as np

from ..function import Function
from .checks import normalize_axes


def _expand_back(grad, axes, keepdims, shape):
    """Broadcast a reduced gradient back over the reduced axes."""
    if not keepdims:
        grad = np.expand_dims(grad, axes)
    return np.broadcast_to(grad, shape)


class Sum(Function):
    def forward(self, a, axis=None, keepdims=False):
        self.axes = normalize_axes(axis, a.ndim, "sum")
        self.keepdims, self.shape = keepdims, a.shape
        return np.sum(a, axis=self.axes, keepdims=keepdims)

    def backward(self, grad):
        return _expand_back(grad, self.axes, self.keepdims, self.shape)


class Mean(Function):
    def forward(self, a, axis=None, keepdims=False):
        self.axes = normalize_axes(axis, a.ndim, "mean")
        self.keepdims, self.shape = keepdims, a.shape
        self.count = int(np.prod([a.shape[i] for i in self.axes]))
        return np.mean(a, axis=self.axes, keepdims=keepdims)

    def backward(self, grad):
        return _expand_back(grad / grad.dtype.type(self.count), self.axes, self.keepdims, self.shape)


class Max(Function):
    """Ties share the gradient equally (like ``torch.amax``)."""

    def forward(self, a, axis=None, keepdims=False):
        self.axes = normalize_axes(axis, a.ndim, "max")
        if a.size == 0:
            raise ValueError(f"max of an empty tensor of shape {a.shape} has no value")
        self.keepdims = keepdims
        out = np.max(a, axis=self.axes, keepdims=True)
        self.is_max = a == out
        return out if keepdims else np.squeeze(out, axis=self.axes)

    def backward(self, grad):
        if not self.keepdims:
            grad = np.expand_dims(grad, self.axes)
        ties = self.is_max.sum(axis=self.axes, keepdims=True)
        return self.is_max * (grad / ties.astype(grad.dtype))
