"""Is Numba's on-disk cache warm for the kernels the model uses? And the vector width in it.

``cache_is_cold()`` lets a command print "compiling kernels, first run only: ~N s" only
when that is true: it asks each kernel's cache index (the ``.nbi`` file beside the
source, or under ``NUMBA_CACHE_DIR``) for compiled code that Numba would load for this
source, Numba version, CPU and dtype. It reads Numba's cache classes (``numba.core.caching``),
so it answers "cold" whenever it cannot tell.

The vector width (``simd.VECTOR_BYTES``, set by ``MINIGRAD_VECTOR_BYTES``) is compiled
into the kernels but is not part of Numba's cache key. So each cache folder records the
width its code was built with (a file ``minigrad-vector-bytes``); when this process runs
with another width, the kernels' cache indexes are dropped at import, and the next first
calls compile for the new width (instead of silently running the old one).
"""
import os

import numba
import numpy as np

from . import adam_kernel, attention_kernels, layer_norm_kernels, relu_kernels, simd, softmax_kernels

# What one forward pass of the model calls (translation, evaluation) ...
FORWARD_KERNELS = (attention_kernels._attention_kernel, layer_norm_kernels._layer_norm_kernel,
                   relu_kernels._relu_kernel)
# ... and what a training step adds (cross-entropy's log-softmax, the backwards, Adam).
TRAINING_KERNELS = FORWARD_KERNELS + (softmax_kernels._log_softmax_kernel, attention_kernels._attention_backward_kernel,
                                      layer_norm_kernels._layer_norm_backward_kernel,
                                      relu_kernels._relu_backward_kernel, adam_kernel._adam_kernel)
_WIDTH_FILE = "minigrad-vector-bytes"


def _disk_cache(dispatcher):
    cache = getattr(dispatcher, "_cache", None)
    return cache if hasattr(cache, "_cache_file") else None  # NullCache: no cache=True


def _has_code_for(dispatcher, dtype):
    """Compiled code for dtype: already in this process, or on disk and loadable."""
    numba_dtype = {np.dtype(np.float32): "float32", np.dtype(np.float64): "float64"}[np.dtype(dtype)]

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


def _match_cache_to_vector_width():
    """Drop the kernels' cache indexes (``*.nbi``) when they were written with another vector
    width; Numba then compiles on the next first calls and writes new ones. Every kernel file
    sits in this folder, so all of them share one cache folder."""
    cache = _disk_cache(softmax_kernels._softmax_kernel)
    if cache is None:
        return
    folder = cache._cache_path
    record = os.path.join(folder, _WIDTH_FILE)
    try:
        with open(record) as file:
            recorded = file.read().strip()
    except OSError:
        recorded = None  # no record yet: the cache (if any) is taken as built with this width
    if recorded == str(simd.VECTOR_BYTES):
        return
    try:
        if recorded is not None:
            for name in os.listdir(folder):
                if name.endswith(".nbi"):
                    os.remove(os.path.join(folder, name))
        os.makedirs(folder, exist_ok=True)
        with open(record, "w") as file:
            file.write(f"{simd.VECTOR_BYTES}\n")
    except OSError:  # a read-only cache folder: Numba does not write there either
        pass


_match_cache_to_vector_width()
