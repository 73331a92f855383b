"""Whether operations record a graph for backward.

Inside ``with no_grad():`` ops compute their results but remember nothing, so
evaluation and decoding cost no memory for the graph.

As in PyTorch the mode belongs to the thread: ``no_grad()`` in one thread does
not stop another thread from recording, and a new thread starts with grad
enabled whatever the thread that started it was doing. ``state.enabled`` is
the flag itself (``Function.apply`` reads it directly: one attribute of a
``threading.local``, no call).
"""
import contextlib
import threading


class _GradMode(threading.local):
    enabled = True          # the class attribute is what every new thread sees first


state = _GradMode()


def is_grad_enabled() -> bool:
    return state.enabled


@contextlib.contextmanager
def _grad_mode(enabled: bool):
    previous, state.enabled = state.enabled, enabled
    try:
        yield
    finally:
        state.enabled = previous


def no_grad():
    """Context manager: record no graph inside (like ``torch.no_grad``), in this thread."""
    return _grad_mode(False)


def enable_grad():
    """Context manager: record the graph again, e.g. inside a ``no_grad`` block (this thread)."""
    return _grad_mode(True)
