"""Forward-mode AD: push a tangent through the computation alongside the values.

    from minigrad import forward_ad as fwAD
    with fwAD.dual_level():
        x = fwAD.make_dual(primal, tangent)      # x carries a direction
        y = f(x)                                 # every op also computes y's tangent
        value, jvp = fwAD.unpack_dual(y)         # jvp = J_f(primal) @ tangent

The names and semantics are PyTorch's ``torch.autograd.forward_ad``. Each op
has a tangent rule ``jvp`` beside its forward and backward (in ``minigrad/ops/``);
``Function.apply`` calls ``propagate_tangents`` (``function.py``) after the forward, so a
Jacobian-vector product costs about one extra forward pass and records no
reverse graph (nothing here needs one; grad mode is not involved).

Levels keep nested derivatives apart ("perturbation confusion"): each
``dual_level()`` is a new level, a tensor holds one tangent per level, and a
level's tangent rule runs with only the *outer* (earlier) levels switched on.
So an inner level's tangent carries its outer derivatives (what nesting
needs), while an outer tangent never picks up an inner perturbation:
d/dx [x * (d/dy (x + y) at y = 1)] at x = 1 is 1, not 2.

As grad mode, the open levels belong to the thread (PyTorch's forward AD is
per thread too): a ``dual_level()`` in one thread gives no other thread's ops
tangents. ``state.active`` is read by ``Function.apply`` directly (one
attribute of a ``threading.local``, no call).
"""
import contextlib
import itertools
import threading
from typing import NamedTuple, Optional

from .tensor_type import as_tensor


class _Levels(threading.local):
    active = ()             # this thread's open dual_level() levels, outermost first; a new thread has none


state = _Levels()
_level_ids = itertools.count()      # shared by all threads, so a level id is never reused


class UnpackedDualTensor(NamedTuple):
    primal: "object"
    tangent: Optional["object"]


@contextlib.contextmanager
def dual_level():
    """Context manager: open a new forward-AD level (tangents made inside belong to it)."""
    level = next(_level_ids)
    state.active = state.active + (level,)
    try:
        yield level
    finally:
        state.active = tuple(lv for lv in state.active if lv != level)


def make_dual(tensor, tangent, *, level=None):
    """A tensor with ``tensor``'s values carrying ``tangent`` at ``level`` (the innermost by default).

    It keeps ``tensor``'s reverse graph and any tangents it has at other levels."""
    level = _checked_level(level, "make_dual")
    tensor, tangent = as_tensor(tensor), as_tensor(tangent)
    if tensor.dtype.kind != "f":
        raise TypeError(f"make_dual: the primal must be floating point, got dtype {tensor.dtype}")
    if tangent.shape != tensor.shape:
        raise ValueError(f"make_dual: the tangent has shape {tangent.shape} but the primal has shape "
                         f"{tensor.shape}; they must match")
    dual = tensor.reshape(tensor.shape)       # an identity op: keeps the reverse graph and outer tangents
    tangents = dict(getattr(dual, "_tangents", None) or {})
    tangents[level] = tangent if tangent.dtype == tensor.dtype else tangent.astype(tensor.dtype)
    dual._tangents = tangents
    return dual


def unpack_dual(tensor, *, level=None) -> UnpackedDualTensor:
    """``(primal, tangent)`` of ``tensor`` at ``level`` (innermost by default); tangent None if it has none."""
    level = _checked_level(level, "unpack_dual")
    tangent = tangent_of(tensor, level)
    if tangent is None:
        return UnpackedDualTensor(tensor, None)
    primal = tensor.reshape(tensor.shape)     # the same values and reverse graph, minus this level's tangent
    rest = {k: v for k, v in (getattr(primal, "_tangents", None) or {}).items() if k != level}
    primal._tangents = rest or None
    return UnpackedDualTensor(primal, tangent)


def tangent_of(tensor, level):
    tangents = getattr(tensor, "_tangents", None)
    return None if tangents is None else tangents.get(level)


def _checked_level(level, what):
    if not state.active:
        raise RuntimeError(f"{what}: no forward-AD level is open in this thread; use it inside "
                           "`with forward_ad.dual_level():`")
    if level is None:
        return state.active[-1]
    if level not in state.active:
        raise ValueError(f"{what}: level {level} is not open in this thread (open levels: {list(state.active)})")
    return level
