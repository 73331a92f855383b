"""Ctrl-C and SIGTERM during training: finish the step, save, stop - never lose the work.

Inside ``with GracefulInterrupt() as interrupt:`` the first SIGINT or SIGTERM only sets
``interrupt.requested``; the training loop checks it after each step, saves a checkpoint of
that last completed step and stops (``training.session.TrainingInterrupted``). Two cases
still raise ``KeyboardInterrupt`` at once: before ``interrupt.armed`` is set (no step
finished yet, so there is nothing to save) and on a second signal (the user insists; a
checkpoint being written is then abandoned and the previous one stays intact, because saves
are atomic). The previous handlers come back on exit. The loop gets its interrupt from the
run's context (``data_parallel.BatchPieces.running``); the ranks of an MPI job agree on
theirs (``ranks.AgreedInterrupt``).

``request_stop()`` asks the same of the running loop from anywhere in the process: the
console scripts call it when stdout is lost (``dates-train ... | head -1``), so a closed
stdout saves the last completed step as Ctrl-C does instead of ending the run unsaved.
"""
import signal
import threading

_active = []      # the GracefulInterrupt blocks being run, innermost last


def request_stop() -> bool:
    """Ask the running training loop to save its last completed step and stop, as Ctrl-C
    does. False when no loop has a step to save (none runs, or none finished a step yet)."""
    if not _active or not _active[-1].armed:
        return False
    _active[-1].requested = True
    return True


class GracefulInterrupt:
    SIGNALS = ("SIGINT", "SIGTERM")

    def __init__(self):
        self.requested = False
        self.armed = False
        self._previous = {}

    def _handle(self, signum, frame):
        if self.requested or not self.armed:
            raise KeyboardInterrupt
        self.requested = True

    def __enter__(self):
        _active.append(self)
        if threading.current_thread() is threading.main_thread():   # only there can handlers be set
            for name in self.SIGNALS:
                number = getattr(signal, name, None)
                if number is not None:
                    self._previous[number] = signal.signal(number, self._handle)
        return self

    def __exit__(self, *exc):
        if self in _active:
            _active.remove(self)
        for number, handler in self._previous.items():
            signal.signal(number, handler)
        self._previous.clear()
