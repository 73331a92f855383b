"""Tensor: a numpy array that remembers the op that made it, and backward.

    >>> x = Tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    >>> y = (x * x).sum()
    >>> y.backward()
    >>> x.grad                      # d(sum x^2)/dx = 2x
    array([[2., 4.],
           [6., 8.]], dtype=float32)

dtypes follow PyTorch: Python floats (and lists with any float) become
float32, Python ints int64, bools bool; numpy arrays keep their dtype, except
floats other than float32 and float64 (float64 stays: gradcheck needs it),
which become float32. Integer and bool tensors hold indices and masks and never
require a gradient: an op whose result is one records nothing (PyTorch's rule).

The op methods (``+``, ``@``, ``sum``, ``softmax``, ...) are thin wrappers around
the op classes in ``minigrad.ops``, where each op's forward and backward sit
side by side.
"""
import numpy as np

from . import autograd, hooks, ops, tensor_type
from .inplace import InPlaceOps, version_of
from .interop import NumpyInterop, refuse_numpy_arguments
from .tensor_type import as_tensor, operand_like as _like


class Tensor(NumpyInterop, InPlaceOps):
    """numpy interop (``np.asarray``, ``float()``, ...) lives in ``interop.py``,
    the in-place operators (``+=``, ...) in ``inplace.py``."""
    __slots__ = ("data", "grad", "requires_grad", "grad_fn", "name", "_retains_grad", "_hooks", "_version",
                 "_tangents", "__weakref__")   # _tangents: {level: Tensor}, only ever set by forward_ad

    def __init__(self, data, requires_grad=False, dtype=None, name=None):
        if isinstance(data, Tensor):
            data = data.data
        array = _to_array(data, dtype)
        if requires_grad and not np.issubdtype(array.dtype, np.floating):
            raise TypeError(
                f"only floating-point tensors can require gradients, got dtype {array.dtype}; "
                "pass float data or dtype=np.float32")
        self.data = array
        self.grad = None
        self.requires_grad = bool(requires_grad)
        self.grad_fn = None
        self.name = name
        self._retains_grad = False
        self._hooks = None      # {id: fn}, see register_hook
        self._version = None    # [tick of the last += etc.], shared with views and detach(); inplace.py

    @classmethod
    def _from_op(cls, array, grad_fn):
        """Fast path for op outputs: no conversion, no checks."""
        out = cls.__new__(cls)
        out.data = array
        out.grad = None
        out.requires_grad = grad_fn is not None
        out.grad_fn = grad_fn
        out.name = None
        out._retains_grad = False
        out._hooks = None
        out._version = None
        return out

    # ------------------------------------------------------------------ basics
    shape = property(lambda self: self.data.shape)
    ndim = property(lambda self: self.data.ndim)
    dtype = property(lambda self: self.data.dtype)
    size = property(lambda self: self.data.size)

    @property
    def is_leaf(self) -> bool:
        return self.grad_fn is None

    def __len__(self):
        return len(self.data)

    def numpy(self) -> np.ndarray:
        return self.data

    def item(self):
        if self.data.size != 1:
            raise ValueError(f"item() needs a tensor with one element, got shape {self.shape}")
        return self.data.item()

    def detach(self) -> "Tensor":
        """The same data, cut off from the graph. As in PyTorch it shares the data and the
        in-place version: ``d = x.detach(); d += 1`` makes a backward that saved x raise."""
        out = Tensor._from_op(self.data, None)
        out._version = version_of(self)
        return out

    def named(self, name: str) -> "Tensor":
        """Give this tensor a name (shown by ``viz.draw_graph``); returns self."""
        self.name = name
        return self

    def retain_grad(self) -> "Tensor":
        """Keep ``.grad`` on this intermediate tensor after backward (leaves always keep it)."""
        self._retains_grad = True
        return self

    def register_hook(self, hook):
        """Call ``hook(grad)`` with this tensor's gradient during backward; it may return a
        replacement. Works on leaves and intermediates; returns a handle with ``.remove()``.
        PyTorch's semantics; see ``minigrad/hooks.py``."""
        return hooks.register_hook(self, hook)

    def zero_grad(self):
        self.grad = None

    def __repr__(self):
        body = np.array2string(self.data, precision=4, separator=", ", prefix="Tensor(",
                               threshold=50, edgeitems=3)
        extra = f", shape={self.shape}, dtype={self.dtype}"
        if self.grad_fn is not None:
            extra += f", grad_fn={self.grad_fn.name}"
        elif self.requires_grad:
            extra += ", requires_grad=True"
        if self.name:
            extra += f", name={self.name!r}"
        return f"Tensor({body}{extra})"

    def __setitem__(self, index, value):
        raise TypeError(
            "in-place assignment into a Tensor is not supported (it would corrupt the graph); "
            "build a new tensor instead, e.g. with where()/masked_fill() or concatenate()")

    # ---------------------------------------------------------------- backward
    def backward(self, gradient=None, retain_graph=None, create_graph=False, *, grad=None):
        """Accumulate d(self)/d(leaf) into every leaf's ``.grad`` (PyTorch's signature).

        ``gradient`` (also accepted as ``grad=``) is the gradient flowing into this
        tensor; it defaults to 1 for a one-element tensor. After the pass the graph's
        saved arrays are freed (like PyTorch's ``retain_graph=False``); pass
        ``retain_graph=True`` to call backward through the same graph again.
        ``create_graph=True`` records the backward pass itself, so ``.grad`` is a
        Tensor in a graph that can be differentiated again (``retain_graph`` then
        defaults to True, as in PyTorch). The loop itself is
        ``minigrad.autograd_steps`` (a generator yielding each op's step).
        """
        if grad is not None:
            if gradient is not None:
                raise TypeError("backward(): pass the incoming gradient once, as gradient= (or its old name grad=)")
            gradient = grad
        retain = create_graph if retain_graph is None else retain_graph
        autograd.backward(self, gradient, retain, create_graph)

    # ------------------------------------------------------------ arithmetic
    def __add__(self, other):
        return ops.Add.apply(self, _like(other, self))

    def __radd__(self, other):
        return ops.Add.apply(_like(other, self), self)

    def __sub__(self, other):
        return ops.Sub.apply(self, _like(other, self))

    def __rsub__(self, other):
        return ops.Sub.apply(_like(other, self), self)

    def __mul__(self, other):
        return ops.Mul.apply(self, _like(other, self))

    def __rmul__(self, other):
        return ops.Mul.apply(_like(other, self), self)

    def __truediv__(self, other):
        return ops.Div.apply(self, _like(other, self))

    def __rtruediv__(self, other):
        return ops.Div.apply(_like(other, self), self)

    def __neg__(self):
        return ops.Neg.apply(self)

    def __pow__(self, exponent):
        return ops.Pow.apply(self, exponent=exponent)

    def __rpow__(self, base):
        """``2 ** x``: a constant base raised to this tensor."""
        return ops.scalar_base_pow(self, base)

    def __abs__(self):
        return ops.Abs.apply(self)

    def __matmul__(self, other):
        return ops.matmul(self, as_tensor(other))

    def __rmatmul__(self, other):
        return ops.matmul(as_tensor(other), self)

    # comparisons give plain boolean tensors (no gradient), handy for masks
    def __eq__(self, other):
        return Tensor(self.data == _data(other))

    def __ne__(self, other):
        return Tensor(self.data != _data(other))

    def __lt__(self, other):
        return Tensor(self.data < _data(other))

    def __le__(self, other):
        return Tensor(self.data <= _data(other))

    def __gt__(self, other):
        return Tensor(self.data > _data(other))

    def __ge__(self, other):
        return Tensor(self.data >= _data(other))

    __hash__ = object.__hash__

    # ------------------------------------------------------------ reductions
    # **numpy_args: np.sum(t) calls t.sum(axis=None, dtype=None, out=None)
    def sum(self, axis=None, keepdims=False, **numpy_args):
        refuse_numpy_arguments("sum", numpy_args)
        return ops.Sum.apply(self, axis=axis, keepdims=keepdims)

    def mean(self, axis=None, keepdims=False, **numpy_args):
        refuse_numpy_arguments("mean", numpy_args)
        return ops.Mean.apply(self, axis=axis, keepdims=keepdims)

    def max(self, axis=None, keepdims=False, **numpy_args):
        refuse_numpy_arguments("max", numpy_args)
        return ops.Max.apply(self, axis=axis, keepdims=keepdims)

    def min(self, axis=None, keepdims=False, **numpy_args):
        refuse_numpy_arguments("min", numpy_args)
        return ops.Min.apply(self, axis=axis, keepdims=keepdims)

    def any(self, axis=None, keepdims=False, **numpy_args):
        """Whether any entry is non-zero, as a bool tensor (no gradient, like PyTorch's any)."""
        refuse_numpy_arguments("any", numpy_args)
        axes = ops.normalize_axes(axis, self.ndim, "any")
        return Tensor(np.any(self.data, axis=axes, keepdims=keepdims))

    def all(self, axis=None, keepdims=False, **numpy_args):
        """Whether every entry is non-zero, as a bool tensor (no gradient, like PyTorch's all)."""
        refuse_numpy_arguments("all", numpy_args)
        axes = ops.normalize_axes(axis, self.ndim, "all")
        return Tensor(np.all(self.data, axis=axes, keepdims=keepdims))

    def argmax(self, axis=None, keepdims=False, **numpy_args):
        """Index of the largest entry as an int64 tensor (no gradient)."""
        refuse_numpy_arguments("argmax", numpy_args)
        return ops.argmax(self, axis=axis, keepdims=keepdims)

    # ---------------------------------------------------------- elementwise
    def exp(self):
        return ops.Exp.apply(self)

    def log(self):
        return ops.Log.apply(self)

    def sqrt(self):
        return ops.Sqrt.apply(self)

    def tanh(self):
        return ops.Tanh.apply(self)

    def sigmoid(self):
        return ops.Sigmoid.apply(self)

    def abs(self):
        return ops.Abs.apply(self)

    def sign(self):
        """-1, 0 or 1 (0 at NaN, as PyTorch); its derivative is 0 but it stays in the graph."""
        return ops.Sign.apply(self)

    def clamp(self, min=None, max=None):
        """Limit entries to [min, max]; the gradient passes where min <= x <= max (PyTorch's rule)."""
        return ops.Clamp.apply(self, low=min, high=max)

    clip = clamp

    def relu(self):
        return ops.ReLU.apply(self)

    def gelu(self):
        return ops.GELU.apply(self)

    def hardswish(self):
        return ops.Hardswish.apply(self)

    def log1p(self):
        return ops.Log1p.apply(self)

    def softmax(self, axis=-1):
        return ops.Softmax.apply(self, axis=axis)

    def log_softmax(self, axis=-1):
        return ops.LogSoftmax.apply(self, axis=axis)

    def masked_fill(self, mask, value):
        """Replace the entries where ``mask`` is True by ``value`` (PyTorch's convention)."""
        return ops.MaskedFill.apply(self, mask=_data(mask), value=value)

    # ----------------------------------------------------------------- shape
    def reshape(self, *shape):
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        return ops.Reshape.apply(self, shape=shape)

    def broadcast_to(self, shape):
        shape = tuple(shape)
        return self if self.shape == shape else ops.BroadcastTo.apply(self, shape=shape)

    def transpose(self, *axes):
        """Permute axes like ``np.transpose``; no arguments reverses them."""
        if len(axes) == 1 and isinstance(axes[0], (tuple, list)):
            axes = tuple(axes[0])
        return ops.Transpose.apply(self, axes=axes or None)

    permute = transpose

    def swapaxes(self, axis1, axis2):
        order = list(range(self.ndim))
        a1, a2 = ops.normalize_axis(axis1, self.ndim, "swapaxes"), ops.normalize_axis(axis2, self.ndim, "swapaxes")
        order[a1], order[a2] = order[a2], order[a1]
        return ops.Transpose.apply(self, axes=tuple(order))

    @property
    def T(self):
        return ops.Transpose.apply(self, axes=None)

    def __getitem__(self, index):
        return ops.GetItem.apply(self, index=index)

    # ----------------------------------------------------------------- dtype
    def astype(self, dtype):
        """A copy in ``dtype``. Between float dtypes the gradient flows (cast back); a cast to
        an integer or bool dtype cuts the graph, as in PyTorch: the result does not require
        grad, and neither does anything computed from it alone (``Function.apply`` records
        no op whose output is not floating-point)."""
        return ops.Cast.apply(self, dtype=np.dtype(dtype))

    float = lambda self: self.astype(np.float32)
    double = lambda self: self.astype(np.float64)


def _to_array(data, dtype):
    if dtype is not None:
        return np.array(data, dtype=dtype)
    from_numpy = isinstance(data, (np.ndarray, np.generic))
    array = np.array(data)
    if array.dtype.kind == "f":
        # Python floats become float32; numpy float64 data stays float64.
        if not from_numpy or array.dtype not in (np.float32, np.float64):
            array = array.astype(np.float32)
    elif array.dtype.kind == "i" and not from_numpy:
        array = array.astype(np.int64)        # Python ints -> int64 on every platform, as in PyTorch
    elif array.dtype.kind == "O":
        raise TypeError(f"cannot make a Tensor from {type(data).__name__} holding objects: {data!r:.80}")
    return array


def _data(x):
    return x.data if isinstance(x, Tensor) else x


tensor_type.register(Tensor)    # the modules below this one make their tensors with it
