"""Ops that move data without arithmetic: reshape, transpose, indexing,
concatenate and stack. Their backward moves the gradient back the same way,
and their tangent rule moves the tangent forward like the values.

Beyond first order (``differentiable_backward``, see ``function.py``) the
rules run on Tensors too; that needs two ops of their own here: ``BroadcastTo``
(the backward of a sum) and ``IndexAdd`` (the backward of indexing: the
gradient scattered back, repeated indices adding up). Each is the other's
backward: ``x[index]`` and "add into zeros at ``index``" are transposes."""
import numpy as np

from ..accelerated import accelerated
from .. import tensor_type
from ..function import Function, unbroadcast
from . import xp
from .checks import normalize_axis, unwrap


class Reshape(Function):
    differentiable_backward = True
    returns_view = True     # numpy reshapes without a copy when it can: then the result shares x's memory

    def forward(self, a, shape):
        self.input_shape, self.shape = a.shape, shape
        try:
            return a.reshape(shape)
        except ValueError:
            raise ValueError(f"reshape: cannot reshape a tensor of shape {a.shape} ({a.size} elements) "
                             f"into shape {tuple(shape)}") from None

    def backward(self, grad):
        return grad.reshape(self.input_shape)

    def jvp(self, tangent):
        return tangent.reshape(self.shape)


class Transpose(Function):
    differentiable_backward = True
    returns_view = True

    def forward(self, a, axes=None):
        if axes is None:
            self.axes = tuple(reversed(range(a.ndim)))
        else:
            self.axes = tuple(normalize_axis(x, a.ndim, "transpose") for x in axes)
            if sorted(self.axes) != list(range(a.ndim)):
                raise ValueError(f"transpose: axes {tuple(axes)} are not a permutation of the "
                                 f"{a.ndim} axes of shape {a.shape}")
        return a.transpose(self.axes)

    def backward(self, grad):
        return grad.transpose(np.argsort(self.axes).tolist())

    def jvp(self, tangent):
        return tangent.transpose(self.axes)


class BroadcastTo(Function):
    """Stretch size-1 axes (and prepend axes) to ``shape``; the backward of a sum."""
    differentiable_backward = True

    def forward(self, a, shape):
        self.input_shape, self.shape = a.shape, tuple(shape)
        return np.broadcast_to(a, self.shape)

    def backward(self, grad):
        return unbroadcast(grad, self.input_shape)

    def jvp(self, tangent):
        return xp.broadcast_to(tangent, self.shape)


class GetItem(Function):
    """Slicing and integer-array indexing (embedding lookup, gathering target logits)."""
    differentiable_backward = True
    returns_view = True     # basic slicing gives a view; integer arrays copy (not a view, as in PyTorch)

    def forward(self, a, index):
        self.index = _check_index(index)
        self.shape = a.shape
        try:
            if a.ndim and _is_row_lookup(self.index):
                return a.take(self.index, axis=0)    # = a[index], ~2.5x faster for an embedding lookup
            return a[self.index]
        except IndexError as error:
            raise IndexError(f"indexing a tensor of shape {a.shape}: {error}") from None

    def backward(self, grad):
        return index_add(grad, self.index, self.shape)

    def jvp(self, tangent):
        return tangent[self.index]


class IndexAdd(Function):
    """zeros(shape) with ``grad`` added at ``index`` (repeated indices add up): the
    backward of ``x[index]``, as an op so that it can be differentiated again."""
    differentiable_backward = True

    def forward(self, grad, index, shape):
        self.index, self.shape = index, shape
        return _index_add(grad, index, shape)

    def backward(self, grad):
        return grad[self.index]

    def jvp(self, tangent):
        return index_add(tangent, self.index, self.shape)     # linear: the tangent goes the same way


def index_add(grad, index, shape):
    """zeros(shape) with ``grad`` added at ``index``: numpy for arrays, the op for Tensors."""
    if not xp.is_tensor(grad):     # an array, or a numpy scalar from a 0-d product
        return _index_add(np.asarray(grad), index, shape)
    return IndexAdd.apply(grad, index=index, shape=shape)


def _index_add(grad, index, shape):
    if _is_row_lookup(index):
        return scatter_add_rows(index, grad, shape)
    out = np.zeros(shape, dtype=grad.dtype)
    if _is_basic(index):
        out[index] = grad          # a view: each element picked at most once
    else:
        np.add.at(out, index, grad)  # repeated indices must add up
    return out


def _is_row_lookup(index):
    """table[ids]: one integer array picking rows (an embedding lookup, any number of ids)."""
    return isinstance(index, np.ndarray) and index.dtype.kind in "iu"


@accelerated
def scatter_add_rows(ids, grad, shape):
    """Sum the gradient rows of every lookup into the rows they came from: zeros(shape) with
    each row of ``grad`` (shaped ids.shape + shape[1:]) added at its id, in the order of the ids
    (an embedding's gradient; ``kernels/scatter_kernels.py`` does it in one pass).

    Sort the ids, then add each run of equal ids with one ``np.add.reduceat``:
    ~4x faster than ``np.add.at`` at the model's embedding lookups, and as fast
    as a one-hot BLAS product without depending on BLAS threads. Negative ids count from the end, as in the forward, so they are
    wrapped first (forward already rejected ids out of range).
    """
    flat_ids = ids.reshape(-1)
    out = np.zeros(shape, dtype=grad.dtype)
    if flat_ids.size == 0:
        return out
    flat_ids = np.where(flat_ids < 0, flat_ids + shape[0], flat_ids)
    rows = grad.reshape((flat_ids.size,) + tuple(shape[1:]))
    order = np.argsort(flat_ids, kind="stable")
    sorted_ids = flat_ids[order]
    starts = np.flatnonzero(np.r_[True, sorted_ids[1:] != sorted_ids[:-1]])   # first of each run
    out[sorted_ids[starts]] = np.add.reduceat(rows.take(order, axis=0), starts, axis=0)  # take: 2x rows[order]
    return out


def _check_index(index):
    """Unwrap Tensors used as indices and reject float indices with a clear message."""
    parts = index if isinstance(index, tuple) else (index,)
    checked = []
    for part in parts:
        part = unwrap(part)
        if isinstance(part, (list, np.ndarray)):
            part = np.asarray(part)
            if part.size == 0 and part.dtype.kind == "f":
                part = part.astype(np.int64)     # [] is an empty index, as in numpy and PyTorch
            if part.dtype.kind not in "iub":
                raise IndexError(f"index arrays must hold integers or booleans, got dtype {part.dtype}; "
                                 "convert token ids with .astype(np.int64)")
        checked.append(part)
    return tuple(checked) if isinstance(index, tuple) else checked[0]


def _is_basic(index):
    parts = index if isinstance(index, tuple) else (index,)
    return all(p is None or p is Ellipsis or isinstance(p, (int, np.integer, slice)) for p in parts)


class Concatenate(Function):
    differentiable_backward = True

    def forward(self, *arrays, axis=0):
        axis = normalize_axis(axis, arrays[0].ndim, "concatenate")
        _check_same_shapes("concatenate", arrays, skip_axis=axis)
        self.axis = axis
        self.splits = np.cumsum([a.shape[axis] for a in arrays])[:-1]
        self.shapes = [a.shape for a in arrays]
        return np.concatenate(arrays, axis=axis)

    def backward(self, grad):
        return xp.split(grad, self.splits, axis=self.axis)

    def jvp(self, *tangents):
        return xp.concatenate(_zeros_for_constants(tangents, self.shapes), axis=self.axis)


class Stack(Function):
    differentiable_backward = True

    def forward(self, *arrays, axis=0):
        self.axis = normalize_axis(axis, arrays[0].ndim + 1, "stack")
        _check_same_shapes("stack", arrays)
        self.shapes = [a.shape for a in arrays]
        return np.stack(arrays, axis=self.axis)

    def backward(self, grad):
        return xp.unstack(grad, self.axis)

    def jvp(self, *tangents):
        return xp.stack(_zeros_for_constants(tangents, self.shapes), axis=self.axis)


def _zeros_for_constants(tangents, shapes):
    """The tangents with zeros for the inputs that have none (constants): a piece of a
    concatenation is copied, never multiplied, so zeros are exact there."""
    like = next(t for t in tangents if t is not None)
    return [xp.zeros(shape, like) if t is None else t for t, shape in zip(tangents, shapes)]


def _check_same_shapes(op, arrays, skip_axis=None):
    first = arrays[0].shape
    for i, a in enumerate(arrays[1:], start=1):
        same_rank = a.ndim == len(first)
        if not same_rank or any(x != y for k, (x, y) in enumerate(zip(first, a.shape)) if k != skip_axis):
            what = "all dimensions except the axis" if skip_axis is not None else "the same shape"
            raise ValueError(f"{op}: tensor 0 has shape {first} but tensor {i} has shape {a.shape}; "
                             f"they must agree in {what}")


def concatenate(tensors, axis=0):
    return Concatenate.apply(*_tensor_list("concatenate", tensors), axis=axis)


def stack(tensors, axis=0):
    return Stack.apply(*_tensor_list("stack", tensors), axis=axis)


def _tensor_list(op, tensors):
    """A non-empty list of tensors (PyTorch's torch.cat refuses an empty list and a lone tensor too)."""
    if isinstance(tensors, (tensor_type.Tensor, np.ndarray)):
        raise TypeError(f"{op} takes a list of tensors, got one {type(tensors).__name__}; "
                        f"write {op}([a, b, ...])")
    tensors = list(tensors)
    if not tensors:
        raise ValueError(f"{op} needs at least one tensor, got an empty list")
    return tensors
