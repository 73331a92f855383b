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

from . import anomaly, hooks, inplace
from .function import Function, unbroadcast

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


def autograd_steps(root, grad=None, retain_graph=False):
    """Run backward from ``root``, yielding a ``BackwardStep`` per op, in order.

    Exactly what ``root.backward(grad, retain_graph)`` does: leaves (and
    tensors that called ``retain_grad()``) accumulate ``.grad``; hooks
    registered with ``register_hook`` run on each tensor's gradient before it
    is used; under ``detect_anomaly()`` the first NaN or inf raises. Unless
    ``retain_graph``, each op's saved arrays are freed once its step has been
    yielded (so look at ``step.fn`` during the step, not after the loop).
    Stopping the iteration early stops the pass: later ops give no gradients.
    """
    pending = {id(root): _initial_grad(root, grad)}   # gradients waiting to flow further down
    checking = anomaly.is_enabled()
    for tensor in _reverse_topological_order(root):
        g = pending.pop(id(tensor), None)
        if g is None:
            continue
        if tensor._hooks:
            g = hooks.run_hooks(tensor, g)
        fn = tensor.grad_fn
        if fn is None or tensor._retains_grad:
            # Copy: the same array may also flow to another input (e.g. a + b).
            g_own = g.astype(tensor.dtype, copy=True)
            tensor.grad = g_own if tensor.grad is None else tensor.grad + g_own
        if fn is None:
            continue
        if inplace.clock != fn.recorded_at:     # something was changed in place after this op ran
            _check_saved_arrays_unchanged(fn, tensor)
        input_grads = fn.backward(g)
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
        if checking:
            anomaly.check_step(fn, g, aligned)
        yield BackwardStep(tensor, fn, g, aligned)
        if not retain_graph:
            fn.release()


def backward(root, grad=None, retain_graph=False):
    """Exhaust ``autograd_steps`` (this is ``Tensor.backward``)."""
    for _ in autograd_steps(root, grad, retain_graph):
        pass


def _initial_grad(root, grad):
    if not root.requires_grad and root.dtype.kind != "f":
        raise RuntimeError(f"backward() on a tensor of dtype {root.dtype}: an integer or bool result "
                           "does not require grad (as in PyTorch), so no gradient flows back through it")
    if not root.requires_grad:
        raise RuntimeError(
            "backward() on a tensor that does not require grad: no input of the "
            "computation had requires_grad=True (or it ran inside no_grad())")
    if grad is None:
        if root.data.size != 1:
            raise RuntimeError(
                f"backward() without a gradient needs a one-element tensor, got shape "
                f"{root.shape}; reduce it first (e.g. .sum() or .mean()) or pass grad=")
        return np.ones_like(root.data)
    from .tensor import Tensor
    grad = np.asarray(grad.data if isinstance(grad, Tensor) else grad, dtype=root.dtype)
    if grad.shape != root.shape:
        raise ValueError(f"backward(): grad has shape {grad.shape} but the tensor has shape {root.shape}")
    return grad


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
        saved = [v for v in vars(fn).values() if isinstance(v, np.ndarray)]
        if any(np.may_share_memory(v, t.data) for v in saved):
            raise RuntimeError(
                f"backward through {fn.name}: its {what} (shape {t.shape}) was modified in place "
                f"after {fn.name} saved it, so its gradient would "
                "use the new values; do the in-place update after backward(), or use x = x - y instead")


def _reverse_topological_order(root) -> list:
    """Every tensor that needs a gradient, outputs before inputs (iterative:
    a chain of 100,000 ops must not hit Python's recursion limit)."""
    order, visited = [], set()
    stack = [(root, False)]
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
        if fn is None:
            continue
        if fn.released:
            raise RuntimeError(
                f"backward through the graph a second time: the buffers of {fn.name} were freed by "
                "the first backward(); call backward(retain_graph=True) the first time if you need two")
        for inp in fn.inputs:
            if inp.requires_grad and id(inp) not in visited:
                stack.append((inp, False))
    order.reverse()
    return order
