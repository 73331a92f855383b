"""``numba.njit`` with an on-disk cache, or without one where the cache can't be written."""
import numba


def jit(**options):
    """``numba.njit(cache=True, error_model="numpy", **options)``, cache optional.

    The cache makes a fresh process load compiled machine code instead of
    compiling again (seconds). Numba raises ``RuntimeError: cannot cache
    function ...: no locator available`` at decoration time when it finds no
    writable cache directory (e.g. a read-only install without
    NUMBA_CACHE_DIR); then we compile in memory on first call instead.
    error_model="numpy": float division by zero gives inf/nan, no exception.
    """
    options = {"error_model": "numpy", **options}

    def decorate(function):
        try:
            return numba.njit(cache=True, **options)(function)
        except RuntimeError as error:
            if "cannot cache" not in str(error):
                raise
            return numba.njit(**options)(function)
    return decorate
