"""``numba.njit`` without reference counting, with an on-disk cache where it can be used.

Numba checks only a kernel's own file before loading its cached code, and every kernel
inlines ``simd.py``: so the cache folder records a hash of this package's files, and the
cache indexes are dropped when this module is imported (before any kernel is) if it differs.
"""
import glob
import hashlib
import os

import numba

from . import simd_codegen  # noqa: F401  (teaches Numba simd.py's vector helpers, which kernels call)


def jit(**options):
    """``numba.njit(cache=True, nogil=True, error_model="numpy", _nrt=False, **options)``.

    cache: a fresh process loads compiled code instead of compiling (seconds); not under
    ``MINIGRAD_VECTOR_BYTES`` (not part of Numba's cache key) or without a writable cache
    directory. error_model="numpy": x / 0 gives inf or nan. _nrt=False: no reference counting
    (a third of the fused attention's time went to it), so a kernel allocates nothing (its
    caller passes outputs and scratch) and returns no new array. nogil: a kernel touches only
    the arrays it is given, so two threads may run kernels at once (the data-parallel halves
    of a training step, ``transformer/parallel/data_parallel.py``).
    """
    options = {"nogil": True, "error_model": "numpy", "_nrt": False, **options}

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


def disk_cache(dispatcher):
    cache = getattr(dispatcher, "_cache", None)
    return cache if hasattr(cache, "_cache_file") else None  # NullCache: no cache=True


@jit()
def _probe():
    """A function of this package's cache folder, to find that folder."""
    return 0


def _drop_cache_of_other_sources():
    """Drop the kernels' cache indexes (``*.nbi``, one cache folder for this package) when they
    were written for other sources: Numba then compiles on first calls and writes new ones."""
    cache = disk_cache(_probe)
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
