"""Ctrl-C and SIGTERM during training: finish the step, save, stop - never lose the work.

Inside ``with GracefulInterrupt() as interrupt:`` the first SIGINT or SIGTERM only sets
``interrupt.requested``; the training loop checks it after each step, saves a checkpoint of
that last completed step and stops. Two cases still raise ``KeyboardInterrupt`` at once:
before ``interrupt.armed`` is set (no step finished yet, so there is nothing to save) and
on a second signal (the user insists; a checkpoint being written is then abandoned and the
previous one stays intact, because saves are atomic). The previous handlers come back on exit.
"""
import signal
import threading


class TrainingInterrupted(KeyboardInterrupt):
    """Raised by ``Trainer.run`` after it saved the last completed step."""

    def __init__(self, step: int, checkpoint: str):
        super().__init__(f"interrupted at step {step}; checkpoint saved to {checkpoint}")
        self.step, self.checkpoint = step, checkpoint


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
        if threading.current_thread() is threading.main_thread():   # only there can handlers be set
            for name in self.SIGNALS:
                number = getattr(signal, name, None)
                if number is not None:
                    self._previous[number] = signal.signal(number, self._handle)
        return self

    def __exit__(self, *exc):
        for number, handler in self._previous.items():
            signal.signal(number, handler)
        self._previous.clear()
