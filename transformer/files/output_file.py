"""Writing a command's output file: never over something that is not ours, never half-written.

Every command that writes a file (the graphs, heatmaps, animation, training curves, the explorer
page, ``dates-export``) goes through ``check_outputs`` and ``atomic_output``:

- an output path that already exists needs ``--force``; a default one (no ``--out``) that is taken
  is numbered instead (``free_default``: runs/viz/explorer-2.html), as dates-train numbers its runs;
- even with ``--force``, an output never replaces a checkpoint, a training log, a folder, a
  symlink, a device or FIFO, or a file that is not of the kind this command writes (a PNG
  for a PNG, an HTML page for a page ...): they say so in one line and nothing is written;
- the file is written to a temporary file in the same folder, fsynced and renamed into place,
  as checkpoints are, with the usual permissions (0644 under the default umask); Ctrl-C or
  SIGTERM while it is written removes the temporary file and leaves the old output intact.
"""
import contextlib
import json
import os
import signal
import stat
import threading
import zipfile
from dataclasses import dataclass
from typing import Callable

from transformer.files.checkpoint import fsync_folder
from transformer.files.output_folder import make_output_folder


class OutputRefused(ValueError):
    """An output path holds something the command must not replace (a one-line message)."""


@dataclass(frozen=True)
class OutputKind:
    """What a command writes: its name in messages and how to recognise such a file by its first bytes."""
    name: str
    looks_like: Callable[[bytes, str], bool]


def _zip_members(path):
    try:
        with zipfile.ZipFile(path) as archive:
            return archive.namelist()
    except (zipfile.BadZipFile, OSError, ValueError):
        return None


def _text_starts(*prefixes):
    return lambda head, path: head.lstrip().lower().startswith(tuple(p.lower() for p in prefixes))


PNG = OutputKind("PNG image", lambda head, path: head.startswith(b"\x89PNG\r\n\x1a\n"))
GIF = OutputKind("GIF image", lambda head, path: head.startswith(b"GIF8"))
PDF = OutputKind("PDF document", lambda head, path: head.startswith(b"%PDF"))
SVG = OutputKind("SVG image", lambda head, path: b"<svg" in head)
JPEG = OutputKind("JPEG image", lambda head, path: head.startswith(b"\xff\xd8\xff"))
DOT = OutputKind("Graphviz .dot source", _text_starts(b"digraph", b"strict digraph", b"//"))
HTML = OutputKind("HTML page", _text_starts(b"<!DOCTYPE html", b"<html"))
SAFETENSORS = OutputKind("safetensors file", lambda head, path: len(head) > 9 and head[8:9] == b"{")
EXPORTED_NPZ = OutputKind("dates-export .npz",
                          lambda head, path: "metadata.json.npy" in (_zip_members(path) or []))
KINDS = {"png": PNG, "gif": GIF, "pdf": PDF, "svg": SVG, "jpg": JPEG, "jpeg": JPEG, "dot": DOT, "html": HTML,
         "safetensors": SAFETENSORS, "npz": EXPORTED_NPZ}


def kind_of(path) -> OutputKind:
    """The kind a path's extension says it is; an extension no command writes by default (--out x.jpg)
    is a kind no existing file is taken for, so such a file is never replaced."""
    extension = os.path.splitext(os.fspath(path))[1].lstrip(".").lower()
    return KINDS.get(extension) or OutputKind("", lambda head, path: False)


def _what_it_is(path, head: bytes) -> str:
    """'a dates-train checkpoint', 'a training log' or '' (for the refusal message)."""
    members = _zip_members(path) if head.startswith(b"PK") else None
    if members and "meta.json.npy" in members:
        return "a dates-train checkpoint"
    first_line = head.split(b"\n", 1)[0]
    try:
        record = json.loads(first_line)
    except ValueError:
        return ""
    return "a training log" if isinstance(record, dict) and "step" in record else ""


def _special(mode) -> str:
    for test, name in ((stat.S_ISDIR, "a folder"), (stat.S_ISLNK, "a symlink"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def check_output(path, force=False, kind=None, option="--out"):
    """OutputRefused unless ``path`` is free, or (with ``force``) a file of the kind this command writes."""
    path = os.fspath(path)
    kind = kind or kind_of(path)
    try:
        mode = os.lstat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return               # free (a file in the way of its folder is named when the folder is made)
    except OSError as error:
        raise OutputRefused(f"cannot use {path} as the output: {error.strerror}; choose another {option}") from None
    if not stat.S_ISREG(mode):
        what = _special(mode)
        hint = " (give a file name inside it)" if what == "a folder" else ""
        raise OutputRefused(f"{path} is {what}, not a file this command wrote: it is never replaced{hint}; "
                            f"choose another {option}")
    try:
        with open(path, "rb") as f:
            head = f.read(4096)
    except OSError as error:
        raise OutputRefused(f"cannot read {path} to check what it is: {error.strerror}; "
                            f"choose another {option}") from None
    what = _what_it_is(path, head)
    if not what and not kind.name:
        raise OutputRefused(f"{path} exists, and a file of its kind cannot be told from one this command wrote, "
                            f"so it is never replaced: move it away or choose another {option}")
    if what or not kind.looks_like(head, path):
        raise OutputRefused(f"{path} is {what or 'not a ' + kind.name}, not a file this command wrote: it is never "
                            f"replaced; choose another {option}")
    if not force:
        raise OutputRefused(f"{path} already exists: replace it with --force, or choose another {option}")


def check_outputs(paths, force=False, option="--out"):
    """``check_output`` for every path a command is about to write (each of the kind its
    extension says), before it writes any."""
    for path in paths:
        check_output(path, force, option=option)


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def _sigterm_as_interrupt():
    """SIGTERM raises KeyboardInterrupt inside the block (so the temporary file is removed), in the
    main thread and only where SIGTERM would otherwise just kill the process."""
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        yield
        return

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


@contextlib.contextmanager
def atomic_output(path):
    """``with atomic_output(path) as tmp: write(tmp)``: the file appears at ``path`` whole or not at all.

    ``tmp`` is in the same folder and keeps ``path``'s extension (matplotlib and Pillow choose the
    format by it); it is fsynced, given the usual permissions and renamed over ``path``.
    """
    path = os.fspath(path)
    folder = os.path.dirname(path)
    make_output_folder(folder)
    tmp = os.path.join(folder, f".tmp-{os.getpid()}-{os.urandom(4).hex()}-{os.path.basename(path)}")
    with _sigterm_as_interrupt():
        try:
            os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
            yield tmp
            try:
                with open(tmp, "rb+") as f:
                    os.fsync(f.fileno())
                os.chmod(tmp, 0o666 & ~_umask())     # some writers (safetensors) create theirs 0600
                os.replace(tmp, path)
                fsync_folder(folder or ".")                 # the rename itself durable, as for checkpoints
            except OSError as error:                 # name the output, never the temporary file
                raise OSError(error.errno, f"cannot write {path}: {error.strerror}") from None
        finally:
            if os.path.lexists(tmp):
                os.remove(tmp)


def free_default(stem, extensions=("",), force=False, say=lambda line: print(line, flush=True)) -> str:
    """The stem a command writes to when no ``--out`` is given: ``stem``, or when a file of that
    name is already there (``stem + ext`` for any of ``extensions``: an earlier run's output), the
    first of ``stem-2``, ``stem-3`` ... that is free, said in one line. So running a page's commands
    again never meets an earlier picture, as a plain dates-train trains into runs/dates-2. With
    ``force`` the default name itself is replaced (``check_output`` still guards it); an explicit
    ``--out`` is never renumbered: an existing one needs ``--force``."""
    taken = lambda candidate: any(os.path.lexists(candidate + ext) for ext in extensions)     # noqa: E731
    if force or not taken(stem):
        return stem
    number = 2
    while taken(f"{stem}-{number}"):
        number += 1
    chosen = f"{stem}-{number}"
    say(f"{stem + extensions[0]} holds an earlier output, so this one goes to {chosen + extensions[0]} "
        "(--out to choose, --force to replace the first)")
    return chosen


def add_force_option(parser):
    """The ``--force`` every writing command shares."""
    parser.add_argument("--force", action="store_true",
                        help="replace an output this command wrote before (never a checkpoint, a log or a "
                             "file of another kind)")


def write_output(path, data, force=False, kind=None, option="--out"):
    """Check ``path`` and write ``data`` (str or bytes) to it atomically; returns the path."""
    check_output(path, force, kind, option)
    with atomic_output(path) as tmp:
        with open(tmp, "wb") as f:
            f.write(data.encode("utf-8") if isinstance(data, str) else data)
    return os.fspath(path)
