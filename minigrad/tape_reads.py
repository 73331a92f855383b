"""While a traced call is recorded or verified: which tensors the piece's own Python makes from
its arguments, and which values it reads out of tensors as Python numbers or arrays.

A pure replay (``pure_replay.py``) skips the piece's Python, so a number the Python read out
of the data (``.item()``, ``int(t)``, ``float(t)``, a branch on ``bool(t)``) or an array it
took out of an op's output (``.data``, ``.numpy()``, ``np.asarray(t)``) and used for anything
but handing it to another op would be frozen at the first batch's value. ``watching_tensors``
swaps Tensor's methods for ones that tell the running tape (``tape.read``, ``tape.made``);
the tape decides. Reads made by minigrad's own code (``Function.apply`` taking the arrays, an
op's helper) are the engine's plumbing and are not reported.

The swap is of the class, so it is counted and locked: two threads recording at once share
one swap, and other threads' tensors pass through the wrappers (their tape is None).
"""
import contextlib
import sys
import threading

from .tape_state import state as tape_state
from .tensor import Tensor

_lock = threading.Lock()
_users = 0
_saved = {}         # name -> Tensor's own attribute (absent: it was inherited)
ENGINE = "minigrad."
CONVERSIONS = ("item", "__float__", "__int__", "__bool__", "__index__", "tolist", "numpy", "__array__")


@contextlib.contextmanager
def watching_tensors():
    global _users
    with _lock:
        if _users == 0:
            _install()
        _users += 1
    try:
        yield
    finally:
        with _lock:
            _users -= 1
            if _users == 0:
                _uninstall()


def _from_piece():
    """Whether the read was made by code outside minigrad (two frames up: past the wrapper)."""
    return not sys._getframe(2).f_globals.get("__name__", "").startswith(ENGINE)


def _install():
    data_slot = Tensor.__dict__["data"]
    init = Tensor.__init__
    _saved["data"], _saved["__init__"] = data_slot, init

    def read_data(self):
        array = data_slot.__get__(self)
        tape = tape_state.tape
        if tape is not None and _from_piece():
            tape.read(self, ".data", array)
        return array

    def made(self, data, *args, **kwargs):
        init(self, data, *args, **kwargs)
        tape = tape_state.tape
        if tape is not None and not args and not kwargs:      # Tensor(x): x's dtype rules, no grad
            tape.made(self, data)
    Tensor.data = property(read_data, data_slot.__set__)
    Tensor.__init__ = made
    for name in CONVERSIONS:
        original = getattr(Tensor, name, None)
        if original is None:
            continue
        _saved[name] = Tensor.__dict__.get(name)
        setattr(Tensor, name, _reporting(name, original))


def _reporting(name, original):
    def method(self, *args, **kwargs):
        result = original(self, *args, **kwargs)
        tape = tape_state.tape
        if tape is not None and _from_piece():
            tape.read(self, f"{name.strip('_')}()", result)
        return result
    return method


def _uninstall():
    for name, original in _saved.items():
        if original is None:
            delattr(Tensor, name)
        else:
            setattr(Tensor, name, original)
    _saved.clear()
