"""ReLU forward and backward in one pass each (numpy's ``np.where`` takes extra passes: a
boolean temporary first); LLVM vectorises these long, branch-free loops itself. The math,
NaN included: ``ops/elementwise.py``."""
import numpy as np

from ..ops import elementwise as op
from .jit import jit
from .registry import kernel_for
from .rows import float_arrays


@jit()
def _relu_kernel(x, out):
    zero = x.dtype.type(0)
    for i in range(x.shape[0]):
        value = x[i]
        out[i] = zero if value <= zero else value  # NaN is kept


@jit()
def _relu_backward_kernel(out, grad, dx):
    zero = grad.dtype.type(0)
    for i in range(out.shape[0]):
        dx[i] = zero if out[i] <= zero else grad[i]  # a NaN output passes its gradient


def _contiguous_floats(*arrays):
    """The loops run over flat memory: float arrays of one shape, C-contiguous."""
    return float_arrays(*arrays) and all(a.flags.c_contiguous for a in arrays)


def _example(rng, dtype, size, arrays=1):
    shape = (3, 5, 7) if size == "small" else (128, 19, 256)  # the feed-forward's hidden layer
    return tuple(rng.standard_normal(shape).astype(dtype) for _ in range(arrays))


@kernel_for(op.relu, fits=_contiguous_floats, example=_example, stage="forward", compiled=[_relu_kernel])
def relu(x):
    out = np.empty_like(x)
    _relu_kernel(x.reshape(-1), out.reshape(-1))
    return out


@kernel_for(op.relu_backward, fits=_contiguous_floats, example=lambda rng, dtype, size: _example(rng, dtype, size, 2),
            stage="training", compiled=[_relu_backward_kernel])
def relu_backward(out, grad):
    dx = np.empty_like(grad)
    _relu_backward_kernel(out.reshape(-1), grad.reshape(-1), dx.reshape(-1))
    return dx
