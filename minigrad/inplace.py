"""In-place operators ``+= -= *= /=`` with PyTorch's rules.

- A leaf that requires grad (a weight), inside ``no_grad()``: its ``.data`` is
  updated in place and it stays the same leaf, so the textbook SGD step trains:

      with no_grad():
          w -= lr * w.grad

- The same outside ``no_grad()`` raises: recording the update would turn the
  weight into the output of an op and it would never get a ``.grad`` again.
- A tensor that is part of a graph being recorded (an intermediate, or a plain
  tensor updated with one that requires grad): ``x += y`` means ``x = x + y``,
  a new tensor, and earlier ops keep the old one. (PyTorch rewrites the
  tensor's history in place instead; here ops point to their input tensors,
  so doing that would silently change the gradient of every op that already
  used ``x``.)
- Any other case (no gradient involved, or inside ``no_grad()``): ``.data``
  changes in place, keeping its dtype (numpy's ``same_kind`` casting, so
  ``int_tensor /= 2`` is refused as in PyTorch). If backward then reaches an
  op that saved the tensor's array before the change, it raises instead of
  using the new values (PyTorch's "modified by an inplace operation").

What counts as "the tensor", as in PyTorch: the tensor, every view of it (an op
whose result is a numpy view of its input's memory: basic slicing, transpose,
a reshape that needs no copy) and ``detach()`` share one version, so ``+=``
through any of them is seen by backward. Not tracked, as in PyTorch: writes to
the array itself (``t.data``, ``t.numpy()``, ``np.asarray(t)``), which bypass
the tensor.

How the change is tracked: ``clock`` below ticks at every in-place change; the
tensor's ``_version`` is a one-element list holding the tick of its last change,
the same list object for a tensor, its views and its detached copies (created
on the first view, detach or change: a tensor that never has one costs nothing);
every recorded op remembers the clock when it ran (``recorded_at``: one integer,
whatever the number of inputs), and backward compares the two.
"""
import numpy as np

from . import forward_ad, grad_mode, tensor_type

clock = 0      # ticks at every in-place change


class InPlaceOps:
    __slots__ = ()

    def __iadd__(self, other):
        return _in_place(self, other, np.add, "+=")

    def __isub__(self, other):
        return _in_place(self, other, np.subtract, "-=")

    def __imul__(self, other):
        return _in_place(self, other, np.multiply, "*=")

    def __itruediv__(self, other):
        return _in_place(self, other, np.true_divide, "/=")


def _in_place(tensor, other, ufunc, symbol):
    if forward_ad.state.active and (getattr(tensor, "_tangents", None) or getattr(other, "_tangents", None)):
        return NotImplemented      # a dual tensor: x = x <op> y, so the tangent is updated too
    other_requires_grad = isinstance(other, tensor_type.Tensor) and other.requires_grad
    if grad_mode.is_grad_enabled() and (tensor.requires_grad or other_requires_grad):
        if tensor.requires_grad and tensor.grad_fn is None:
            raise RuntimeError(
                f"in-place {symbol} on a leaf tensor that requires grad would make it an op's output "
                "and stop it from training; update it inside `with minigrad.no_grad():` "
                f"(e.g. w {symbol} lr * w.grad) or change w.data")
        return NotImplemented      # Python then runs `tensor = tensor <op> other`: a new graph node
    value = other.data if isinstance(other, tensor_type.Tensor) else other
    try:
        ufunc(tensor.data, value, out=tensor.data, casting="same_kind")
    except TypeError:
        result = np.result_type(tensor.data, value)
        raise TypeError(f"in-place {symbol}: the result has dtype {result}, which a tensor of dtype "
                        f"{tensor.dtype} cannot hold; write x = x {symbol[0]} y for a new tensor") from None
    except ValueError:
        if not tensor.data.flags.writeable:
            raise ValueError(f"in-place {symbol}: this tensor's array is read-only (e.g. a broadcast "
                             f"view); write x = x {symbol[0]} y for a new tensor") from None
        raise ValueError(f"in-place {symbol}: a tensor of shape {tensor.shape} cannot be combined in place "
                         f"with shape {np.shape(value)}: the result must keep the tensor's shape; "
                         f"write x = x {symbol[0]} y for a new tensor") from None
    mark_changed([tensor])
    return tensor


def mark_changed(tensors):
    """Record that the arrays of ``tensors`` were just changed in place (by ``+=`` above, or by an
    optimizer's step, as PyTorch's ``p.add_()`` bumps the version), one tick for all."""
    global clock
    clock += 1
    for tensor in tensors:
        version_of(tensor)[0] = clock


def version_of(tensor) -> list:
    """The tensor's shared version cell ``[tick of the last in-place change]``, made on first use."""
    if tensor._version is None:
        tensor._version = [0]
    return tensor._version


def share_version(source, view):
    """Called by ``Function.apply`` for ops that may return a view: if ``view``'s array is (part
    of) ``source``'s memory, a change through either is a change of both (PyTorch's views)."""
    if np.may_share_memory(view.data, source.data):
        view._version = version_of(source)

