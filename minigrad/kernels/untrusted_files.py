"""Files the engine reads but did not just write (the kernel verdicts, Numba's cache records),
read as distrustfully as a checkpoint, and the one ``note:`` line that says one was ignored.

Anything can stand at such a path: a FIFO (a plain ``open`` waits for a writer forever), a link
to ``/dev/zero`` (a plain ``read()`` never ends), a folder, a huge file. So a file is opened
without blocking and checked on its descriptor before a byte is read, and read up to a cap.
The engine then carries on without the file (numpy's loops, or compiling anew) and says so
once per process: a command's output is not drowned in repeated notes.
"""
import os
import stat
import sys


class Unreadable(Exception):
    """Why a file was not used, in a few words (no path: the caller's note names it)."""


def _kind(mode) -> str:
    if stat.S_ISDIR(mode):
        return "a folder, not a file"
    if stat.S_ISFIFO(mode):
        return "a FIFO, not a regular file"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device, not a regular file"
    return "not a regular file"


def check_regular(path):
    """Raise Unreadable unless ``path`` is (or links to) a regular file; FileNotFoundError
    when nothing is there. ``os.stat`` does not open the file, so a FIFO cannot block it."""
    mode = os.stat(path).st_mode
    if not stat.S_ISREG(mode):
        raise Unreadable(_kind(mode))


def read_regular_file(path, max_bytes: int) -> bytes:
    """The bytes of ``path``, refused (Unreadable) unless it is a regular file of at most
    ``max_bytes``; FileNotFoundError when nothing is there. Checked on the open descriptor,
    so the file cannot be swapped between the check and the read."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)     # a FIFO must not block the open
    except FileNotFoundError:
        raise
    except OSError as error:
        raise Unreadable(error.strerror or str(error)) from None
    try:
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode):
            raise Unreadable(_kind(status.st_mode))
        if status.st_size > max_bytes:
            raise Unreadable(f"{status.st_size} bytes, more than the {max_bytes} such a file can be")
        data = b""
        while len(data) <= max_bytes:           # up to one byte past the cap: it grew while we read
            chunk = os.read(fd, max_bytes + 1 - len(data))
            if not chunk:
                break
            data += chunk
    except OSError as error:
        raise Unreadable(error.strerror or str(error)) from None
    finally:
        os.close(fd)
    if len(data) > max_bytes:
        raise Unreadable(f"more than the {max_bytes} bytes such a file can be")
    return data


_noted = set()


def note_once(topic: str, message: str):
    """``note: message`` on stderr, the first time this process notes ``topic``."""
    if topic in _noted:
        return
    _noted.add(topic)
    try:
        print(f"note: {message}", file=sys.stderr, flush=True)
    except (OSError, ValueError, AttributeError):           # stderr closed or full
        pass
