"""``numba.njit`` without reference counting, with an on-disk cache where it can be used.

Numba checks only a kernel's own file before loading its cached code, and every kernel
inlines ``simd.py``: so the cache folder records a hash of this package's files, and the
cache indexes are dropped when this module is imported (before any kernel is) if it differs.

The cache folder's files are read as distrustfully as a checkpoint: Numba opens and reads its
index (``*.nbi``) and data (``*.nbc``) files as they come, so a FIFO there would block the
first kernel call forever, a link to ``/dev/zero`` would be read forever and garbage would be
a traceback. ``CheckedCacheFile`` reads only regular files and takes an unusable one for a
missing one (the kernel compiles, and Numba's next save replaces the file), with one note.
"""
import glob
import hashlib
import os
import re
import tempfile

import numba
from numba.core.caching import IndexDataCacheFile

from . import simd_codegen  # noqa: F401  (teaches Numba simd.py's vector helpers, which kernels call)
from .untrusted_files import Unreadable, check_regular, note_once, read_regular_file


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
            dispatcher = numba.njit(cache=True, **options)(function)
        except RuntimeError as error:
            if "cannot cache" not in str(error):
                raise
            return numba.njit(**options)(function)
        cache = disk_cache(dispatcher)
        if cache is not None and type(cache._cache_file) is IndexDataCacheFile:
            cache._cache_file.__class__ = CheckedCacheFile   # the same object, its reads checked
        return dispatcher
    return decorate


def disk_cache(dispatcher):
    cache = getattr(dispatcher, "_cache", None)
    return cache if hasattr(cache, "_cache_file") else None  # NullCache: no cache=True


class CheckedCacheFile(IndexDataCacheFile):
    """Numba's index and data files of one function, read only when they are regular files;
    one that is not, or that Numba cannot unpickle, counts as missing: the kernel compiles."""

    def _load_index(self):
        try:
            check_regular(self._index_path)
            return super()._load_index()
        except FileNotFoundError:
            return {}
        except Exception as problem:    # Unreadable, or whatever unpickling garbage raised
            _note_unusable_record(self._index_path, problem)
            return {}

    def _load_data(self, name):
        path = self._data_path(name)
        try:
            check_regular(path)
            return super()._load_data(name)
        except FileNotFoundError:
            raise
        except Exception as problem:
            _note_unusable_record(path, problem)
            raise OSError(f"unusable cache record {path}") from None  # Numba's load() then compiles


def _note_unusable_record(path, problem):
    if not isinstance(problem, Unreadable):          # Numba's unpickling of garbage: name the error only
        problem = f"not a record Numba can read: {type(problem).__name__}"
    note_once("numba cache", f"Numba cache record {path} ignored ({problem}): the kernels compile "
                             "again (seconds) and the record is written anew")


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
        recorded = read_regular_file(record, 1024).decode("ascii", "replace").strip()
        if recorded == stamp:
            return
        if not re.fullmatch("[0-9a-f]{64}", recorded):
            _note_unusable_record(record, Unreadable("not a source hash"))
    except FileNotFoundError:
        pass  # no record yet: drop whatever is there, it may be from other sources
    except Unreadable as problem:
        _note_unusable_record(record, problem)
    try:
        for name in os.listdir(folder) if os.path.isdir(folder) else ():
            if name.endswith(".nbi"):
                os.remove(os.path.join(folder, name))
        os.makedirs(folder, exist_ok=True)
        _write_atomically(record, stamp + "\n")
    except OSError:  # a read-only cache folder: Numba does not write there either
        pass


def _write_atomically(path, text):
    """Write ``text`` to a new temporary file and rename it over ``path``: a reader never sees
    half a record, and whatever stood at ``path`` (a FIFO included) is replaced, never opened."""
    with tempfile.NamedTemporaryFile("w", dir=os.path.dirname(path), suffix=".tmp", delete=False) as file:
        temporary = file.name
        try:
            file.write(text)
        except BaseException:
            file.close()
            os.remove(temporary)
            raise
    os.replace(temporary, path)


_drop_cache_of_other_sources()
