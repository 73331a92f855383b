"""The backend switch: the registered Numba kernels ("numba", the default) or the ops' plain
numpy functions ("numpy"), from ``set_backend``, ``use_backend`` or ``MINIGRAD_KERNELS``.
"""
import contextlib
import os

BACKENDS = ("numba", "numpy")


def _checked_backend(name):
    if name not in BACKENDS:
        raise ValueError(f"unknown kernel backend {name!r}; valid names: {', '.join(BACKENDS)}")
    return name


_backend = _checked_backend(os.environ.get("MINIGRAD_KERNELS", "numba"))


def set_backend(name):
    """Use the Numba kernels ("numba") or the ops' plain numpy functions ("numpy")."""
    global _backend
    _backend = _checked_backend(name)


def get_backend():
    return _backend


def numpy_selected():
    """True when the ops' numpy functions are selected (``registry.py`` asks this once per call)."""
    return _backend == "numpy"


@contextlib.contextmanager
def use_backend(name):
    """``with use_backend("numpy"): ...`` runs the block on the given backend."""
    previous = get_backend()
    set_backend(name)
    try:
        yield
    finally:
        set_backend(previous)
