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
from typing import TYPE_CHECKING, NamedTuple, Optional, Tuple

import numpy as np

from . import forward_ad, grad_mode, hooks, inplace, observers
from .function import Function, read_tensors, unbroadcast

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
    yield from _steps((root,), (grad,), retain_graph, create_graph)


def backward(root, grad=None, retain_graph=False, create_graph=False):
    """Exhaust ``autograd_steps`` (this is ``Tensor.backward``); under ``profile()`` the engine's
    own time (summing and un-broadcasting gradients) gets a row."""
    if observers.watching.observers:
        return observers.call("autograd engine", "backward", _exhaust, root, grad, retain_graph, create_graph)
    _exhaust(root, grad, retain_graph, create_graph)


def _exhaust(root, grad, retain_graph, create_graph):
    for _ in _steps((root,), (grad,), retain_graph, create_graph):
        pass


def _capture(outputs, grad_outputs, retain_graph, create_graph, captured, inputs):
    for _ in _steps(outputs, grad_outputs, retain_graph, create_graph, captured, inputs):
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
    from .tensor import Tensor
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
    captured = {id(x): None for x in inputs}
    retain = create_graph if retain_graph is None else retain_graph
    if observers.watching.observers:   # under profile(), the engine's own time gets a row, as for backward()
        observers.call("autograd engine", "backward", _capture, outputs, grad_outputs, retain, create_graph,
                       captured, inputs)
    else:
        _capture(outputs, grad_outputs, retain, create_graph, captured, inputs)
    results = []
    for i, x in enumerate(inputs):
        g = captured[id(x)]
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


def _steps(roots, grads, retain_graph, create_graph, captured=None, wanted=()):
    """The backward pass from ``roots``. ``captured`` (``{id(tensor): None}`` for the
    tensors ``wanted``) is ``grad()``'s: the gradients of those tensors are stored there
    instead of in any ``.grad``, and only ops on a path to them run (as in PyTorch, a
    branch freed by an earlier pass is fine if nothing wanted lies below it).

    Inside a forward-AD level ``grad()``'s gradients are Tensors too (without a
    graph unless ``create_graph``), so tangents flow through the backward pass;
    a plain ``backward()`` leaves ``.grad`` an array there too (PyTorch's ``.grad``
    carries no tangent either), so an optimizer step works inside the level."""
    tensor_mode = create_graph or (captured is not None and bool(forward_ad.state.active))
    pending = {}
    for root, g in zip(roots, grads):
        g = _initial_grad(root, g, tensor_mode)
        previous = pending.get(id(root))
        pending[id(root)] = g if previous is None else previous + g
    order, ends = _reverse_topological_order(roots, wanted=wanted if captured is not None else None), ()
    if captured is not None:
        order, ends = _on_paths_to(order, captured)
    if tensor_mode:
        return _recording(create_graph, _run(order, pending, retain_graph, True, captured, ends))
    return _run(order, pending, retain_graph, False, captured, ends)


def _recording(create_graph, steps):
    """``steps`` run with grad mode on (the backward is recorded) or off (tangents only)."""
    with (grad_mode.enable_grad() if create_graph else grad_mode.no_grad()):
        yield from steps


def _run(order, pending, retain_graph, tensor_mode, captured=None, ends=(), hooks_at_ends=True):
    watchers = observers.watching.observers     # () unless profiling or detect_anomaly
    for tensor in order:
        g = pending.pop(id(tensor), None)
        if g is None:
            continue
        if tensor._hooks and (hooks_at_ends or id(tensor) not in ends):
            g = hooks.run_hooks(tensor, g)
        fn = tensor.grad_fn
        if captured is not None:
            if id(tensor) in captured:
                captured[id(tensor)] = g
        elif fn is None or tensor._retains_grad:
            _accumulate(tensor, g, tensor_mode)
        if fn is None or (ends and id(tensor) in ends):
            continue
        if inplace.clock != fn.recorded_at:     # something was changed in place after this op ran
            _check_saved_arrays_unchanged(fn, tensor)
        if tensor_mode:
            input_grads = _differentiable_backward(fn, tensor, g, watchers)
        elif not watchers:
            input_grads = fn.backward(g, **fn.saved)
        else:
            input_grads = observers.call(fn, "backward", fn.backward, g, **fn.saved)
        if not isinstance(input_grads, tuple):
            input_grads = (input_grads,)
        aligned = []
        for inp, ig in zip(fn.inputs, input_grads):
            if ig is None or not inp.requires_grad:
                aligned.append(None)
                continue
            if ig.shape != inp.shape:
                ig = unbroadcast(ig, inp.shape)
            aligned.append(ig)
            key = id(inp)
            previous = pending.get(key)
            pending[key] = ig if previous is None else previous + ig
        aligned = tuple(aligned)
        for watcher in watchers:
            watcher.stepped(fn, g, aligned)
        yield BackwardStep(tensor, fn, g, aligned)
        if not retain_graph:
            fn.release()


def _accumulate(tensor, g, tensor_mode):
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
    captured = {id(x): None for x in wanted}
    stop = set(captured)    # the walk need not go below the op's own inputs
    with grad_mode.enable_grad():
        twin = fn.compose(fn.inputs, fn.options)
        order, ends = _on_paths_to(_reverse_topological_order((twin,), stop), captured)
        # the inputs' own hooks run once, in the outer pass, not here as well
        for _ in _run(order, {id(twin): g}, True, True, captured, ends, hooks_at_ends=False):
            pass
    return tuple(captured.get(id(inp)) if need else None for inp, need in zip(fn.inputs, fn.needs_input_grad))


def _initial_grad(root, grad, tensor_mode=False):
    from .tensor import Tensor
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
