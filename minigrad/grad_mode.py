"""Whether operations record a graph for backward.

Inside ``with no_grad():`` ops compute their results but remember nothing, so
evaluation and decoding cost no memory for the graph.
"""
import contextlib

_enabled = True


def is_grad_enabled() -> bool:
    return _enabled


@contextlib.contextmanager
def _grad_mode(enabled: bool):
    global _enabled
    previous, _enabled = _enabled, enabled
    try:
        yield
    finally:
        _enabled = previous


def no_grad():
    """Context manager: record no graph inside (like ``torch.no_grad``)."""
    return _grad_mode(False)


def enable_grad():
    """Context manager: record the graph again, e.g. inside a ``no_grad`` block."""
    return _grad_mode(True)
