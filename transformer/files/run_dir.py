"""The folder a training run writes to: checks before training, a lock, the log on resume.

One run owns one folder (``model.npz``, ``train_log.jsonl``). Nothing the user made is
overwritten by accident:
  - a new run into a folder that already holds a checkpoint, or a training log without one,
    refuses (``--force`` replaces them, ``--resume`` continues a checkpoint);
  - a lock file holding the writer's pid (and its command, which a refused run names) keeps a
    second run out of the folder while the first is alive; a lock whose pid is gone (a killed
    run) is stale and is taken over;
  - temporary checkpoint files left by a killed save (``.tmp-*.npz``) are removed;
  - on resume the log is cut back to the checkpoint's step, so it never holds a step twice.
"""
import fcntl
import glob
import json
import os
import re
import stat
import sys
import time

from transformer.files.output_file import atomic_output
from transformer.files.output_folder import make_output_folder
from transformer.parallel.processes import pid_alive

CHECKPOINT_NAME = "model.npz"
LOG_NAME = "train_log.jsonl"
LOCK_NAME = ".training.lock"     # one name for every trainer: a dates and a next-word run exclude each other
DEFAULT_RUN = os.path.join("runs", "dates")     # a plain dates-train's folder; then runs/dates-2, -3 ...


class RunFolderError(Exception):
    """The output folder cannot be used (one-line message that says what to do)."""


def check_writable_folder(folder: str):
    """Create ``folder`` if needed; RunFolderError unless it is a folder we can write to."""
    if os.path.exists(folder) and not os.path.isdir(folder):
        raise RunFolderError(f"--out {folder} is a file, not a folder: choose a folder for the checkpoint and log")
    try:
        make_output_folder(folder)      # names a file in the way, as the viz commands do
    except ValueError as error:
        raise RunFolderError(str(error)) from None
    if not os.access(folder, os.W_OK | os.X_OK):
        raise RunFolderError(f"cannot write to the output folder {folder} (permission denied); choose another --out")
    checkpoint = os.path.join(folder, CHECKPOINT_NAME)
    if os.path.isdir(checkpoint):
        raise RunFolderError(f"{checkpoint} is a folder, so no checkpoint can be written there; "
                             "move it away or choose another --out")


def refuse_to_overwrite(folder: str):
    """A new run must not replace a checkpoint or a training log the user already has."""
    checkpoint = os.path.join(folder, CHECKPOINT_NAME)
    if os.path.exists(checkpoint):
        raise RunFolderError(f"{folder} already holds a checkpoint ({checkpoint}): continue it with "
                             f"--resume {checkpoint}, replace it with --force, or choose another --out")
    log = os.path.join(folder, LOG_NAME)
    if os.path.lexists(log):        # its checkpoint was moved away: the log is still someone's record
        raise RunFolderError(f"{folder} already holds a training log ({log}) but no checkpoint: move the log "
                             "away, replace it with --force, or choose another --out")


def run_folders(base: str = DEFAULT_RUN) -> list:
    """``base`` and its numbered siblings ``base-2``, ``base-3`` ... that exist, in number order."""
    found = [(1, base)] if os.path.isdir(base) else []
    pattern = re.compile(re.escape(os.path.basename(base)) + r"-([0-9]+)$")
    parent = os.path.dirname(base) or "."
    try:
        names = os.listdir(parent)
    except OSError:
        names = []
    for name in names:
        match = pattern.match(name)
        if match and int(match.group(1)) >= 2 and os.path.isdir(os.path.join(parent, name)):
            found.append((int(match.group(1)), os.path.join(os.path.dirname(base), name)))
    return [folder for _, folder in sorted(found)]


def _live_lock(folder: str) -> bool:
    owner = RunLock(folder)._owner()
    return owner is not None and (owner == os.getpid() or pid_alive(owner))


def holds_a_run(folder: str) -> bool:
    """A checkpoint, a training log or a live run's lock: a new run must not start there unasked."""
    return any(os.path.lexists(os.path.join(folder, name)) for name in (CHECKPOINT_NAME, LOG_NAME)) \
        or _live_lock(folder)


def next_free_run_folder(base: str = DEFAULT_RUN) -> str:
    """``base`` if no run is in it, else the first of ``base-2``, ``base-3`` ... that holds none."""
    if not holds_a_run(base):
        return base
    number = 2
    while holds_a_run(f"{base}-{number}") or (os.path.lexists(f"{base}-{number}")
                                             and not os.path.isdir(f"{base}-{number}")):
        number += 1
    return f"{base}-{number}"


def finished_checkpoints(base: str = DEFAULT_RUN) -> list:
    """The checkpoints of ``base`` and its numbered siblings whose run is not running now, newest
    (last written) first."""
    found = [os.path.join(folder, CHECKPOINT_NAME) for folder in run_folders(base) if not _live_lock(folder)]
    found = [path for path in found if os.path.isfile(path)]
    return sorted(found, key=lambda path: os.stat(path).st_mtime, reverse=True)


def default_checkpoint(base: str = DEFAULT_RUN, say=None) -> str:
    """The checkpoint a command uses when none is named: the newest finished run's under ``base``
    (``runs/dates``, ``runs/dates-2`` ...). When there are several, ``say`` (default: stderr) gets one
    line naming the one used; with none, the path a plain dates-train writes (for the error message)."""
    found = finished_checkpoints(base)
    if not found:
        return os.path.join(base, CHECKPOINT_NAME)
    if len(found) > 1:
        say = say or (lambda line: print(line, file=sys.stderr))
        say(f"note: using {found[0]}, the newest of {len(found)} trained runs "
            f"({', '.join(os.path.dirname(path) for path in found[1:])} older); --checkpoint to choose")
    return found[0]


def remove_stale_temporaries(folder: str):
    """Temporary checkpoints (``.tmp-*.npz``) left behind by a save that was killed."""
    for path in glob.glob(os.path.join(glob.escape(folder), ".tmp-*.npz")):
        try:
            os.remove(path)
        except OSError:
            pass


_BEING_WRITTEN = "being written"


def _holder(text: str) -> str:
    """The command a lock's text names after its pid, else "training run"."""
    parts = text.split(maxsplit=1)
    name = parts[1].strip() if len(parts) == 2 else ""
    return name if re.fullmatch(r"[a-z][a-z-]{0,40}", name) else "training run"


class RunLock:
    """``with RunLock(folder):`` - at most one live training run per folder.

    The lock file holds the owner's pid. It is created with O_EXCL (atomic); a lock whose
    pid is no longer alive is left over from a killed run and is taken over. The takeover
    is atomic too: it happens under ``flock`` on the lock file itself, rewriting it in place
    (never removing it), so of two runs that find the same stale lock at the same instant,
    the second to get the ``flock`` sees the first one's live pid and refuses.
    """

    def __init__(self, folder: str, command: str = None):
        self.path = os.path.join(folder, LOCK_NAME)
        self.command = command      # written beside the pid, so a refused run can name its holder
        self.held = False

    def acquire(self):
        for _ in range(20):
            if os.path.isdir(self.path):
                raise RunFolderError(f"the lock {self.path} is a folder, so no run can lock "
                                     f"{os.path.dirname(self.path)}: remove that folder or choose another --out")
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                if self._take_over_if_stale():
                    return self
                continue                 # it was released or replaced meanwhile: try again
            with os.fdopen(fd, "w") as f:
                fcntl.flock(f, fcntl.LOCK_EX)       # a contender reads the pid only once it is written
                f.write(self._content())
            self.held = True
            return self
        raise RunFolderError(f"could not take the lock {self.path}; remove it if no run is using the folder")

    def _take_over_if_stale(self) -> bool:
        """True when the lock was stale and is now ours; RunFolderError when a live run holds it;
        False when the file went away or was replaced while we looked (the caller tries again)."""
        try:
            fd = os.open(self.path, os.O_RDWR)
        except (FileNotFoundError, IsADirectoryError):
            return False
        with os.fdopen(fd, "r+") as f:
            fcntl.flock(f, fcntl.LOCK_EX)          # one contender at a time; released when f closes
            try:
                if os.stat(self.path).st_ino != os.fstat(fd).st_ino:
                    return False
            except FileNotFoundError:
                return False
            text = f.read()
            owner = self._parse(text)
            if owner == _BEING_WRITTEN or (owner is not None and owner > 0 and owner != os.getpid()
                                           and pid_alive(owner)):
                pid = "?" if owner == _BEING_WRITTEN else owner
                raise RunFolderError(f"another {_holder(text)} (pid {pid}) is writing to "
                                     f"{os.path.dirname(self.path)}; wait for it to finish or choose another --out")
            f.seek(0)                               # stale (its run was killed): ours now
            f.truncate()
            f.write(self._content())
            f.flush()
        self.held = True
        return True

    def _owner(self):
        try:
            with open(self.path) as f:
                return self._parse(f.read())
        except OSError:
            return None

    def _content(self) -> str:
        return f"{os.getpid()} {self.command}\n" if self.command else f"{os.getpid()}\n"

    def _parse(self, text):
        """The lock's pid ("PID COMMAND", or "PID" alone as older runs wrote it)."""
        text = text.strip()
        if not text:                 # being written this instant by its creator: treat as held
            return _BEING_WRITTEN if self._young() else None
        try:
            return int(text.split()[0])
        except ValueError:
            return None

    def _young(self) -> bool:
        try:
            return time.time() - os.stat(self.path).st_mtime < 5.0
        except OSError:
            return False

    def release(self):
        if self.held and self._owner() == os.getpid():   # never remove another run's lock
            try:
                os.remove(self.path)
            except OSError:
                pass
        self.held = False

    def __enter__(self):
        return self.acquire()

    def __exit__(self, *exc):
        self.release()


MAX_LOG_LINE = 1 << 16          # a log record is ~300 bytes; a longer line is not one of ours


def log_lines(path: str):
    """(line number, record or None, problem or None) for each line of a training log, read a
    line at a time: a FIFO, a device (/dev/zero) or a folder is refused before reading
    (RunFolderError), and a line that is too long, not UTF-8, nested absurdly deep or not
    a JSON object with an integer 'step' is reported, not raised."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)     # a FIFO must not block the open
    except FileNotFoundError:
        raise
    except OSError as error:
        raise RunFolderError(f"cannot read the training log {path}: {error.strerror or error}") from None
    with open(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise RunFolderError(f"the training log {path} is not a regular file (a FIFO, device or folder): "
                                 "give the train_log.jsonl that dates-train wrote")
        for number, line in enumerate(iter(lambda: f.readline(MAX_LOG_LINE + 1), b""), 1):
            if len(line) > MAX_LOG_LINE:
                while line and not line.endswith(b"\n"):    # skip the rest of the line
                    line = f.readline(MAX_LOG_LINE)
                yield number, None, f"longer than {MAX_LOG_LINE} bytes"
                continue
            if not line.strip():
                continue
            try:
                record = json.loads(line.decode("utf-8"))
            except UnicodeDecodeError:
                yield number, None, "not UTF-8 text"
                continue
            except (ValueError, RecursionError):
                yield number, None, "not JSON"
                continue
            if not isinstance(record, dict) or type(record.get("step")) is not int:
                yield number, None, "not a JSON object with an integer 'step'"
                continue
            yield number, record, None


def read_log(path: str) -> list:
    """The records of a training log; a line that is not one (the torn last line of a killed
    run, or a damaged one) is left out."""
    try:
        return [record for _, record, problem in log_lines(path) if problem is None]
    except FileNotFoundError:
        return []


def cut_log(source: str, destination: str, step: int):
    """Write the records of ``source`` up to ``step`` to ``destination`` (atomically; the two
    may be the same file): a resumed run then appends without repeating a step."""
    kept = [r for r in read_log(source) if r["step"] <= step]
    with atomic_output(destination) as tmp, open(tmp, "w") as f:
        for record in kept:
            f.write(json.dumps(record) + "\n")
