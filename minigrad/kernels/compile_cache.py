"""Is Numba's on-disk cache warm for the kernels the model uses? And filling it, two at a time.

``cache_is_cold()`` asks each kernel's cache index for code Numba would load here, so a command
says "compiling kernels" only when it will. ``compile_training_kernels()`` compiles the forward
kernels (the fused attention's is the largest) while a child process writes the cache for the
rest: Numba compiles one function at a time per process. Numba checks only a kernel's own file before
loading its cached code, and every kernel inlines ``simd.py``: so the cache folder records a
hash of this package's files, and the cache indexes are dropped at import when it differs.
"""
import glob
import hashlib
import os
import subprocess
import sys

import numba
import numpy as np

from . import adam_kernel, attention_kernels, layer_norm_kernels, relu_kernels, softmax_kernels

# What one forward pass of the model calls (translation, evaluation) ...
FORWARD_KERNELS = (attention_kernels._attention_kernel, layer_norm_kernels._layer_norm_kernel,
                   relu_kernels._relu_kernel)
# ... and what a training step adds (cross-entropy's log-softmax, the backwards, Adam).
TRAINING_KERNELS = FORWARD_KERNELS + (softmax_kernels._softmax_kernel, attention_kernels._attention_backward_kernel,
                                      layer_norm_kernels._layer_norm_backward_kernel,
                                      relu_kernels._relu_backward_kernel, adam_kernel._adam_kernel)


def _disk_cache(dispatcher):
    cache = getattr(dispatcher, "_cache", None)
    return cache if hasattr(cache, "_cache_file") else None  # NullCache: no cache=True


def _has_code_for(dispatcher, dtype):
    """Compiled code for dtype: already in this process, or on disk and loadable."""
    numba_dtype = np.dtype(dtype).name  # "float32", as Numba names it

    def for_dtype(signature):
        return any(getattr(getattr(arg, "dtype", None), "name", None) == numba_dtype for arg in signature)
    if any(for_dtype(signature) for signature in dispatcher.signatures):
        return True
    cache = _disk_cache(dispatcher)
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
        return not all(_has_code_for(d, dtype) for d in (TRAINING_KERNELS if training else FORWARD_KERNELS))
    except (AttributeError, KeyError, OSError, TypeError, ValueError):  # Numba's internals moved: can't tell
        return True


def _compile_the_rest(dtype):
    """One small call of every training kernel but the forward ones, with the argument types a model passes."""
    x = np.zeros((1, 2, 8), dtype)
    out, weights = attention_kernels.attention_numpy(x, x, x, True, 2)
    attention_kernels.attention_backward(out, x, x, x, weights, 2, x.copy(), x.copy(), x.copy())
    rows, vector = x.reshape(2, 8), np.ones(8, dtype)
    _, mean, rstd = layer_norm_kernels.layer_norm_numpy(rows, vector, vector, 1e-5)
    layer_norm_kernels.layer_norm_backward(rows, rows, vector, mean, rstd)
    softmax_kernels.log_softmax(rows)
    relu_kernels.relu_backward(relu_kernels.relu_numpy(rows), rows)
    adam_kernel.adam_update_all([vector.copy()], [vector], [vector.copy()], [vector.copy()], 0.9, 0.98, 1e-3, 1e-9)


def compile_training_kernels(dtype=np.float32):
    """Compile what a training step runs: the forward kernels here, the rest in a child process
    that writes Numba's cache (if it fails, each kernel compiles on its first call)."""
    if _disk_cache(attention_kernels._attention_kernel) is None:
        return
    package_parent = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    path = os.pathsep.join(p for p in (package_parent, os.environ.get("PYTHONPATH")) if p)
    child = subprocess.Popen(
        [sys.executable, "-c", f"from minigrad.kernels import compile_cache as c; c._compile_the_rest('{np.dtype(dtype)}')"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": path})
    try:
        x, vector = np.zeros((1, 2, 8), dtype), np.ones(8, dtype)  # the argument types a model passes
        attention_kernels.attention(x, x, x, np.ones((1, 1, 2, 2), bool), 2)
        layer_norm_kernels.layer_norm(x, vector, vector, 1e-5)
        relu_kernels.relu(x)
        child.wait()
    finally:
        if child.poll() is None:  # interrupted: stop the child too
            child.kill()
            child.wait()


def _drop_cache_of_other_sources():
    """Drop the kernels' cache indexes (``*.nbi``, one cache folder for this package) when they
    were written for other sources: Numba then compiles on first calls and writes new ones."""
    cache = _disk_cache(softmax_kernels._softmax_kernel)
    if cache is None:
        return
    digest = hashlib.sha256()
    for path in sorted(glob.glob(os.path.join(os.path.dirname(os.path.abspath(__file__)), "*.py"))):
        with open(path, "rb") as source:
            digest.update(source.read())
    folder, stamp = cache._cache_path, digest.hexdigest()
    record = os.path.join(folder, "minigrad-kernel-sources")
    try:
        with open(record) as file:
            if file.read().strip() == stamp:
                return
    except OSError:
        pass  # no record yet: drop whatever is there, it may be from other sources
    try:
        for name in os.listdir(folder) if os.path.isdir(folder) else ():
            if name.endswith(".nbi"):
                os.remove(os.path.join(folder, name))
        os.makedirs(folder, exist_ok=True)
        with open(record, "w") as file:
            file.write(stamp + "\n")
    except OSError:  # a read-only cache folder: Numba does not write there either
        pass


_drop_cache_of_other_sources()
