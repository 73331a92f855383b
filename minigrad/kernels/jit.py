"""``numba.njit`` without reference counting, with an on-disk cache where it can be used."""
import os

import numba


def jit(**options):
    """``numba.njit(cache=True, error_model="numpy", _nrt=False, **options)``, cache optional.

    The cache makes a fresh process load compiled machine code instead of
    compiling again (seconds). No cache (compile in memory on first call):
    - under ``MINIGRAD_VECTOR_BYTES`` (a vector width forced for an experiment):
      the width is compiled into the code but is not part of Numba's cache key,
      so cached code of another width would be loaded silently;
    - where Numba finds no writable cache directory (``RuntimeError: cannot
      cache function ...``, e.g. a read-only install without NUMBA_CACHE_DIR).
    error_model="numpy": float division by zero gives inf/nan, no exception.
    _nrt=False: no reference counting. Every row view (``x[b, i]``) in a kernel
    otherwise costs two atomic updates of its array's count, and the short rows
    here made that a third of the fused attention's time (docs/kernels.md). So a
    kernel must not allocate (its caller passes outputs and scratch) or return a
    new array; its views live no longer than the call, and its arguments outlive it.
    """
    options = {"error_model": "numpy", "_nrt": False, **options}

    def decorate(function):
        if os.environ.get("MINIGRAD_VECTOR_BYTES"):
            return numba.njit(**options)(function)
        try:
            return numba.njit(cache=True, **options)(function)
        except RuntimeError as error:
            if "cannot cache" not in str(error):
                raise
            return numba.njit(**options)(function)
    return decorate
