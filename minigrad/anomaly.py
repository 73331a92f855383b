"""detect_anomaly(): find the op whose backward first produces NaN or inf.

    with minigrad.detect_anomaly():
        loss = model(x)          # each op remembers the line of your code that made it
        loss.backward()          # the first NaN/inf gradient raises AnomalyError

Like ``torch.autograd.detect_anomaly``: in forward every recorded op stores
where the user's code created it (file:line of the first stack frame outside
the minigrad package); in backward, the first op whose incoming gradient or
any input gradient holds NaN or inf raises, naming the op, that line and the
input. Off by default, and then it costs nothing: no stack is looked at and
no gradient is scanned. As grad mode, it belongs to the thread.
"""
import contextlib
import linecache
import os
import sys

import numpy as np

from .observers import Observer, is_watching, observing

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


class AnomalyError(RuntimeError):
    """A backward pass under ``detect_anomaly()`` produced NaN or inf."""


class _AnomalyMode(Observer):
    """Watches the engine (``observers.py``): where each op is made, what each backward gives."""

    def recorded(self, fn):
        fn.created_at = user_site()

    def stepped(self, fn, grad, input_grads):
        check_step(fn, _array(grad), tuple(None if g is None else _array(g) for g in input_grads))


_MODE = _AnomalyMode()


def is_enabled() -> bool:
    return is_watching(_MODE)


@contextlib.contextmanager
def detect_anomaly(enabled: bool = True):
    """Context manager: record where each op was created and check every gradient (this thread)."""
    with observing(_MODE, enabled):
        yield


def _array(x):
    return x.data if hasattr(x, "grad_fn") else x


def user_site() -> str:
    """``file:line`` of the innermost stack frame outside the minigrad package."""
    frame = sys._getframe(1)
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(_PACKAGE_DIR):
        frame = frame.f_back
    if frame is None:
        return "<inside minigrad>"
    return f"{frame.f_code.co_filename}:{frame.f_lineno}"


def check_step(fn, grad, input_grads):
    """Raise ``AnomalyError`` if the gradient into ``fn``'s output or one it returned is not finite."""
    if not np.isfinite(grad).all():
        _raise(fn, "the gradient flowing into its output", grad)
    for i, ig in enumerate(input_grads):
        if ig is not None and not np.isfinite(ig).all():
            _raise(fn, f"the gradient it returned for input {i} (shape {fn.inputs[i].shape})", ig)


def _raise(fn, where, values):
    kind = "NaN" if np.isnan(values).any() else "inf"
    site = getattr(fn, "created_at", None)
    if site is None:
        origin = "(created outside detect_anomaly(), so its source line is unknown)"
    else:
        filename, _, line = site.rpartition(":")
        code = linecache.getline(filename, int(line)).strip() if line.isdigit() else ""
        origin = f"created at {site}" + (f": {code}" if code else "")
    raise AnomalyError(f"detect_anomaly: backward of {fn.name} produced {kind} in {where}; "
                       f"the op was {origin}")
