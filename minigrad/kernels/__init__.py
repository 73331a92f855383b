"""The Numba kernels: accelerators registered for the ops' ``@accelerated`` numpy functions.

An op's math lives in its own file (``minigrad/ops/``, ``optim.py``) as plain numpy; the
functions a kernel may replace are marked ``@accelerated`` (``minigrad/accelerated.py``).
The ops never import this package: the first call of an accelerated function on the Numba
backend runs ``load()``, which imports every file here, and each kernel file registers
itself (``registry.py``: ``@kernel_for(op_function, fits=..., example=..., stage=...)``).
So ``import minigrad`` does not load Numba, and ``MINIGRAD_KERNELS=numpy`` never does.

- ``registry.py``: ``kernel_for`` and the list of registered kernels; ``measured.json``, the
  kernel benchmark's verdicts: a kernel runs by default only where it measured faster than
  numpy at its model shapes.
- ``jit.py``: ``numba.njit`` with the on-disk cache; ``compile_cache.py`` says whether that
  cache is warm and fills it on two cores, for the registered kernels (its helper process
  ends with its parent: ``children.py``).
- ``untrusted_files.py``: the verdicts and the cache records are read like a checkpoint (a
  FIFO, ``/dev/zero`` or garbage is ignored with one ``note:`` line, never waited on).
- One file per kernel family: softmax, layer norm, attention, ReLU, hardswish, Adam, batched
  matmul, the embedding gradient's scatter-add.
  Each registers a function with its op function's arguments and results.
- ``elementwise.py``: ``@elementwise``, a kernel from a one-line scalar function (ReLU's).
- ``simd.py``: a small vector vocabulary (``vload``, ``vstore``, ``vfma``, ...; plain
  Python) for the model's short rows, which Numba's auto-vectoriser leaves scalar;
  ``simd_codegen.py`` tells Numba how to compile it (skip it on a first read).

Kernels are serial, without fastmath (masked rows hold -inf), for float32 and float64.
``NUMBA_DISABLE_JIT=1`` runs them as plain Python (a debugger works). What was measured,
on which CPU, and what was tried: docs/kernels.md and docs/kernels-rows.md.
"""
import importlib
import pkgutil

from ..accelerated import BACKENDS, accelerated, get_backend, numpy_selected, set_backend, use_backend  # noqa: F401
from . import registry
from .registry import kernel_for  # noqa: F401


def load():
    """Import every file of this package once: each kernel file registers its kernels."""
    for module in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{module.name}")


def registered():
    """Every registered kernel, in registration order (loads the kernels first)."""
    load()
    return registry.registered()


def cache_is_cold(training=True, dtype="float32"):
    """True when the next first call of a kernel the model uses will compile (``compile_cache.py``)."""
    load()
    from .compile_cache import cache_is_cold as cold
    return cold(training, dtype)


def compile_training_kernels(dtype="float32"):
    """Compile what a training step runs, on two cores (``compile_cache.py``)."""
    load()
    from .compile_cache import compile_training_kernels as compile_them
    compile_them(dtype)


def __getattr__(name):
    if name == "lanes":         # floats per vector: needs Numba's view of the CPU, so only on demand
        from .simd import lanes
        return lanes
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
