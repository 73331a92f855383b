"""Is Numba's on-disk cache warm for the kernels the model uses? And filling it, two at a time.

``cache_is_cold()`` asks each kernel's cache index for code Numba would load here, so a command
says "compiling kernels" only when it will. ``compile_training_kernels()`` compiles the registered
kernels of stage "forward" (the fused attention's is the largest) while a child process writes
the cache for those of stage "training": Numba compiles one function at a time per process.
The child ends with this process, kill -9 included (``children.py``).
"""
import os
import subprocess
import sys

import numba
import numpy as np

from . import registered
from .jit import disk_cache


def compiled_functions(training=True):
    """The Numba functions of the registered kernels a forward pass (``training=False``) or a
    default training step runs, each once: a kernel that does not pay never runs, so it is not
    compiled ahead (with an unreadable verdicts file, none is)."""
    stages = ("forward", "training") if training else ("forward",)
    found = []
    for kernel in registered():
        if kernel.pays and kernel.stage in stages:
            found += [f for f in kernel.compiled if f not in found]
    return found


def _has_code_for(dispatcher, dtype):
    """Compiled code for dtype: already in this process, or on disk and loadable."""
    numba_dtype = np.dtype(dtype).name  # "float32", as Numba names it

    def for_dtype(signature):
        return any(getattr(getattr(arg, "dtype", None), "name", None) == numba_dtype for arg in signature)
    if any(for_dtype(signature) for signature in dispatcher.signatures):
        return True
    cache = disk_cache(dispatcher)
    if cache is None:
        return False
    codegen = dispatcher.targetctx.codegen()
    index = cache._cache_file._load_index()  # {} when missing, stale or from another Numba version
    return any(key == cache._index_key(key[0], codegen) and for_dtype(key[0]) for key in index)


def cache_is_cold(training=True, dtype=np.float32):
    """True when the next first call of a kernel the model uses will compile (seconds):
    ``training=False`` asks only for the forward kernels (translate, evaluate)."""
    if numba.config.DISABLE_JIT:  # NUMBA_DISABLE_JIT=1: the kernels run as Python, nothing compiles
        return False
    try:
        return not all(_has_code_for(d, dtype) for d in compiled_functions(training))
    except (AttributeError, KeyError, OSError, TypeError, ValueError):  # Numba's internals moved: can't tell
        return True


def warm_up(stage, dtype):
    """Compile (or load) the registered kernels of one stage for dtype, one small call each."""
    for kernel in registered():
        if kernel.stage == stage and kernel.pays:
            kernel.warm_up(dtype)


def compile_training_kernels(dtype=np.float32):
    """Compile what a training step runs: the forward kernels here, the rest in a child process
    that writes Numba's cache (if it fails, each kernel compiles on its first call)."""
    if not any(disk_cache(f) for f in compiled_functions()):
        return
    package_parent = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    path = os.pathsep.join(p for p in (package_parent, os.environ.get("PYTHONPATH")) if p)
    # The child dies with this process however it ends (kill -9 included), before it loads Numba.
    code = (f"from minigrad.kernels.children import die_with_parent; die_with_parent({os.getpid()}); "
            f"import minigrad.kernels.compile_cache as c; c.warm_up('training', '{np.dtype(dtype)}')")
    child = subprocess.Popen(
        [sys.executable, "-c", code],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": path})
    try:
        warm_up("forward", dtype)
        child.wait()
    finally:
        if child.poll() is None:  # interrupted: stop the child too
            child.kill()
            child.wait()
