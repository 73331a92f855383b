"""Parameters as views of one flat array, and their gradients as views of another.

A model's parameters are separate arrays (68 for the date model): an optimizer step over
them is 68 small calls, each paying ~7 µs of Python and kernel-call overhead for a few
thousand numbers, and summing two sets of gradients is 200 more. ``FlatParameters`` copies
the values into one array and makes each parameter's ``.data`` a view of its part (what
PyTorch's FSDP does with its ``FlatParameter``), with one gradient array laid out alike
(DDP's ``gradient_as_bucket_view``): code that fills ``grads`` and calls ``set_grads()``
lets ``optim.Adam`` update every parameter in one call, with the same numbers.

Reading a parameter, or changing ``p.data`` in place, works as before. Assigning
``p.data = array`` (``load_state_dict``, ``Module.to``) takes that parameter out of the
flat array: the optimizer then updates the parameters one by one (the same numbers, more
calls) until ``gather()`` copies them back in. ``.grad`` views are overwritten by the next
``grads`` fill: copy one you want to keep.

``gradients_into(bucket)`` lets two ``loss.backward()`` run at once on two threads (two pieces
of a batch, ``transformer/parallel/``): while it is entered, backward on this thread puts each
parameter's gradient into its part of ``bucket`` instead of ``.grad`` (DDP's gradient buckets).
"""
import contextlib
import threading

import numpy as np


class _Buckets(threading.local):
    """Where this thread's backward() puts the parameters' gradients: None (their ``.grad``), or
    id(parameter) -> its view of a flat bucket, and the ids that received one so far."""
    views = None
    filled = None


_buckets = _Buckets()


def receive_gradient(tensor, gradient) -> bool:
    """Put ``tensor``'s gradient from backward() into its part of this thread's bucket, if a
    ``gradients_into`` is entered here and holds it; False otherwise (it goes to ``.grad``).
    The first gradient is copied in (cast to the bucket's dtype, as ``.grad``'s copy is); a
    second backward() adds to it, as to ``.grad``."""
    views = _buckets.views
    if views is None:
        return False
    view = views.get(id(tensor))
    if view is None:
        return False
    if not isinstance(gradient, np.ndarray):        # a Tensor: backward(create_graph=True)
        raise RuntimeError("backward(create_graph=True) inside gradients_into: a bucket holds numbers, "
                           "not a graph; differentiate outside it")
    if id(tensor) in _buckets.filled:
        view += gradient
    else:
        np.copyto(view, gradient, casting="same_kind")
        _buckets.filled.add(id(tensor))
    return True


class FlatParameters:
    """``params`` (Tensors of one float dtype) as views of ``values``, with ``grads`` alike."""

    def __init__(self, params):
        self.params = list(params)
        if not self.params:
            raise ValueError("FlatParameters got an empty parameter list")
        dtypes = sorted({str(p.dtype) for p in self.params})
        if len(dtypes) != 1 or self.params[0].dtype.kind != "f":
            raise ValueError(f"FlatParameters needs parameters of one float dtype, got {', '.join(dtypes)}; "
                             "convert the model first (e.g. model.to(np.float32))")
        self.dtype = self.params[0].dtype
        self.shapes = [p.shape for p in self.params]
        self.offsets = [0]
        for p in self.params:
            self.offsets.append(self.offsets[-1] + p.size)
        self.size = self.offsets[-1]
        self.values, self.grads = self.new_array(), self.new_array()
        self.value_views, self.grad_views = self.views(self.values), self.views(self.grads)
        self.gather()

    def __iter__(self):
        return iter(self.params)

    def __len__(self):
        return len(self.params)

    def new_array(self) -> np.ndarray:
        """A flat array of zeros laid out like the parameters (for moments, per-worker gradients)."""
        return np.zeros(self.size, self.dtype)

    def views(self, flat: np.ndarray) -> list:
        """Each parameter's part of ``flat``, shaped like the parameter."""
        return [flat[lo:hi].reshape(shape) for lo, hi, shape in zip(self.offsets, self.offsets[1:], self.shapes)]

    @contextlib.contextmanager
    def gradients_into(self, bucket: np.ndarray):
        """While entered, ``backward()`` on this thread writes each parameter's gradient into its
        part of ``bucket`` (a flat array from ``new_array``), never into ``.grad``: two threads
        can then each run a piece's ``loss.backward()`` into a bucket of its own. Yields a list
        filled on exit with one entry per parameter: True where a gradient arrived."""
        if _buckets.views is not None:
            raise RuntimeError("gradients_into: already entered on this thread; one bucket at a time")
        received = []
        _buckets.views = {id(p): view for p, view in zip(self.params, self.views(bucket))}
        _buckets.filled = set()
        try:
            yield received
        finally:
            received.extend(id(p) in _buckets.filled for p in self.params)
            _buckets.views = _buckets.filled = None

    def pack(self, arrays, flat: np.ndarray):
        """Copy ``arrays`` (one per parameter, its shape) into their parts of ``flat``."""
        for lo, hi, array in zip(self.offsets, self.offsets[1:], arrays):
            flat[lo:hi] = array.reshape(-1)

    def gather(self):
        """Copy into ``values`` every parameter whose ``.data`` is not its view, and make it the view again."""
        for i, (p, view) in enumerate(zip(self.params, self.value_views)):
            if p.data is not view:
                if p.shape != view.shape or p.dtype != self.dtype:
                    raise ValueError(f"FlatParameters: parameter {i} is now {p.dtype} of shape {p.shape}, "
                                     f"laid out as {self.dtype} of shape {view.shape}; make a new FlatParameters")
                view[...] = p.data
                p.data = view

    def relocate(self, values: np.ndarray):
        """Move the values into ``values`` (a flat array of ``size`` elements, e.g. in memory shared with
        another process) and make every parameter's ``.data`` its view there."""
        if values.shape != (self.size,) or values.dtype != self.dtype:
            raise ValueError(f"FlatParameters.relocate needs a flat {self.dtype} array of {self.size} elements, "
                             f"got {values.dtype} of shape {values.shape}")
        self.gather()
        values[...] = self.values
        self.values, self.value_views = values, self.views(values)
        for p, view in zip(self.params, self.value_views):
            p.data = view

    def set_grads(self):
        """Make each parameter's ``.grad`` its view of ``grads``."""
        for p, view in zip(self.params, self.grad_views):
            p.grad = view

    def values_in_place(self) -> bool:
        """Whether every parameter's ``.data`` is still its view of ``values``."""
        return all(p.data is view for p, view in zip(self.params, self.value_views))

    def intact(self) -> bool:
        """Whether every parameter's ``.data`` and ``.grad`` are still its views of ``values`` and
        ``grads`` (so one call over the flat arrays updates them all)."""
        return all(p.data is value and p.grad is grad
                   for p, value, grad in zip(self.params, self.value_views, self.grad_views))
