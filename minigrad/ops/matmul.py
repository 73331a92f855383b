"""Matrix product, 2-D and batched with broadcast batch dimensions.

The arithmetic is ``matmul_arrays``: ``a @ b`` (BLAS), with a batch times one shared matrix
folded into the rows (one BLAS call, ``over_rows``, which ``Linear`` shares).
``kernels/matmul_kernels.py`` registers a Numba kernel for batches of small matrices
(op-by-op attention), where one BLAS call per matrix is slow.
"""
import operator

from ..accelerated import accelerated
from ..function import Function, tangent_sum
from . import xp
from .checks import broadcast_shape


def over_rows(multiply, x, w):
    """``multiply(x, w)`` (a matrix product) for x (..., K) and a 2-D w (K, N), every leading
    dimension of x folded into the rows: one product for the whole batch, not one per item.
    Arrays and Tensors alike (``multiply`` decides which product runs)."""
    rows = multiply(x.reshape(-1, x.shape[-1]), w)
    return rows.reshape(x.shape[:-1] + (w.shape[-1],))


def summed_over_rows(multiply, x, g):
    """``xᵀ @ g`` summed over every leading position of x (..., K) and g (..., N): the gradient
    of a w shared by all rows of ``x @ w``, as one product of the folded rows."""
    return multiply(x.reshape(-1, x.shape[-1]).T, g.reshape(-1, g.shape[-1]))


@accelerated
def matmul_arrays(a, b):
    """a @ b for ndim >= 2 (batch dimensions broadcast); a batch times one matrix (x @ W) as one
    product of the folded rows. The same lines run on Tensors (``xp.call``, beyond first order)."""
    if b.ndim == 2 and a.ndim > 2:
        return over_rows(operator.matmul, a, b)
    return a @ b


class MatMul(Function):
    # forward: C = A @ B (batch dims broadcast);  backward: dA = g @ B^T,  dB = A^T @ g
    # tangent: dC = dA @ B + A @ dB.  All products go through xp.call: the kernel on arrays,
    # recorded MatMul ops on Tensors (differentiable_backward, see function.py).
    differentiable_backward = True

    def forward(self, a, b):
        if a.shape[-1] != b.shape[-2]:
            raise ValueError(f"matmul: shapes {a.shape} and {b.shape} do not fit: the last dimension "
                             f"of the left ({a.shape[-1]}) must equal the second-to-last of the right "
                             f"({b.shape[-2]})")
        broadcast_shape(f"matmul of {a.shape} and {b.shape} (batch dimensions)", a.shape[:-2], b.shape[:-2])
        return matmul_arrays(a, b)

    def backward(self, grad, *, a, b):
        need_a, need_b = self.needs_input_grad
        grad_a = xp.call(matmul_arrays, grad, b.swapaxes(-1, -2)) if need_a else None  # dA = g @ B^T
        grad_b = None
        if need_b:
            if b.ndim == 2 and a.ndim > 2:
                grad_b = shared_weight_grad(a, grad)
            else:
                grad_b = xp.call(matmul_arrays, a.swapaxes(-1, -2), grad)  # dB = A^T @ g; the engine sums broadcast batch dims
        return grad_a, grad_b

    def jvp(self, da, db, *, a, b):
        return tangent_sum(None if da is None else xp.call(matmul_arrays, da, b),
                           None if db is None else xp.call(matmul_arrays, a, db))


def shared_weight_grad(x, grad):
    """Gradient of W in x @ W for x (..., in), W (in, out): one product of the folded rows."""
    return summed_over_rows(lambda left, right: xp.call(matmul_arrays, left, right), x, grad)


def matmul(a, b):
    """``a @ b`` for tensors; 1-D operands act as a row (left) or column (right) vector."""
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError(f"matmul: needs at least 1-D operands, got shapes {a.shape} and {b.shape}; "
                         "use * to scale by a number")
    if a.shape[-1] != b.shape[-2 if b.ndim > 1 else 0]:
        raise ValueError(f"matmul: shapes {a.shape} and {b.shape} do not fit: the last dimension of the "
                         "left must equal the second-to-last (or only) dimension of the right")
    if a.ndim == 1 and b.ndim == 1:
        return matmul(a.reshape(1, -1), b.reshape(-1, 1)).reshape(())
    if a.ndim == 1:
        out = matmul(a.reshape(1, -1), b)
        return out.reshape(out.shape[:-2] + out.shape[-1:])
    if b.ndim == 1:
        out = matmul(a, b.reshape(-1, 1))
        return out.reshape(out.shape[:-1])
    return MatMul.apply(a, b)


