"""``@accelerated``: an op's numpy function that a Numba kernel may run instead, and the switch.

An op writes its math once, as plain numpy, in its own file, and marks the functions a
kernel may replace:

    @accelerated
    def softmax(x):                       # ops/softmax.py: the definition a learner reads
        ...numpy...

``minigrad/kernels/`` registers kernels for these functions (``kernels/registry.py``:
``@kernel_for``). The ops never import the kernels: the first call of an accelerated function
on the Numba backend imports ``minigrad.kernels`` (and so Numba), which registers every kernel.
With ``MINIGRAD_KERNELS=numpy`` (or ``use_backend("numpy")``) nothing of Numba is ever loaded.

A call runs the kernel when one is registered, the Numba backend is selected, the kernel
pays (the kernel benchmark measured it faster than the numpy definition at the shapes it is
used on) and its ``fits(*args)`` is true; otherwise the numpy definition. That choice is made here and nowhere
else, and the profiler is told which path each call took (``minigrad/observers.py``).
"""
import contextlib
import functools
import importlib
import os
import sys

from .observers import call as observed_call, watching

BACKENDS = ("numba", "numpy")
BACKEND_VARIABLE = "MINIGRAD_KERNELS"   # chooses the backend for a process (unset: numba)
KERNEL_PACKAGE = "minigrad.kernels"     # imported on the first call that may run a kernel


def _checked_backend(name):
    if name not in BACKENDS:
        raise ValueError(f"unknown kernel backend {name!r}; valid names: {', '.join(BACKENDS)}")
    return name


def backend_setting():
    """The backend ``$MINIGRAD_KERNELS`` names ("numba" when unset); ValueError, naming the valid
    values, for anything else, empty included (an empty setting is a mistake, not a choice)."""
    value = os.environ.get(BACKEND_VARIABLE)
    if value is None:
        return "numba"
    if value not in BACKENDS:
        raise ValueError(f"{BACKEND_VARIABLE}={value!r} is not a kernel backend; valid names: "
                         f"{', '.join(BACKENDS)} (or leave it unset: numba)")
    return value


# Read from the environment on first use, not at import: a bad setting is then reported by the
# console scripts' argument check (one line, exit 2) instead of a traceback from an import.
_backend = None
_kernels_loaded = False


def load_kernels():
    """Import the kernel package once: each kernel file registers itself (this loads Numba).

    Retryable: if the load stops half-way (Ctrl-C while Numba imports, which takes seconds),
    every module it added is forgotten, with the kernels they registered, so the next call
    loads afresh instead of finding half a Numba (``module 'numba' has no attribute 'core'``)."""
    global _kernels_loaded
    if _kernels_loaded:
        return
    before = set(sys.modules)
    try:
        importlib.import_module(KERNEL_PACKAGE).load()
    except BaseException:
        _forget_modules(set(sys.modules) - before)
        raise
    _kernels_loaded = True


def _forget_modules(names):
    registry = sys.modules.get(KERNEL_PACKAGE + ".registry")
    for kernel in registry.registered() if registry is not None else ():
        if kernel.run.__module__ in names:      # its file will register it again
            registry.unregister(kernel.op)
    for name in names:
        del sys.modules[name]


class Accelerated:
    """An op's numpy function that a registered kernel may run instead (see the module doc).

    ``numpy`` is the plain function, ``kernel`` the registered Kernel or None."""

    def __init__(self, numpy_function):
        functools.update_wrapper(self, numpy_function)
        self.numpy = numpy_function
        self.kernel = None

    def chosen(self, args):
        """The one place that chooses: the kernel when the Numba backend is selected, a kernel
        is registered, its measured verdict says it is faster than this numpy function at the
        shapes it is used on (``kernels/registry.py``) and it fits these arguments; otherwise
        the numpy function."""
        if get_backend() != "numba":
            return self.numpy
        if not _kernels_loaded:
            load_kernels()
        kernel = self.kernel
        return kernel.run if kernel is not None and kernel.pays and kernel.fits(*args) else self.numpy

    def runs_kernel(self, args):
        return self.chosen(args) is not self.numpy

    def __call__(self, *args):
        run = self.chosen(args)
        if watching.observers:      # the profiler notes which path this call took
            return observed_call(self, "numpy" if run is self.numpy else "kernel", run, *args)
        return run(*args)

    def __repr__(self):
        return f"<accelerated {self.__module__}.{self.__name__}>"


def accelerated(numpy_function):
    """Decorator for an op's numpy function: calls go to its kernel when one is registered and fits."""
    return Accelerated(numpy_function)


def set_backend(name):
    """Use the Numba kernels ("numba") or the ops' plain numpy functions ("numpy")."""
    global _backend
    _backend = _checked_backend(name)


def get_backend():
    """The selected backend: set_backend's, else ``$MINIGRAD_KERNELS``'s (ValueError if that is bad)."""
    global _backend
    if _backend is None:
        _backend = backend_setting()
    return _backend


def numpy_selected():
    """True when the ops' numpy functions are selected."""
    return get_backend() == "numpy"


@contextlib.contextmanager
def use_backend(name):
    """``with use_backend("numpy"): ...`` runs the block on the given backend."""
    previous = get_backend()
    set_backend(name)
    try:
        yield
    finally:
        set_backend(previous)
