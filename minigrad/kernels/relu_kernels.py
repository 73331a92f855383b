"""ReLU forward and backward in one pass each (numpy's take extra passes: a NaN check in
``np.maximum``, a boolean temporary in the backward); LLVM vectorises these long, branch-free
loops itself. NaN as in numpy: relu(NaN) is NaN and passes no gradient."""
import numpy as np

from .backend import numpy_selected
from .jit import jit
from .rows import kernel_fits


def relu_numpy(x):
    return np.maximum(x, x.dtype.type(0))


def relu_backward_numpy(out, grad):
    """grad where the forward output was positive, else 0."""
    return np.multiply(grad, out > 0, dtype=grad.dtype)


@jit()
def _relu_kernel(x, out):
    zero = x.dtype.type(0)
    for i in range(x.shape[0]):
        value = x[i]
        out[i] = value if not value < zero else zero  # NaN is kept, as np.maximum does


@jit()
def _relu_backward_kernel(out, grad, dx):
    zero = grad.dtype.type(0)
    for i in range(out.shape[0]):
        dx[i] = grad[i] if out[i] > zero else zero


def relu(x):
    """max(x, 0) elementwise, a new array."""
    if numpy_selected() or not kernel_fits(x) or not x.flags.c_contiguous:  # the loop runs over flat memory
        return relu_numpy(x)
    out = np.empty_like(x)
    _relu_kernel(x.reshape(-1), out.reshape(-1))
    return out


def relu_backward(out, grad):
    """Gradient of relu from its forward output and the output gradient."""
    if numpy_selected() or not kernel_fits(out, grad) or not (out.flags.c_contiguous and grad.flags.c_contiguous):
        return relu_backward_numpy(out, grad)
    dx = np.empty_like(grad)
    _relu_backward_kernel(out.reshape(-1), grad.reshape(-1), dx.reshape(-1))
    return dx
