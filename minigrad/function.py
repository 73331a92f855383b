"""The base class of every differentiable op, and the one place gradients are
reduced back to an input's shape.

An op is a small class with ``forward`` and ``backward`` side by side:

    class Mul(Function):
        def forward(self, a, b):           # numpy arrays in, numpy array out
            return a * b

        def backward(self, grad, *, a, b): # one gradient per input
            return grad * b, grad * a

The one convention: a rule's keyword-only parameters name what it reads, and the
engine passes exactly those. A name is one of ``forward``'s inputs (``a``, ``b``)
or ``out``, the op's output. ``Exp.backward(self, grad, *, out)`` reads the
output, ``Add.backward(self, grad)`` reads nothing (so ``Add`` keeps nothing alive
for backward, and an in-place change of its inputs is fine). What is not a value
of the graph (an axis, a boolean mask, the input's shape) forward keeps on
``self``.

``Mul.apply(x, y)`` runs ``forward`` on the tensors' arrays and, when a graph is
being recorded, remembers the inputs and the arrays the rule reads, so the
backward pass can call ``backward(grad, a=..., b=...)`` later. Broadcasting is
undone centrally (``unbroadcast``), so no op sums its gradient back to an
input's shape itself.

Beyond first order (``backward(create_graph=True)``, ``minigrad.forward_ad``,
``minigrad.func``) an op says how in one of two ways, next to its forward:

- ``differentiable_backward = True``: its ``backward`` and its tangent rule
  ``jvp(self, *tangents, <what it reads>)`` are written only with what numpy
  arrays and Tensors share (operators, ``.sum``, ``.reshape``, ``minigrad.ops.xp``).
  The ordinary pass calls them with arrays, as fast as ever; ``create_graph=True``
  and forward mode call the very same lines with the input and output Tensors,
  so what they compute is itself a recorded graph, differentiable again. One
  rule, two uses. An op with a kernel calls its ``@accelerated`` function through
  ``xp.call``: the kernel on arrays, the function's numpy lines on Tensors.
  A tangent is None for an input that has none (a constant): the rule leaves
  its term out (``tangent_sum``) rather than multiply zeros by a partial
  derivative that may be inf, as PyTorch does. A float array kept on ``self``
  would be a constant beyond first order, so there it raises instead of giving a
  silently wrong derivative: values computed from the inputs reach a rule as
  arguments; constants are inputs without grad, or non-float.
- ``composition``: a fused op (one kernel, intermediates of its own) gives the
  composition of named ops it equals, ``composition(*input_tensors, **options)``;
  double backward and tangents differentiate through that composition.

An op with neither raises a clear error under ``create_graph=True`` or inside a
``forward_ad.dual_level()`` instead of giving a silently wrong answer.
"""
import inspect

import numpy as np

from . import forward_ad, inplace, observers, tensor_type    # tensor_type: the Tensor class, registered by tensor.py
from .forward_ad import state as forward_state    # this thread's forward-AD levels: forward_state.active
from .grad_mode import state as grad_state    # this thread's grad mode: grad_state.enabled
from .observers import watching     # this thread's observers (profiler, anomaly, scopes): watching.observers
from .tape_state import state as tape_state    # minigrad.trace recording or replaying: tape_state.tape

OUT = "out"     # the name by which a rule reads the op's output
_NOTHING = {}   # the saved values of an op whose backward reads none (shared, never written)


class Function:
    """One node of the graph: the op that produced a tensor.

    Attributes set by ``apply``:
      inputs            the input Tensors, in argument order
      needs_input_grad  one bool per input; backward may return None where False
      saved             {name: array} of what ``backward`` reads, as forward saw it
      recorded_at       the in-place clock when the op ran (backward compares inputs' changes)
      created_at        "file:line" of the user's code, only under ``detect_anomaly()``
    Class attributes set at the class's definition, from the rules' signatures:
      backward_reads, jvp_reads   ((name, input index or None for the output), ...)
    """

    released = False
    returns_view = False   # True for ops whose output may be a view of input 0 (see inplace.share_version)
    scope = None        # dotted name of the module that ran this op (see nn.record_scopes)
    backward_reads = jvp_reads = ()

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        cls.backward_reads = _reads(cls, cls.backward)
        cls.jvp_reads = _reads(cls, cls.jvp)

    @property
    def name(self) -> str:
        return type(self).__name__

    @classmethod
    def apply(cls, *inputs, **options):
        # Runs ~60 times per training step of the date model: plain loops, no helper calls.
        if tape_state.tape is not None:     # inside a traced call (minigrad/trace.py): the tape runs the op
            return tape_state.tape.apply(cls, inputs, options)
        tensors = tuple([x if isinstance(x, tensor_type.Tensor) else tensor_type.Tensor(x) for x in inputs])
        arrays = [t.data for t in tensors]
        fn = cls()
        fn.needs_input_grad = needs = tuple([t.requires_grad for t in tensors])
        watchers = watching.observers       # () unless profiling, detect_anomaly or record_scopes
        if not watchers:
            out = fn.forward(*arrays, **options)
        else:
            out = observers.call(fn, "forward", fn.forward, *arrays, **options)
        if type(out) is not np.ndarray:
            out = np.asarray(out)       # a numpy scalar (e.g. a full sum) becomes a 0-d array
        # an integer or bool result cuts the graph (PyTorch: it cannot require grad)
        if not (grad_state.enabled and True in needs) or out.dtype.kind != "f":
            result = tensor_type.Tensor._from_op(out, None)
        else:
            fn.inputs = tensors
            fn.options = options     # for composition (double backward of a fused op)
            fn.saved = {name: out if i is None else arrays[i] for name, i in cls.backward_reads} \
                if cls.backward_reads else _NOTHING
            fn.recorded_at = inplace.clock
            for watcher in watchers:
                watcher.recorded(fn)
            result = tensor_type.Tensor._from_op(out, fn)
        if cls.returns_view:
            inplace.share_version(tensors[0], result)
        if forward_state.active:     # this thread's open forward-AD levels: one attribute read when off
            propagate_tangents(fn, tensors, result, options)
        return result

    def forward(self, *arrays, **options):
        raise NotImplementedError(f"{self.name} has no forward")

    def backward(self, grad):
        raise NotImplementedError(f"{self.name} has no backward")

    # ------------------------------------------------------- beyond first order
    differentiable_backward = False   # backward/jvp use only what arrays and Tensors share
    composition = None                # or: the named ops a fused op equals, on Tensors

    def compose(self, inputs, options):
        """``composition`` on ``inputs`` (Tensors) with the options forward had: what double
        backward and tangents of a fused op differentiate."""
        return self.composition(*inputs, **options)

    def jvp(self, *tangents):
        """The tangent of the output given one tangent per input (None for a constant; forward mode)."""
        raise RuntimeError(f"{self.name} has no tangent rule yet: forward-mode AD (forward_ad, "
                           "minigrad.func.jvp/jacfwd) cannot go through it; use reverse mode (jacrev)")

    def release(self):
        """Drop what backward used (saved arrays, inputs) once it ran: frees memory. Kept: what lies
        below (the inputs' ops, or the leaf tensors), so that a later ``grad()`` can still tell
        whether this freed op stands between its outputs and inputs."""
        below = [t if t.grad_fn is None else t.grad_fn for t in self.inputs if t.requires_grad]
        self.__dict__.clear()
        self.released, self.below = True, below

    def __repr__(self):
        return f"<{self.name}>"


def _reads(cls, rule):
    """What ``rule`` reads: its keyword-only parameters, each forward's input of that name or the output."""
    parameters = inspect.signature(rule).parameters.values()
    names = [p.name for p in parameters if p.kind is p.KEYWORD_ONLY]
    if not names:
        return ()
    inputs = [p.name for p in inspect.signature(cls.forward).parameters.values()
              if p.kind is p.POSITIONAL_OR_KEYWORD][1:]      # after self
    if OUT in inputs:
        raise TypeError(f"{cls.__name__}.forward has an input named {OUT!r}, the name by which a rule reads "
                        "the op's own output; rename the input")
    for name in names:
        if name != OUT and name not in inputs:
            raise TypeError(f"{cls.__name__}.{rule.__name__} reads {name!r}: a rule's keyword-only parameters "
                            f"name forward's inputs ({', '.join(inputs)}) or {OUT!r}")
    return tuple((name, None if name == OUT else inputs.index(name)) for name in names)


def read_tensors(fn, reads, inputs, output):
    """The Tensors a rule reads, for a pass beyond first order (``create_graph=True``, forward mode),
    checked: an input whose array was replaced since forward (``x.data = ...``) raises, and so does
    a float array kept on the op (it would silently count as a constant)."""
    for name, value in vars(fn).items():
        if isinstance(value, np.ndarray) and value.dtype.kind == "f":
            raise RuntimeError(f"{fn.name} has no double-backward / tangent rule yet: its rules read {name!r}, "
                               "a float array forward kept on the op, which would count as a constant here; "
                               "pass values computed from the inputs as arguments (see function.py) or give "
                               "the op a composition")
    saved = getattr(fn, "saved", {})
    tensors = {}
    for name, i in reads:
        tensor = output if i is None else inputs[i]
        if name in saved and tensor.data is not saved[name]:
            what = "its output" if i is None else f"its input {i}"
            raise RuntimeError(f"backward through {fn.name}: {what} (shape {tensor.shape}) had its .data replaced "
                               f"after {fn.name} saved it, so a derivative through it would use the new values; "
                               "replace .data after backward(), or build a new tensor instead")
        tensors[name] = tensor
    return tensors


def propagate_tangents(fn, inputs, output, options):
    """Give ``output`` (of op ``fn`` on ``inputs``) its tangent at every level an input has one.

    Levels go outermost first, each computed with only the levels before it
    switched on (see forward_ad's docstring). An input without a tangent at a level
    (a constant) passes None: the rule leaves its term out. With no outer level and
    nothing that needs a reverse graph, the rule runs on the numpy arrays, the same
    code as with Tensors, only faster.
    """
    levels = [lv for lv in forward_state.active if any(forward_ad.tangent_of(t, lv) is not None for t in inputs)]
    if not levels or output.dtype.kind != "f":
        return      # integer and boolean results (a cast to int, argmax-like ops) carry no tangent
    if type(fn).jvp is Function.jvp and fn.composition is not None:
        # A fused op: its composition's named ops carry every level's tangent.
        twin = fn.compose(inputs, options)
        output._tangents = dict(getattr(twin, "_tangents", None) or {}) or None
        return
    all_levels, tangents_out = forward_state.active, dict(getattr(output, "_tangents", None) or {})
    try:
        for level in levels:
            forward_state.active = tuple(lv for lv in all_levels if lv < level)
            tangents = [forward_ad.tangent_of(t, level) for t in inputs]
            needs_graph = grad_state.enabled and any(
                x is not None and x.requires_grad for x in (*inputs, *tangents))
            if forward_state.active or needs_graph:
                tangent = fn.jvp(*tangents, **read_tensors(fn, fn.jvp_reads, inputs, output))
            else:
                reads = {name: (output if i is None else inputs[i]).data for name, i in fn.jvp_reads}
                arrays = [None if d is None else d.data for d in tangents]
                tangent = tensor_type.constant(np.asarray(fn.jvp(*arrays, **reads)))
            if tangent.shape != output.shape:
                tangent = tangent.broadcast_to(output.shape)
            if tangent.dtype != output.dtype:
                tangent = tangent.astype(output.dtype)
            tangents_out[level] = tangent
            output._tangents = tangents_out      # an inner level's rule may read the output's outer tangents
    finally:
        forward_state.active = all_levels


def tangent_sum(*terms):
    """The sum of a tangent rule's terms that exist. An input without a tangent (a constant) has
    no term: it is left out, not computed as zeros times a partial derivative (0 * inf is NaN),
    as PyTorch does. At least one term exists (else the rule is not called)."""
    present = [t for t in terms if t is not None]
    total = present[0]
    for term in present[1:]:
        total = total + term
    return total


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

