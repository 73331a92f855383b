"""The base class of every differentiable op, and the one place gradients are
reduced back to an input's shape.

An op is a small class with ``forward`` and ``backward`` side by side:

    class Mul(Function):
        def forward(self, a, b):          # numpy arrays in, numpy array out
            self.a, self.b = a, b          # save what backward needs
            return a * b

        def backward(self, grad):          # one gradient per input
            return grad * self.b, grad * self.a

``Mul.apply(x, y)`` runs ``forward`` on the tensors' arrays and, when a graph is
being recorded, remembers the inputs so ``Tensor.backward`` can call
``backward`` later. Broadcasting is undone centrally (``unbroadcast``), so no op
has to sum its gradient back to its input's shape itself.

Beyond first order (``backward(create_graph=True)``, ``minigrad.forward_ad``,
``minigrad.func``) an op says how in one of two ways, next to its forward:

- ``differentiable_backward = True``: its ``backward`` (and its tangent rule
  ``jvp``) are written only with what numpy arrays and Tensors share (operators,
  ``.sum``, ``.reshape``, ``minigrad.ops.xp``). The ordinary pass calls them with
  arrays, as fast as ever; ``create_graph=True`` calls the very same lines with
  Tensors (``with_saved_tensors`` swaps the arrays forward saved for the input and
  output Tensors they are), so the gradient is a recorded graph, differentiable
  again. One rule, two uses: no second copy of any backward. An op with a kernel
  calls its ``@accelerated`` function through ``xp.call``: the kernel on arrays,
  the function's numpy lines on Tensors.
- ``composition``: a fused op (one kernel, intermediates of its own) gives the
  composition of named ops it equals, ``composition(*input_tensors, **options)``;
  double backward and tangents differentiate through that composition.

An op with neither raises a clear error under ``create_graph=True`` or inside a
``forward_ad.dual_level()`` instead of giving a silently wrong answer.
"""
import numpy as np

from . import forward_ad, inplace, observers
from .forward_ad import state as forward_state    # this thread's forward-AD levels: forward_state.active
from .grad_mode import state as grad_state    # this thread's grad mode: grad_state.enabled
from .observers import watching     # this thread's observers (profiler, anomaly, scopes): watching.observers


class Function:
    """One node of the graph: the op that produced a tensor.

    Attributes set by ``apply``:
      inputs            the input Tensors, in argument order
      needs_input_grad  one bool per input; backward may return None where False
      recorded_at       the in-place clock when the op ran (backward compares inputs' changes)
      created_at        "file:line" of the user's code, only under ``detect_anomaly()``
    """

    released = False
    returns_view = False   # True for ops whose output may be a view of input 0 (see inplace.share_version)
    scope = None        # dotted name of the module that ran this op (see nn.record_scopes)

    @property
    def name(self) -> str:
        return type(self).__name__

    @classmethod
    def apply(cls, *inputs, **options):
        # Runs ~60 times per training step of the date model: plain loops, no helper calls.
        tensors = tuple([x if isinstance(x, _tensor.Tensor) else _tensor.Tensor(x) for x in inputs])
        fn = cls()
        fn.needs_input_grad = needs = tuple([t.requires_grad for t in tensors])
        watchers = watching.observers       # () unless profiling, detect_anomaly or record_scopes
        if not watchers:
            out = fn.forward(*[t.data for t in tensors], **options)
        else:
            out = observers.call(fn, "forward", fn.forward, *[t.data for t in tensors], **options)
        if type(out) is not np.ndarray:
            out = np.asarray(out)       # a numpy scalar (e.g. a full sum) becomes a 0-d array
        # an integer or bool result cuts the graph (PyTorch: it cannot require grad)
        if not (grad_state.enabled and True in needs) or out.dtype.kind != "f":
            result = _tensor.Tensor._from_op(out, None)
        else:
            fn.inputs = tensors
            fn.options = options     # for composition (double backward of a fused op)
            fn.recorded_at = inplace.clock
            for watcher in watchers:
                watcher.recorded(fn)
            result = _tensor.Tensor._from_op(out, fn)
        if cls.returns_view:
            inplace.share_version(tensors[0], result)
        if forward_state.active:     # this thread's open forward-AD levels: one attribute read when off
            forward_ad.propagate(fn, tensors, result, options)
        return result

    def forward(self, *arrays, **options):
        raise NotImplementedError(f"{self.name} has no forward")

    def backward(self, grad):
        raise NotImplementedError(f"{self.name} has no backward")

    # ------------------------------------------------------- beyond first order
    differentiable_backward = False   # backward/jvp use only what arrays and Tensors share
    composition = None                # or: the named ops a fused op equals, on Tensors
    saved_constants = ()              # names of saved float arrays that do not depend on the inputs

    def compose(self, inputs, options):
        """``composition`` on ``inputs`` (Tensors) with the options forward had: what double
        backward and tangents of a fused op differentiate."""
        return self.composition(*inputs, **options)

    def jvp(self, *tangents):
        """The tangent of the output given one tangent per input (forward mode)."""
        raise RuntimeError(f"{self.name} has no tangent rule yet: forward-mode AD (forward_ad, "
                           "minigrad.func.jvp/jacfwd) cannot go through it; use reverse mode (jacrev)")

    def release(self):
        """Drop saved arrays and inputs once backward has used them (frees memory)."""
        self.__dict__.clear()
        self.released = True

    def __repr__(self):
        return f"<{self.name}>"


def with_saved_tensors(fn, inputs, output):
    """A copy of ``fn`` whose saved arrays are the Tensors they belong to.

    Forward saved numpy arrays (``self.a = a``, ``self.out = ...``); run with
    Tensors, backward and jvp need the same values as Tensors so that what they
    compute is recorded and differentiable. Each saved float array that *is* an
    input's array becomes that input Tensor, the output's array the output
    Tensor; names in ``saved_constants`` stay arrays (they do not depend on the
    inputs). Any other saved float array was derived inside forward: using it as
    a constant would give a silently wrong derivative, so that raises.
    """
    view = object.__new__(type(fn))
    view.__dict__.update(fn.__dict__)
    by_array, shared = {}, set()
    for t in (*inputs, output):
        if by_array.setdefault(id(t.data), t) is not t:
            shared.add(id(t.data))      # two tensors on one array (x and x.detach()): which was saved?
    for name, value in fn.__dict__.items():
        if not isinstance(value, (np.ndarray, np.generic)) or value.dtype.kind != "f" or name in fn.saved_constants:
            continue
        if id(value) in shared:
            raise RuntimeError(f"{fn.name}: two of its tensors share one array (e.g. x and x.detach()), so it "
                               "cannot tell which one its saved values belong to; differentiate twice through "
                               "a copy instead, e.g. Tensor(x.detach().numpy().copy())")
        tensor = by_array.get(id(value))
        if tensor is None and isinstance(value, np.generic) and output.ndim == 0 and value == output.data:
            tensor = output      # a 0-d result is a numpy scalar until apply makes it an array
        if tensor is None:
            raise RuntimeError(f"{fn.name} has no double-backward / tangent rule yet: its backward uses "
                               f"{name!r}, an array computed inside forward (give the op a composition)")
        setattr(view, name, tensor)
    return view


def unbroadcast(grad: np.ndarray, shape: tuple) -> np.ndarray:
    """Sum ``grad`` down to ``shape``, undoing numpy broadcasting.

    Broadcasting prepends axes and stretches size-1 axes; the gradient of a
    broadcast input is the sum over every copy it was stretched into. Works on
    Tensors too (``.sum`` is shared), for ``create_graph=True``.
    """
    extra = grad.ndim - len(shape)
    if extra > 0:
        grad = grad.sum(axis=tuple(range(extra)))
    stretched = tuple(i for i, n in enumerate(shape) if n == 1 and grad.shape[i] != 1)
    if stretched:
        grad = grad.sum(axis=stretched, keepdims=True)
    return grad


from . import tensor as _tensor  # noqa: E402  (tensor.py imports this module: bind it after Function exists)
