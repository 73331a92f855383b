"""The backward pass, written once, as a generator.

``Tensor.backward()`` simply exhausts ``autograd_steps``; anything that wants
to watch the pass (``viz`` animating it, a debugger, a test) iterates the same
generator and so sees exactly the engine's order, hooks and checks:

    for step in autograd_steps(loss, retain_graph=True):
        print(step.fn.name, step.grad.shape, [g is None for g in step.input_grads])

The order is reverse topological (every consumer of a tensor runs before the
tensor's own op), built iteratively so that a chain of 100,000 ops does not hit
Python's recursion limit.
"""
import contextlib
from typing import TYPE_CHECKING, NamedTuple, Optional, Tuple

import numpy as np

from . import flat, forward_ad, grad_mode, hooks, inplace, observers, tensor_type
from .function import Function, read_tensors, unbroadcast
from .tape_state import state as tape_state

if TYPE_CHECKING:
    from .tensor import Tensor


class BackwardStep(NamedTuple):
    """One op processed by the backward pass.

    tensor       the op's output tensor
    fn           its ``grad_fn`` (still holding its saved arrays while the step is looked at)
    grad         the gradient flowing into ``tensor`` (after the tensor's hooks ran)
    input_grads  one entry per ``fn.inputs``: that input's gradient from this op,
                 already summed back to the input's shape; None where there is none
    """
    tensor: "Tensor"
    fn: Function
    grad: np.ndarray
    input_grads: Tuple[Optional[np.ndarray], ...]


def autograd_steps(root, grad=None, retain_graph=False, create_graph=False):
    """Run backward from ``root``, yielding a ``BackwardStep`` per op, in order.

    Exactly what ``root.backward(grad, retain_graph, create_graph)`` does: leaves
    (and tensors that called ``retain_grad()``) accumulate ``.grad``; hooks
    registered with ``register_hook`` run on each tensor's gradient before it
    is used; under ``detect_anomaly()`` the first NaN or inf raises. Unless
    ``retain_graph``, each op's saved arrays are freed once its step has been
    yielded (so look at ``step.fn`` during the step, not after the loop).
    Stopping the iteration early stops the pass: later ops give no gradients.

    With ``create_graph`` the gradients are Tensors and every op's backward is
    recorded as ops of its own (see ``function.py``), so they can be
    differentiated again; the steps then hold Tensors instead of arrays.
    """
    yield from _steps((root,), (grad,), _Pass(retain_graph, create_graph))


def backward(root, grad=None, retain_graph=False, create_graph=False):
    """Exhaust ``autograd_steps`` (this is ``Tensor.backward``); under ``profile()`` the engine's
    own time (summing and un-broadcasting gradients) gets a row."""
    _exhaust((root,), (grad,), _Pass(retain_graph, create_graph))


def _exhaust(roots, grads, run):
    if tape_state.tape is not None:     # inside a traced call (minigrad/trace.py): the tape runs the pass
        return tape_state.tape.backward(roots, grads, run)
    if run.watchers:    # under profile(), the engine's own time gets a row
        return observers.call("autograd engine", "backward", _exhaust_quietly, roots, grads, run)
    _exhaust_quietly(roots, grads, run)


def _exhaust_quietly(roots, grads, run):
    for _ in _steps(roots, grads, run):
        pass


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False, allow_unused=False):
    """The gradients of ``outputs`` with respect to ``inputs``, as a tuple of Tensors.

    PyTorch's ``torch.autograd.grad``: nothing is added to any ``.grad``; only the
    part of the graph between the outputs and the inputs runs (hooks included).
    ``grad_outputs`` are the gradients flowing into the outputs (default 1 for
    one-element outputs). With ``create_graph=True`` the results are Tensors in a
    graph, differentiable again (Hessian-vector products, gradient penalties);
    ``retain_graph`` defaults to ``create_graph``. An input the outputs do not
    depend on raises unless ``allow_unused=True``, which gives None for it.
    """
    Tensor = tensor_type.Tensor       # the class tensor.py registered (it imports this module)
    outputs = (outputs,) if isinstance(outputs, Tensor) else tuple(outputs)
    inputs = (inputs,) if isinstance(inputs, Tensor) else tuple(inputs)
    if grad_outputs is None or isinstance(grad_outputs, (Tensor, np.ndarray)):
        grad_outputs = (grad_outputs,) * len(outputs) if grad_outputs is None else (grad_outputs,)
    grad_outputs = tuple(grad_outputs)
    if len(grad_outputs) != len(outputs):
        raise ValueError(f"grad(): {len(outputs)} output(s) but {len(grad_outputs)} grad_outputs; give one per output")
    for i, x in enumerate(inputs):
        if not isinstance(x, Tensor) or not x.requires_grad:
            raise RuntimeError(f"grad(): input {i} does not require grad, so it has no gradient "
                               "(create it with requires_grad=True)")
    run = _GradPass(inputs, create_graph if retain_graph is None else retain_graph, create_graph)
    _exhaust(outputs, grad_outputs, run)
    results = []
    for i, x in enumerate(inputs):
        g = run.captured[id(x)]
        if g is None:
            if not allow_unused:
                raise RuntimeError(f"grad(): input {i} (shape {x.shape}) was not used to compute the outputs; "
                                   "pass allow_unused=True to get None for it")
            results.append(None)
            continue
        if not isinstance(g, Tensor):
            g = Tensor._from_op(g.astype(x.dtype, copy=False), None)
        elif g.dtype != x.dtype:
            g = g.astype(x.dtype)
        results.append(g)
    return tuple(results)


def _steps(roots, grads, run):
    """The backward pass from ``roots``, whose incoming gradients are ``grads``, as ``run`` says."""
    pending = {}
    for root, g in zip(roots, grads):
        g = _initial_grad(root, g, run.tensor_mode)
        pending[id(root)] = g if id(root) not in pending else pending[id(root)] + g
    order = run.order(roots)
    with run.grad_mode():
        yield from _run(order, pending, run)


def _run(order, pending, run):
    """The backward loop. ``pending`` maps a tensor's id to the sum of the gradients its
    consumers sent it so far; ``run`` (a ``_Pass``) holds what a pass does besides the loop."""
    for tensor in order:                     # every consumer of a tensor comes before it
        g = pending.pop(id(tensor), None)    # its gradient, complete now; dropped from pending
        if g is None:
            continue                         # no gradient flows into it
        g = run.arrived(tensor, g)           # hooks; then .grad, or grad()'s result
        fn = tensor.grad_fn
        if fn is None or run.stops_at(tensor):
            continue                         # a leaf, or grad() needs nothing below it
        input_grads = run.backward(fn, tensor, g)
        input_grads = tuple(_summed_to(inp, ig) for inp, ig in zip(fn.inputs, input_grads))
        for inp, ig in zip(fn.inputs, input_grads):
            if ig is not None:
                pending[id(inp)] = ig if id(inp) not in pending else pending[id(inp)] + ig
        run.stepped(fn, g, input_grads)
        yield BackwardStep(tensor, fn, g, input_grads)
        if not run.retain_graph:
            fn.release()                     # free the saved arrays as we go


def _summed_to(inp, ig):
    """``ig`` summed back to ``inp``'s shape (the one place broadcasting is undone); None where
    there is no gradient or ``inp`` needs none."""
    if ig is None or not inp.requires_grad:
        return None
    return ig if ig.shape == inp.shape else unbroadcast(ig, inp.shape)


class _Pass:
    """What a ``backward()`` pass does besides the loop: where a gradient goes when it is
    complete, how an op's backward is called, who is told of each step.

    Gradients are arrays, or Tensors in ``tensor_mode`` (``create_graph``; ``grad()`` inside
    a forward-AD level, so that tangents flow through the pass). Observers (the profiler,
    ``detect_anomaly``) are read once, when the pass starts."""

    def __init__(self, retain_graph, create_graph, tensor_mode=None):
        self.retain_graph, self.create_graph = retain_graph, create_graph
        self.tensor_mode = create_graph if tensor_mode is None else tensor_mode
        self.watchers = observers.watching.observers     # () unless profiling or detect_anomaly

    def order(self, roots):
        return _reverse_topological_order(roots)

    def grad_mode(self):
        """Recorded (create_graph) or not (tangents only) where the gradients are Tensors."""
        if not self.tensor_mode:
            return contextlib.nullcontext()
        return grad_mode.enable_grad() if self.create_graph else grad_mode.no_grad()

    def arrived(self, tensor, g):
        """``tensor``'s complete gradient after its hooks; a leaf (or ``retain_grad()``) adds it to ``.grad``."""
        if tensor._hooks:
            g = hooks.run_hooks(tensor, g)
        if tensor.grad_fn is None or tensor._retains_grad:
            _accumulate(tensor, g, self.tensor_mode)
        return g

    def stops_at(self, tensor):
        return False

    def backward(self, fn, output, g):
        """``fn``'s input gradients (a tuple), after checking that nothing it saved was changed in place."""
        if inplace.clock != fn.recorded_at:     # something was changed in place after this op ran
            _check_saved_arrays_unchanged(fn, output)
        if self.tensor_mode:
            input_grads = _differentiable_backward(fn, output, g, self.watchers)
        elif self.watchers:
            input_grads = observers.call(fn, "backward", fn.backward, g, **fn.saved)
        else:
            input_grads = fn.backward(g, **fn.saved)
        return input_grads if isinstance(input_grads, tuple) else (input_grads,)

    def stepped(self, fn, g, input_grads):
        for watcher in self.watchers:
            watcher.stepped(fn, g, input_grads)


class _GradPass(_Pass):
    """``grad()``'s pass: the gradients of the tensors ``wanted`` go to ``captured`` (by id)
    instead of any ``.grad``, and only ops on a path to them run (as in PyTorch, a branch
    freed by an earlier pass is fine if nothing wanted lies below it).

    ``inside_op``: the pass differentiates a fused op's composition down to the op's own
    inputs, whose hooks run once, in the outer pass, not here as well."""

    def __init__(self, wanted, retain_graph, create_graph, inside_op=False):
        super().__init__(retain_graph, create_graph, create_graph or bool(forward_ad.state.active))
        self.wanted, self.inside_op, self.ends = wanted, inside_op, ()
        self.captured = {id(x): None for x in wanted}

    def order(self, roots):
        if self.inside_op:
            order = _reverse_topological_order(roots, stop=self.captured)
        else:
            order = _reverse_topological_order(roots, wanted=self.wanted)
        order, self.ends = _on_paths_to(order, self.captured)
        return order

    def arrived(self, tensor, g):
        if tensor._hooks and not (self.inside_op and id(tensor) in self.ends):
            g = hooks.run_hooks(tensor, g)
        if id(tensor) in self.captured:
            self.captured[id(tensor)] = g
        return g

    def stops_at(self, tensor):
        return id(tensor) in self.ends


def _accumulate(tensor, g, tensor_mode):
    if flat.receive_gradient(tensor, g):
        return          # a piece of a batch on its own thread: its own bucket (flat.gradients_into)
    if tensor_mode:     # .grad becomes a Tensor (in a graph under create_graph), as in PyTorch
        own = g if g.dtype == tensor.dtype else g.astype(tensor.dtype)
        tensor.grad = own if tensor.grad is None else own + tensor.grad
    else:
        # Copy: the same array may also flow to another input (e.g. a + b).
        g_own = g.astype(tensor.dtype, copy=True)
        tensor.grad = g_own if tensor.grad is None else tensor.grad + g_own


def _differentiable_backward(fn, output, g, watchers):
    """``fn``'s input gradients as Tensors built from recorded ops (see function.py)."""
    if fn.differentiable_backward:
        reads = read_tensors(fn, fn.backward_reads, fn.inputs, output)
        return observers.call(fn, "backward", fn.backward, g, **reads) if watchers else fn.backward(g, **reads)
    if fn.composition is not None:
        return _backward_through_composition(fn, g)
    raise RuntimeError(f"{fn.name} has no double-backward / tangent rule yet: backward(create_graph=True) "
                       "(and forward mode) cannot differentiate through it; its first-order backward works")


def _backward_through_composition(fn, g):
    """A fused op's input gradients, from the composition of named ops it equals.

    The composition is run again on the op's input Tensors and differentiated
    with ``create_graph``; the pass stops at those inputs, so only the
    composition's own ops run."""
    wanted = [inp for inp, need in zip(fn.inputs, fn.needs_input_grad) if need]
    run = _GradPass(wanted, retain_graph=True, create_graph=True, inside_op=True)
    with grad_mode.enable_grad():
        twin = fn.compose(fn.inputs, fn.options)
        for _ in _run(run.order((twin,)), {id(twin): g}, run):
            pass
    return tuple(run.captured.get(id(inp)) if need else None for inp, need in zip(fn.inputs, fn.needs_input_grad))


def _initial_grad(root, grad, tensor_mode=False):
    Tensor = tensor_type.Tensor       # the class tensor.py registered (it imports this module)
    if isinstance(root, Tensor) and not root.requires_grad and root.dtype.kind != "f":
        raise RuntimeError(f"backward() on a tensor of dtype {root.dtype}: an integer or bool result "
                           "does not require grad (as in PyTorch), so no gradient flows back through it")
    if not isinstance(root, Tensor) or not root.requires_grad:
        raise RuntimeError(
            "backward() on a tensor that does not require grad: no input of the "
            "computation had requires_grad=True (or it ran inside no_grad())")
    if grad is None:
        if root.data.size != 1:
            raise RuntimeError(
                f"backward() without a gradient needs a one-element tensor, got shape "
                f"{root.shape}; reduce it first (e.g. .sum() or .mean()) or pass grad=")
        ones = np.ones_like(root.data)
        return Tensor._from_op(ones, None) if tensor_mode else ones
    if tensor_mode and isinstance(grad, Tensor):     # kept as it is: it may require grad itself
        if grad.shape != root.shape:
            raise ValueError(f"backward(): grad has shape {grad.shape} but the tensor has shape {root.shape}")
        return grad if grad.dtype == root.dtype else grad.astype(root.dtype)
    grad = np.asarray(grad.data if isinstance(grad, Tensor) else grad, dtype=root.dtype)
    if grad.shape != root.shape:
        raise ValueError(f"backward(): grad has shape {grad.shape} but the tensor has shape {root.shape}")
    return Tensor._from_op(grad, None) if tensor_mode else grad


def _check_saved_arrays_unchanged(fn, output):
    """Raise if an input or the output this op saved for backward was modified in place since.

    A tensor whose last in-place change (``_version``, a tick of the in-place
    clock shared with its views and detached copies) is later than the op
    (``fn.recorded_at``) was changed after the op ran. That only matters if the
    op kept that tensor's array (or a view of it), as Mul keeps its inputs and
    Exp its output: then its gradient would use the new values. PyTorch raises
    the same way (with a version counter per tensor and its views).
    """
    named = [(f"input {i}", inp) for i, inp in enumerate(fn.inputs)] + [("output", output)]
    for what, t in named:
        if t._version is None or t._version[0] <= fn.recorded_at:
            continue
        saved = [*fn.saved.values(), *(v for v in vars(fn).values() if isinstance(v, np.ndarray))]
        if any(np.may_share_memory(v, t.data) for v in saved):
            raise RuntimeError(
                f"backward through {fn.name}: its {what} (shape {t.shape}) was modified in place "
                f"after {fn.name} saved it, so its gradient would "
                "use the new values; do the in-place update after backward(), or use x = x - y instead")


def _reverse_topological_order(roots, stop=(), wanted=None) -> list:
    """Every tensor that needs a gradient, outputs before inputs (iterative:
    a chain of 100,000 ops must not hit Python's recursion limit). The walk
    does not go below tensors whose id is in ``stop``. An op freed by an earlier
    backward raises, unless ``wanted`` (``grad()``'s inputs) is given and none of
    them lies below it."""
    order, visited, freed = [], set(), []
    stack = [(root, False) for root in reversed(roots)]
    while stack:
        tensor, children_done = stack.pop()
        if children_done:
            order.append(tensor)
            continue
        if id(tensor) in visited:
            continue
        visited.add(id(tensor))
        stack.append((tensor, True))
        fn = tensor.grad_fn
        if fn is None or (stop and id(tensor) in stop):
            continue
        if fn.released:
            freed.append(fn)
            continue
        for inp in fn.inputs:
            if inp.requires_grad and id(inp) not in visited:
                stack.append((inp, False))
    for fn in freed:
        if wanted is None or _lies_below(fn, wanted):
            raise RuntimeError(
                f"backward through the graph a second time: the buffers of {fn.name} were freed by "
                "the first backward(); call backward(retain_graph=True) the first time if you need two")
    order.reverse()
    return order


def _lies_below(fn, wanted):
    """Whether a tensor of ``wanted`` is an input of ``fn`` or of an op below it (freed ops included)."""
    leaves, ops = {id(t) for t in wanted}, {id(t.grad_fn) for t in wanted if t.grad_fn is not None}
    todo, seen = [fn], set()
    while todo:
        node = todo.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        below = node.below if node.released else [t if t.grad_fn is None else t.grad_fn
                                                  for t in node.inputs if t.requires_grad]
        for item in below:
            if id(item) in leaves or id(item) in ops:
                return True
            if isinstance(item, Function):
                todo.append(item)
    return False


def _on_paths_to(order, targets):
    """The tensors of ``order`` from which a tensor in ``targets`` (ids) can be
    reached, and the ids of the targets whose own op need not run (nothing
    below them is wanted)."""
    reaches, ends = set(), set()
    for tensor in reversed(order):      # inputs before outputs
        fn = tensor.grad_fn
        if fn is not None and not fn.released and any(id(i) in reaches for i in fn.inputs):
            reaches.add(id(tensor))
        elif id(tensor) in targets:
            reaches.add(id(tensor))
            ends.add(id(tensor))
    return [t for t in order if id(t) in reaches], ends
