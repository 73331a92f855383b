"""What every console script shares: one-line argument errors, and surviving its surroundings.

``console_script`` wraps each command's ``main(argv) -> exit code``:

- stdout's reader leaves (``| head -1``) or stdout cannot be written (``>/dev/full``, ``>&-``):
  the command stops and exits with ``EXIT_OUTPUT_LOST`` (141, what a shell reports for ``yes``
  in ``yes | head -1``), with one line on stderr unless the reader simply left. A training run
  (``dates-train ... | head -1``) is not lost: the loss of stdout asks the run to stop as Ctrl-C
  does (``interrupt.request_stop``), so it saves its last completed step and says how to resume;
- stderr closed or full (``2>&-``, ``2>/dev/full``): messages are dropped, the work goes on and
  the exit code still tells what happened;
- Ctrl-C that the command does not handle itself: one line and exit 130, never a traceback;
- a Python warning: one ``warning: ...`` line (``_one_line_warning``), not Python's two.

``Parser`` is argparse with the project's one-line errors (exit code 2, as argparse's own),
which also checks ``MINIGRAD_KERNELS`` and ``MINIGRAD_BLAS_THREADS`` before any work.
"""
import argparse
import contextlib
import functools
import os
import signal
import sys
import threading
import warnings

EXIT_USAGE = 2              # a bad argument, date, checkpoint or folder (argparse's code too)
EXIT_INTERRUPTED = 130      # 128 + SIGINT, what a shell reports for Ctrl-C
EXIT_OUTPUT_LOST = 141      # 128 + SIGPIPE, what `yes | head -1` reports for `yes`


def fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return EXIT_USAGE


EXIT_CODES = (f"Exit codes: 0 done, {EXIT_USAGE} a bad argument, input, checkpoint or folder (one line on "
              f"stderr), {EXIT_INTERRUPTED} Ctrl-C, {EXIT_OUTPUT_LOST} stdout closed or full.")


class HelpWithDefaults(argparse.RawDescriptionHelpFormatter):
    """argparse's ArgumentDefaultsHelpFormatter, except that a default the help already states,
    ``None`` or a switch's ``False`` is not repeated; descriptions keep their paragraphs."""

    def _get_help_string(self, action):
        text = action.help or ""
        if "default" in text or action.default is None or action.default is False \
                or action.default == argparse.SUPPRESS:
            return text
        return text + " (default: %(default)s)"


class Parser(argparse.ArgumentParser):
    """argparse with the project's one-line errors (exit code 2, as argparse's own), every
    option's default in its help; the exit codes are the --help's epilog unless the command
    gives its own."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("epilog", EXIT_CODES)
        kwargs.setdefault("formatter_class", HelpWithDefaults)
        super().__init__(*args, **kwargs)

    def error(self, message):
        self.exit(EXIT_USAGE, f"error: {message} (see {self.prog} --help)\n")

    def parse_args(self, args=None, namespace=None):
        parsed = super().parse_args(args, namespace)
        from minigrad.accelerated import backend_setting
        from transformer.parallel.threads import blas_setting
        try:
            backend_setting()          # a bad MINIGRAD_KERNELS: one line now, not a traceback at the first op
            setting = blas_setting()   # a bad MINIGRAD_BLAS_THREADS: one line now, not a traceback mid-run
        except ValueError as error:
            self.exit(EXIT_USAGE, f"error: {error}\n")
        cores = os.cpu_count() or 1
        if setting != "auto" and setting > cores:
            print(f"note: MINIGRAD_BLAS_THREADS={setting} is more than this machine's {cores} cores: BLAS "
                  "threads will wait for each other and steps can be several times slower", file=sys.stderr)
        return parsed


def path_argument(text: str) -> str:
    """argparse type for a file or folder option: an empty string is refused (it would mean
    'no resume', 'the default model' or hidden files named '.svg' in the current folder)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("must not be empty: give a path")
    return text


class OutputLost(Exception):
    """stdout cannot be written any more (not an OSError, so no command's own OSError handler
    mistakes it for a problem with its files)."""

    def __init__(self, error: OSError):
        super().__init__(error.strerror or str(error))
        self.error = error


class _GuardedOutput:
    """A text stream (stdout or stderr) whose failures are caught where they happen.

    On the first failed write or flush the file descriptor is pointed at /dev/null (so
    Python's own flush at exit cannot fail again) and ``on_lost(error)`` decides what
    follows; later writes go nowhere."""

    def __init__(self, stream, on_lost):
        self._stream, self._on_lost, self.error = stream, on_lost, None

    def write(self, text):
        if self.error is None:
            try:
                return self._stream.write(text)
            except OSError as error:
                self._lost(error)
        return len(text)

    def writelines(self, lines):
        for line in lines:
            self.write(line)

    def flush(self):
        if self.error is None:
            try:
                self._stream.flush()
            except OSError as error:
                self._lost(error)

    def _lost(self, error):
        self.error = error
        try:
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, self._stream.fileno())
            os.close(null)
            self._stream.flush()          # what was buffered now goes to /dev/null
        except (OSError, ValueError, AttributeError):
            pass                          # not a real file (a test's capture): nothing to redirect
        self._on_lost(error)

    def __getattr__(self, name):          # encoding, isatty, fileno ... as the real stream
        return getattr(self._stream, name)


def _stdout_lost(error):
    from transformer.parallel.interrupt import request_stop
    if not request_stop():               # a training run saves its last step first, then stops
        raise OutputLost(error)


def _say(message):
    """One line on stderr, if stderr still works."""
    try:
        print(message, file=sys.stderr, flush=True)
    except (OSError, ValueError, AttributeError):
        pass


def console_script(main):
    """The wrapper every console script's main goes through (see the module's docstring)."""
    @functools.wraps(main)
    def wrapper(argv=None):
        stdout, stderr = sys.stdout, sys.stderr
        guarded_out = None
        try:
            if stderr is None:                     # 2>&-: messages go nowhere, not to stdout
                sys.stderr = open(os.devnull, "w")
            else:
                sys.stderr = _GuardedOutput(stderr, lambda error: None)
            if stdout is None:                     # >&-
                _say("error: stdout is closed, so nothing could be printed: run without >&-")
                return EXIT_OUTPUT_LOST
            sys.stdout = guarded_out = _GuardedOutput(stdout, _stdout_lost)
            with warnings.catch_warnings():        # Python's own state comes back after the command
                warnings.showwarning = _one_line_warning
                code = main(argv)
            sys.stdout.flush()
            if guarded_out.error is not None:      # lost while a training run was saving its last step
                return _report_lost(guarded_out.error)
            return code
        except OutputLost as lost:
            return _report_lost(lost.error)
        except KeyboardInterrupt:
            _say("interrupted")
            return EXIT_INTERRUPTED
        finally:
            if sys.stderr is not stderr and not isinstance(sys.stderr, _GuardedOutput):
                sys.stderr.close()                 # the /dev/null opened for a closed stderr
            sys.stdout, sys.stderr = stdout, stderr
    return wrapper


def _one_line_warning(message, category, filename, lineno, file=None, line=None):
    """A Python warning, as a user reads it: ``warning: ...`` in one line, without Python's file
    path, category and source line."""
    _say("warning: " + " ".join(str(message).split()))


@contextlib.contextmanager
def sigterm_as_ctrl_c():
    """Inside the block SIGTERM raises KeyboardInterrupt, as Ctrl-C does, so a command that
    handles Ctrl-C (one line, exit 130) handles SIGTERM the same way; the previous handler
    comes back after it. Signal handlers belong to the main thread: elsewhere, nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum, frame):
        raise KeyboardInterrupt
    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _report_lost(error) -> int:
    if not isinstance(error, BrokenPipeError):     # the reader left (`| head`): as quiet as `yes | head`
        _say(f"error: cannot write to stdout ({error.strerror or error})")
    return EXIT_OUTPUT_LOST
