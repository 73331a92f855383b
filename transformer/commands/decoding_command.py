"""What the commands that decode share (dates-translate, next-word-complete): stdin read a line
at a time and handled in batches as it comes, and the kernels decoding runs on."""
import sys

from transformer.commands.console import fail

STDIN_BATCH = 256           # dates decoded together when reading stdin (memory stays bounded)
MAX_LINE = 100              # longest stdin line looked at (a date is 10 characters)


def decoding_kernels():
    """The kernel backend for a command that only decodes: the numpy twins.

    Decoding runs on small arrays (one new position per step), where the kernels are
    no faster (README, speed table), while loading them from Numba's cache costs ~0.3 s
    of start-up and compiling them, on a cold cache, seconds.
    """
    from minigrad import kernels
    return kernels.use_backend("numpy")


def stdin_lines(stream, max_line: int = MAX_LINE, too_long: str = f"longer than {MAX_LINE} characters, not a date"):
    """(line number, text or None, problem or None) for each line of ``stream``, read a line at
    a time whatever its size: a line longer than ``max_line`` (binary garbage, /dev/zero) is
    skipped in chunks and reported as ``too_long``, a line that is not UTF-8 is reported."""
    binary = getattr(stream, "buffer", stream)
    number = 0
    while True:
        line = binary.readline(max_line + 1)
        if not line:
            return
        number += 1
        newline = b"\n" if isinstance(line, bytes) else "\n"
        if len(line) > max_line and not line.endswith(newline):
            while line and not line.endswith(newline):      # skip the rest of the line
                line = binary.readline(1 << 16)
            yield number, None, too_long
            continue
        if isinstance(line, bytes):
            try:
                line = line.decode("utf-8")
            except UnicodeDecodeError:
                yield number, None, "not UTF-8 text, not a date"
                continue
        yield number, line.strip(), None




def read_stdin(handle, check, error_type, what: str, batch_size: int = STDIN_BATCH, max_line: int = MAX_LINE,
               too_long: str = f"longer than {MAX_LINE} characters, not a date") -> int:
    """Read stdin's lines and pass them to ``handle`` in batches as they come (one at a time on a
    terminal); a line ``check`` refuses (raising ``error_type``), or longer than ``max_line``
    (``too_long`` says so), gets one error line on stderr and makes the exit status 2, the others
    are still handled."""
    batch, bad, seen = [], 0, 0
    interactive = sys.stdin.isatty()
    for number, text, problem in stdin_lines(sys.stdin, max_line, too_long):
        if problem is None and not text:
            continue
        seen += 1
        if problem is None:
            try:
                check(text)
            except error_type as error:
                problem = str(error)
        if problem is not None:
            bad += 1
            print(f"error: stdin line {number}: {problem}", file=sys.stderr, flush=True)
            continue
        batch.append(text)
        if len(batch) == batch_size or interactive:
            handle(batch)
            batch = []
    if batch:
        handle(batch)
    if not seen:
        return fail(f"no {what} given: pass them as arguments or one per line on stdin")
    return 2 if bad else 0
