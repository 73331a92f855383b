"""Tensor hooks: functions called with a tensor's gradient during backward.

    h = x.register_hook(lambda g: g.clip(-1, 1))   # replace x's gradient by a clipped one
    ...
    h.remove()

As in PyTorch: a hook receives the gradient as a Tensor (a copy, safe to
keep), may return a replacement (a Tensor or array of the same shape) or None
to keep it; hooks run in the order they were registered, on leaves before the
gradient is added to ``.grad`` and on intermediate tensors before it flows on
(so ``retain_grad()`` keeps the hooked value).
"""
import itertools

import numpy as np

from . import tensor_type
_next_id = itertools.count()


class RemovableHandle:
    """Returned by ``register_hook``; ``remove()`` unregisters the hook (also ``with handle:``)."""

    def __init__(self, hooks: dict, key: int):
        self._hooks, self.id = hooks, key     # the tensor's dict, not the tensor: no reference cycle

    def remove(self):
        self._hooks.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


def register_hook(tensor, hook) -> RemovableHandle:
    if not callable(hook):
        raise TypeError(f"register_hook needs a function of the gradient, got {type(hook).__name__}")
    if not tensor.requires_grad:
        raise RuntimeError("cannot register a hook on a tensor that does not require grad "
                           "(it never receives a gradient)")
    if tensor._hooks is None:
        tensor._hooks = {}
    key = next(_next_id)
    tensor._hooks[key] = hook
    return RemovableHandle(tensor._hooks, key)


def run_hooks(tensor, grad):
    """The gradient after every hook of ``tensor`` has seen (and maybe replaced) it.

    Under ``backward(create_graph=True)`` the gradient is a Tensor in a graph: the
    hook gets it as it is and a Tensor it returns stays in the graph (PyTorch's rule)."""
    in_graph = isinstance(grad, tensor_type.Tensor)
    for hook in list(tensor._hooks.values()):
        result = hook(grad if in_graph else tensor_type.constant(grad.copy()))
        if result is None:
            continue
        if in_graph:
            replacement = tensor_type.as_tensor(result)
        else:
            replacement = np.asarray(result.data if isinstance(result, tensor_type.Tensor) else result)
        if replacement.shape != grad.shape:
            raise ValueError(f"hook {getattr(hook, '__name__', hook)} returned a gradient of shape "
                             f"{replacement.shape} for a tensor of shape {grad.shape}; it must keep the shape")
        grad = replacement if replacement.dtype == grad.dtype else replacement.astype(grad.dtype)
    return grad
