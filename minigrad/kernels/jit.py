"""``numba.njit`` with an on-disk cache, or without one where the cache can't be used."""
import os

import numba


def jit(**options):
    """``numba.njit(cache=True, error_model="numpy", **options)``, cache optional.

    The cache makes a fresh process load compiled machine code instead of
    compiling again (seconds). No cache (compile in memory on first call):
    - under ``MINIGRAD_VECTOR_BYTES`` (a vector width forced for an experiment):
      the width is compiled into the code but is not part of Numba's cache key,
      so cached code of another width would be loaded silently;
    - where Numba finds no writable cache directory (``RuntimeError: cannot
      cache function ...``, e.g. a read-only install without NUMBA_CACHE_DIR).
    error_model="numpy": float division by zero gives inf/nan, no exception.
    """
    options = {"error_model": "numpy", **options}

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
