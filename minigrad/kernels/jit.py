"""``numba.njit`` without reference counting, with an on-disk cache where it can be used."""
import os

import numba


def jit(**options):
    """``numba.njit(cache=True, error_model="numpy", _nrt=False, **options)``.

    cache: a fresh process loads compiled code instead of compiling (seconds); not under
    ``MINIGRAD_VECTOR_BYTES`` (not part of Numba's cache key) or without a writable cache
    directory. error_model="numpy": x / 0 gives inf or nan. _nrt=False: no reference counting
    (a third of the fused attention's time went to it), so a kernel allocates nothing (its
    caller passes outputs and scratch) and returns no new array.
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
