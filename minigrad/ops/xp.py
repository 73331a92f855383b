"""The few array functions an op's backward and tangent rules need beyond
operators, for numpy arrays and minigrad Tensors alike.

Why: each rule is written once and runs two ways. The ordinary ``backward()``
calls it with numpy arrays (fast, nothing recorded); ``backward(create_graph=True)``
and forward mode call the same lines with Tensors, so the gradient is itself
built from recorded, differentiable ops. Operators (``+ - * / **``, unary ``-``),
``.sum(axis=, keepdims=)``, ``.mean``, ``.reshape``, ``.transpose``, ``.astype``
and ``x[index]`` already mean the same on both; what numpy spells as a
function is here, dispatching on the argument's type ("xp" is the array-API
habit of naming the array namespace a function works with). ``call`` runs an
op's ``@accelerated`` function: its kernel on arrays, its numpy lines on Tensors.
"""
import numpy as np

from .. import tensor_type


def is_tensor(x) -> bool:
    # the first-order pass (arrays) is the hot one: decide it without an import
    return type(x) is not np.ndarray and hasattr(x, "grad_fn")



def call(function, *args):
    """An op's rule ``function`` (often ``@accelerated``) on ``args``.

    On arrays it is the ordinary call (the registered kernel when one fits): the
    first-order pass is exactly as fast as before. On Tensors (``create_graph=True``,
    forward mode) it runs the numpy definition, written with what arrays and Tensors
    share, so the call is recorded op by op (a kernel takes arrays only)."""
    for x in args:
        if is_tensor(x):
            return getattr(function, "numpy", function)(*args)
    return function(*args)


def where(condition, a, b):
    """``a`` where the constant boolean ``condition`` holds, else ``b``."""
    if is_tensor(a) or is_tensor(b):
        from .select import where as tensor_where
        return tensor_where(condition, a, b)
    return np.where(condition, a, b)


def exp(x):
    return x.exp() if is_tensor(x) else np.exp(x)


def log(x):
    return x.log() if is_tensor(x) else np.log(x)


def log1p(x):
    """log(1 + x), exact near 0 (the op ``Log1p`` on Tensors)."""
    return x.log1p() if is_tensor(x) else np.log1p(x)


def tanh(x):
    return x.tanh() if is_tensor(x) else np.tanh(x)


def sigmoid(x):
    """1 / (1 + exp(-x)) from exp(-|x|), so that no exp overflows (the op ``Sigmoid`` on Tensors)."""
    if is_tensor(x):
        return x.sigmoid()
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e))


def constant(x):
    """The values of ``x`` as an array: for masks and the like, which carry no derivative."""
    return x.data if is_tensor(x) else x


def moveaxis(x, source, destination):
    if is_tensor(x):
        order = [i for i in range(x.ndim) if i != source % x.ndim]
        order.insert(destination % x.ndim, source % x.ndim)
        return x.transpose(tuple(order))
    return np.moveaxis(x, source, destination)


def zeros(shape, like):
    """Zeros of ``shape`` in ``like``'s dtype: a constant Tensor if ``like`` is a Tensor, else an array."""
    if is_tensor(like):
        return tensor_type.constant(np.zeros(shape, like.dtype))
    return np.zeros(shape, like.dtype)


def zeros_like(x):
    if is_tensor(x):
        return tensor_type.constant(np.zeros_like(x.data))
    return np.zeros_like(x)


def sign(x):
    """The sign, 0 at NaN as PyTorch's sign (numpy's is NaN there). On Tensors the op ``Sign``,
    whose derivative is exactly 0: connected to x, as PyTorch's sgn, so a gradient built from
    it still requires grad beyond first order."""
    if is_tensor(x):
        return x.sign()
    s = np.sign(x)
    return np.where(s == s, s, s.dtype.type(0)) if s.dtype.kind == "f" else s


def expand_dims(x, axes):
    if is_tensor(x):
        shape = list(x.shape)
        for axis in sorted(axes):
            shape.insert(axis, 1)
        return x.reshape(tuple(shape))
    return np.expand_dims(x, axes)


def broadcast_to(x, shape):
    if is_tensor(x):
        return x.broadcast_to(shape)
    return np.broadcast_to(x, shape)


def split(x, splits, axis):
    """Pieces of ``x`` along ``axis``, cut before each index in ``splits`` (``np.split``)."""
    if is_tensor(x):
        edges = [0, *[int(s) for s in splits], x.shape[axis]]
        return tuple(x[(slice(None),) * axis + (slice(start, stop),)] for start, stop in zip(edges, edges[1:]))
    return tuple(np.split(x, splits, axis=axis))


def unstack(x, axis):
    """The slices of ``x`` along ``axis`` (the inverse of ``stack``)."""
    if is_tensor(x):
        return tuple(x[(slice(None),) * axis + (i,)] for i in range(x.shape[axis]))
    return tuple(np.moveaxis(x, axis, 0))


def concatenate(pieces, axis):
    if any(is_tensor(p) for p in pieces):
        from .shape import concatenate as tensor_concatenate
        return tensor_concatenate([tensor_type.as_tensor(p) for p in pieces], axis=axis)
    return np.concatenate(pieces, axis=axis)


def stack(pieces, axis):
    if any(is_tensor(p) for p in pieces):
        from .shape import stack as tensor_stack
        return tensor_stack([tensor_type.as_tensor(p) for p in pieces], axis=axis)
    return np.stack(pieces, axis=axis)
