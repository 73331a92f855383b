"""Where a traced op's inputs and options come from when they are no earlier output and no
parameter: what a pure replay (``pure_replay.py``) needs to rebuild them on a new call
without running the piece's Python.

A *feed* is one of:

    ("arg", k, offset, shape, strides, convert)  a view of the call's k-th array argument (the
                                        argument itself, ``tgt[:, 1:]``, a Tensor made of it);
                                        ``convert``: made into a Tensor (dtype rules as Tensor's)
    ("line", i)                         the array of tape line i's output (a mask an op computed)
    ("generator",)                      the random generator of ``minigrad.rng`` (dropout)
    ("fresh_list",)                     an empty list an op appends a side output to
    ("tuple", feeds)                    a tuple of feeds (an index such as ``x[rows, at]``)
    ("tensor", tensor)                  a tensor that needs no gradient (a stored buffer): read live
    ("const", value)                    anything else: a number, a stored array, an object

``same_feed`` says whether two calls fed an input alike. A constant is trusted only if the
second call's is the very same object or memory (a stored buffer, a cached mask) or an equal
number, never an array built anew, which may have been computed from the data: that is
how ``trace.py`` finds the arrays a model builds in numpy from the batch.
"""
import numpy as np

from . import rng


class FeedFinder:
    """Classifies the values one call hands to ops, given its array arguments, the tensors it
    made from them (``made``) and the op outputs so far (``output``)."""

    def __init__(self, arguments):
        self.arguments = [(k, a) for k, a in enumerate(arguments) if isinstance(a, np.ndarray) and a.size]
        self.line_of_array = {}     # id(output array) -> line index; the tape keeps the arrays alive
        self.made_from = {}         # id(tensor) -> the argument view it was made of, during the call
        self.kept = []              # those tensors, alive while their ids are keys

    def output(self, array, index):
        self.line_of_array[id(array)] = index

    def made(self, tensor, data):
        """``Tensor(data)`` ran in the piece: if ``data`` is (a view of) an argument, so is the tensor."""
        if isinstance(data, np.ndarray) and self._argument_view(data) is not None:
            self.made_from[id(tensor)] = data
            self.kept.append(tensor)

    def feed(self, value):
        from .tensor import Tensor
        if isinstance(value, Tensor):
            source = self.made_from.get(id(value))
            if source is not None:
                return self._argument_view(source) + (True,)
            line = self.line_of_array.get(id(value.data))
            if line is not None:
                return ("line", line)
            view = self._argument_view(value.data)
            return view + (False,) if view is not None else ("tensor", value)
        if isinstance(value, np.ndarray):
            line = self.line_of_array.get(id(value))
            if line is not None:
                return ("line", line)
            view = self._argument_view(value)
            return view + (False,) if view is not None else ("const", value)
        if isinstance(value, tuple):
            return ("tuple", tuple(self.feed(v) for v in value))
        if isinstance(value, np.random.Generator) and value is rng.generator():
            return ("generator",)
        if type(value) is list and not value:
            return ("fresh_list",)
        return ("const", value)

    def _argument_view(self, array):
        for k, argument in self.arguments:
            view = _view_of(array, argument)
            if view is not None:
                return ("arg", k) + view
        return None


def _view_of(array, argument):
    """(offset in items, shape, strides) if ``array`` lies inside ``argument``'s memory with its
    dtype, else None. Memory addresses, not ``.base``: a slice of a slice still counts."""
    if array.dtype != argument.dtype or not argument.flags.c_contiguous:
        return None
    start, end = _extent(array)
    base = argument.__array_interface__["data"][0]
    if start < base or end > base + argument.nbytes or (start - base) % argument.itemsize:
        return None
    return ((start - base) // argument.itemsize, array.shape, array.strides)


def _extent(array):
    start = array.__array_interface__["data"][0]
    low = high = start
    for n, stride in zip(array.shape, array.strides):
        if n == 0:
            return start, start
        if stride < 0:
            low += (n - 1) * stride
        else:
            high += (n - 1) * stride
    return low, high + array.itemsize


def argument_view(argument, offset, shape, strides):
    """The recorded view, taken of today's argument (same dtype, shape and strides: the tape key)."""
    flat = argument.reshape(-1)[offset:]
    return np.lib.stride_tricks.as_strided(flat, shape, strides, writeable=False)


def same_feed(recorded, today):
    """Whether two calls fed an input alike, so that a replay may reuse the recorded feed."""
    kind = recorded[0]
    if kind != today[0]:
        return False
    if kind == "tuple":
        return len(recorded[1]) == len(today[1]) and all(map(same_feed, recorded[1], today[1]))
    if kind not in ("const", "tensor"):
        return recorded == today
    old, new = recorded[1], today[1]
    if kind == "tensor":
        if old is new:
            return True
        old, new = old.data, new.data     # a number made a tensor anew (x * math.sqrt(d)): by value
        return old.ndim == 0 == new.ndim and old.dtype == new.dtype and old.tobytes() == new.tobytes()
    if isinstance(old, np.ndarray) or isinstance(new, np.ndarray):
        return isinstance(old, np.ndarray) and isinstance(new, np.ndarray) and _same_memory(old, new)
    if type(old) is not type(new):
        return False
    if isinstance(old, (int, float, complex, str, bytes, bool, type(None), np.generic, slice)):
        return old == new or (old != old and new != new)      # NaN equals NaN here: the same constant
    return old is new


def _same_memory(old, new):
    """The same stored array (or the same view of it) on both calls: its contents are read live."""
    return (old is new) or (old.__array_interface__["data"][0] == new.__array_interface__["data"][0]
                            and old.shape == new.shape and old.strides == new.strides and old.dtype == new.dtype)
