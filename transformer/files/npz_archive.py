"""Reading a ``.npz`` archive that may be damaged or forged: the checks every file we read shares.

A checkpoint (``checkpoint.py``) and the attention snapshots (``training/snapshots_file.py``) are
both ``.npz`` archives that a user can hand us from anywhere. ``NpzArchive`` reads one in steps,
each refusing before anything large is read or allocated:

    with NpzArchive(path) as npz:          # a FIFO, device or folder: refused before it is opened
        npz.check_members(max_bytes=..., compressed=False)   # names unique, sizes bounded
        headers = npz.headers()             # name -> (shape, dtype): checked against the file's sizes
        ...                                 # the caller checks the shapes it expects
        arrays = npz.read()                 # only now is any data read

Every problem is an ``NpzError`` whose ``reason`` says what is wrong and whose ``kind`` says
which sort of problem it is, so each caller words it for its own file ("checkpoint X is
corrupt ...", "X is not a readable attention snapshots file ...").

The bounds: a stored member may not declare more bytes than the whole file (``np.savez``
stores them as they are); a compressed member (``np.savez_compressed`` deflates them) may
inflate, so the caller gives ``max_bytes``, the most all members together may declare once
inflated, and ``zipfile`` never inflates a member past its declared size. A member's .npy header
must declare no more bytes than the member holds, so a forged shape cannot make us allocate
terabytes; arrays of Python objects (pickle) are refused.
"""
import os
import stat
import zipfile
import zlib

import numpy as np

# kinds of problem, for the caller's wording
MISSING = "missing"             # no such file
UNREADABLE = "unreadable"       # the operating system refused to open it (permission ...)
NOT_REGULAR = "not-regular"     # a folder, FIFO, device or socket
SINGLE_NPY = "single-npy"       # one .npy array, not an archive
TOO_LARGE = "too-large"         # one member larger than its limit (``check_members``'s ``limits``)
CORRUPT = "corrupt"             # anything else wrong inside


class NpzError(Exception):
    """One problem with an archive: ``reason`` (no path, one line) and its ``kind``."""

    def __init__(self, kind: str, reason: str):
        super().__init__(reason)
        self.kind, self.reason = kind, reason


def open_regular_file(path: str):
    """``path`` opened for reading in binary, refused (NpzError) unless it is a regular file.

    The file is opened without blocking and checked on the open descriptor: a FIFO would block
    a plain open until a writer came, and a check before the open could be raced."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        raise NpzError(MISSING, "does not exist") from None
    except IsADirectoryError:
        raise NpzError(NOT_REGULAR, "a folder") from None
    except OSError as error:
        raise NpzError(UNREADABLE, error.strerror or str(error)) from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NpzError(NOT_REGULAR, "a folder" if stat.S_ISDIR(mode) else "not a regular file")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


class NpzArchive:
    """One ``.npz`` file read step by step (see the module docstring)."""

    def __init__(self, path):
        self.path = os.fspath(path)
        self._file = self._zip = None
        self._members = {}          # array name -> ZipInfo

    # ------------------------------------------------------------ opening
    def __enter__(self):
        self._file = open_regular_file(self.path)
        try:
            self.file_size = os.fstat(self._file.fileno()).st_size
            magic = self._file.read(6)
            if magic.startswith(b"\x93NUMPY"):
                raise NpzError(SINGLE_NPY, "a single .npy array, not a .npz archive")
            if not magic.startswith(b"PK"):
                raise NpzError(CORRUPT, "not a .npz archive")
            self._file.seek(0)
            self._zip = self._guarded(zipfile.ZipFile, self._file)
        except BaseException:
            self._file.close()
            raise
        return self

    def __exit__(self, *exc):
        if self._zip is not None:
            self._zip.close()
        self._file.close()

    # ------------------------------------------------------------ the checks
    def check_members(self, compressed: bool = False, max_bytes: int = None, limits: dict = None):
        """Before any member is read: names unique (zipfile would silently give the last copy) and
        each a .npy array; stored uncompressed unless ``compressed``; a stored member no larger than
        the file; all together no more than ``max_bytes`` once inflated; ``limits``: {array name:
        most bytes} for single members (a larger one is a TOO_LARGE NpzError)."""
        seen, total = set(), 0
        for member in self._zip.infolist():
            name = member.filename
            if name in seen:
                raise NpzError(CORRUPT, f"member {name!r} appears twice")
            seen.add(name)
            if member.compress_type not in ((zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED) if compressed
                                            else (zipfile.ZIP_STORED,)):
                raise NpzError(CORRUPT, f"member {name!r} is compressed" + (
                    " in a way np.savez_compressed never writes" if compressed else ""))
            if member.compress_type == zipfile.ZIP_STORED and member.file_size > self.file_size:
                raise NpzError(CORRUPT, f"member {name!r} declares {member.file_size} bytes, more than the "
                                        f"whole file's {self.file_size}")
            if not name.endswith(".npy"):
                raise NpzError(CORRUPT, f"member {name!r} is not a .npy array")
            array_name = name[:-len(".npy")]
            most = (limits or {}).get(array_name)
            if most is not None and member.file_size > most:
                raise NpzError(TOO_LARGE, f"{array_name} is {member.file_size} bytes, more than the limit of {most}")
            total += member.file_size
            self._members[array_name] = member
        if max_bytes is not None and total > max_bytes:
            raise NpzError(CORRUPT, f"its members declare {total:,} bytes once inflated, more than the limit "
                                    f"of {max_bytes:,}")

    def headers(self) -> dict:
        """{array name: (shape, dtype)} from each member's .npy header, every one checked against
        the member's declared size; object (pickled) arrays refused."""
        return {name: self._guarded(self._header, name, member) for name, member in self._members.items()}

    def _header(self, name, member):
        with self._zip.open(member) as f:
            try:
                version = np.lib.format.read_magic(f)
                read = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                        else np.lib.format.read_array_header_2_0)
                shape, _, dtype = read(f)
            except (ValueError, EOFError, SyntaxError, TypeError) as error:
                raise NpzError(CORRUPT, f"member {member.filename!r} is not a real .npy array: {error}") from None
        if dtype.hasobject:
            raise NpzError(CORRUPT, f"member {member.filename!r} holds pickled objects, which are never loaded")
        size = int(np.prod(shape, dtype=np.float64)) * dtype.itemsize
        if size > member.file_size:
            raise NpzError(CORRUPT, f"member {member.filename!r} declares {size} bytes but holds "
                                    f"{member.file_size}")
        return shape, dtype

    # ------------------------------------------------------------ reading
    def read(self, names=None) -> dict:
        """{array name: array} of ``names`` (default: every member), read as np.load does, no pickle."""
        names = list(self._members) if names is None else names
        return {name: self._guarded(self._read_one, self._members[name]) for name in names}

    def _read_one(self, member):
        with self._zip.open(member) as f:
            return np.lib.format.read_array(f, allow_pickle=False)

    def _guarded(self, function, *args):
        """``function(*args)``, whatever zipfile, zlib or numpy raise on a damaged file as NpzError."""
        try:
            return function(*args)
        except NpzError:
            raise
        except (OSError, EOFError, zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError,
                ValueError, RuntimeError, zlib.error) as error:
            raise NpzError(CORRUPT, str(error) or type(error).__name__) from None
