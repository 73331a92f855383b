"""The second half of each training step in a process of its own, so the halves share no GIL.

Two threads of one process take turns at the GIL for every op's Python: a half waits for the
other's bookkeeping, and on a VM whose idle CPU halts, each such wait also costs a wake-up
(~40 µs here). Measured on the 2-vCPU VM, the date model's step took 2 ms (7%) longer with the
second half on a thread than in a process (``docs/speed.md``, section 7).

A forked child already holds everything a half needs (the model, the task's data and code),
except the parameters' current values. Those, and the child's gradient bucket, live in one
anonymous shared mapping made before the fork: the parent's Adam writes the values in place
and the child reads them; the child writes its half's gradients and the parent adds them.
Each step the parent sends the half's rows through a pipe, runs its own half, then receives
(loss, tokens, extra). Both processes run the same code on the same arrays with one BLAS
thread, so a step is the same bits as on threads or on one worker.

Linux only (``fork``); elsewhere, or if the child dies, the second half runs on a thread.
The child ignores Ctrl-C (the parent finishes the step and saves) and ends when the parent
closes the pipe or exits. It has the trainer as it was at the fork: only the
parameters' values follow the parent.
"""
import mmap
import multiprocessing
import os
import signal
import sys
import traceback

import numpy as np

from transformer.parallel import data_parallel
from transformer.parallel.threads import blas_threads


ENV_VAR = "MINIGRAD_SECOND_HALF"    # "process" (the default where it can) or "thread"


def available() -> bool:
    """Whether a half may run in a forked process here (Linux, and not ``MINIGRAD_SECOND_HALF=thread``)."""
    setting = os.environ.get(ENV_VAR, "process").strip().lower()
    if setting not in ("process", "thread"):
        raise ValueError(f"{ENV_VAR} must be 'process' or 'thread', got {setting!r}")
    return setting == "process" and sys.platform.startswith("linux") and "fork" in multiprocessing.get_all_start_methods()


class HalfProcess:
    """A forked child running the second half of ``trainer``'s steps (see the module doc)."""

    def __init__(self, trainer):
        flat = trainer.flat_params
        nbytes = flat.size * flat.dtype.itemsize
        self._memory = mmap.mmap(-1, 2 * nbytes)     # MAP_SHARED | MAP_ANONYMOUS: seen by the child
        values = np.frombuffer(self._memory, flat.dtype, flat.size, 0)
        self.bucket = np.frombuffer(self._memory, flat.dtype, flat.size, nbytes)
        flat.relocate(values)                         # the parameters' values now in the shared mapping
        self._flat = flat
        context = multiprocessing.get_context("fork")
        self._pipe, child_end = context.Pipe()
        global _inherited   # the child gets these through the fork; no reference to the trainer is kept here
        _inherited = (trainer, child_end, self.bucket)
        try:
            self._process = context.Process(target=_serve, daemon=True, name="minigrad-second-half")
            self._process.start()
        finally:
            _inherited = None
        child_end.close()

    def usable(self) -> bool:
        """Whether the parameters are still the shared mapping's views (the child reads those)."""
        return self._flat.values_in_place()

    def halves(self, jobs, second_rows):
        """[the first half's result, the second's]: ``jobs[0]()`` here while the child runs the second
        half on ``second_rows``. Raises ``ChildGone`` if the child died (nothing is left in the pipe)."""
        self.submit(second_rows)
        try:
            first = jobs[0]()
        finally:
            second = self.result()        # collected even if the first failed: the pipe stays in step
        return [first, second]

    def submit(self, rows):
        """Start the half on ``rows`` (a tuple of arrays) in the child. Raises ``ChildGone`` if it died."""
        try:
            self._pipe.send(rows)
        except OSError:
            raise self._gone() from None

    def result(self):
        """The half's (loss, tokens, gradients, extra), as ``data_parallel.half_gradients`` returns
        them (the gradients: the shared bucket, or a tuple). Raises ``ChildGone`` if it died."""
        try:
            message = self._pipe.recv()
        except (EOFError, OSError):
            raise self._gone() from None
        if message[0] == "error":
            raise RuntimeError(f"the second half's process failed:\n{message[1]}")
        _, loss, tokens, grads, extra = message
        return loss, tokens, self.bucket if grads is None else grads, extra

    def _gone(self):
        self._process.join(timeout=1)
        return ChildGone(f"the second half's process ended (exit code {self._process.exitcode})")

    def close(self):
        """Tell the child to end and wait for it (briefly; then it is terminated)."""
        try:
            self._pipe.send(None)
        except OSError:
            pass
        self._process.join(timeout=5)
        if self._process.is_alive():
            self._process.terminate()
            self._process.join()
        self._pipe.close()


class ChildGone(RuntimeError):
    """The second half's process is no longer there."""


_inherited = None   # (trainer, pipe end, bucket) while a child is being forked


def _serve():
    """The child's loop: one half per message of rows, until None or the pipe closes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)      # Ctrl-C is for the parent: it saves the run, then
    signal.signal(signal.SIGTERM, signal.SIG_DFL)     # closes the pipe; SIGTERM ends the child (not the
                                                      # parent's handler, inherited: multiprocessing's exit)
    trainer, pipe, bucket = _inherited
    flat = trainer.flat_params
    with blas_threads(1):
        while True:
            try:
                rows = pipe.recv()
            except (EOFError, OSError):
                return
            if rows is None:
                return
            try:
                loss, tokens, grads, extra = data_parallel.half_gradients(
                    flat, lambda: trainer.rows_loss(*rows), bucket)
                shared = grads is bucket
                pipe.send(("ok", loss, tokens, None if shared else tuple(
                    None if g is None else g.data for g in grads), extra))
            except Exception:
                pipe.send(("error", traceback.format_exc()))
