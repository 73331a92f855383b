"""Argument checks shared by the ops, so every bad call gets a message that
names the op, the shapes involved and a way out (never a numpy traceback)."""
import numpy as np

from .. import tensor_type


def normalize_axis(axis: int, ndim: int, op: str) -> int:
    if isinstance(axis, (bool, np.bool_)) or not isinstance(axis, (int, np.integer)):
        raise TypeError(f"{op}: axis must be an int, got {type(axis).__name__} {axis!r}")
    if not -ndim <= axis < max(ndim, 1):
        raise ValueError(f"{op}: axis {axis} is out of range for a tensor with {ndim} dimension(s) "
                         f"(valid: {-ndim} .. {ndim - 1})")
    return int(axis) % max(ndim, 1)


def normalize_axes(axis, ndim: int, op: str):
    """None -> every axis; an int or a tuple of ints -> a sorted tuple of non-negative axes."""
    if axis is None:
        return tuple(range(ndim))
    if not isinstance(axis, (int, np.integer, tuple, list)):
        raise TypeError(f"{op}: axis must be None, an int or a tuple of ints, got {type(axis).__name__} "
                        f"{axis!r}")
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    normalized = tuple(sorted(normalize_axis(a, ndim, op) for a in axes))
    if len(set(normalized)) != len(normalized):
        raise ValueError(f"{op}: axis {axis} names the same axis twice")
    return normalized


def broadcast_shape(op: str, *shapes) -> tuple:
    try:
        return np.broadcast_shapes(*shapes)
    except ValueError:
        listed = " and ".join(str(tuple(s)) for s in shapes)
        raise ValueError(f"{op}: shapes {listed} cannot be broadcast together "
                         "(trailing dimensions must be equal or 1)") from None


def unwrap(x):
    """A Tensor's array, or x itself (numpy arrays have a ``.data`` too, so test the type)."""
    return x.data if isinstance(x, tensor_type.Tensor) else x
