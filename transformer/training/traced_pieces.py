"""A piece of a training batch run as a recorded program: what the seam calls instead of
``Trainer.piece_backward`` unless ``--eager`` is asked for. A learner can skip this file.

The piece's forward, loss and ``loss.backward()`` (the task's ``batch_forward``, then
``backward()``: what ``piece_backward`` does) are traced with ``minigrad.trace``: the first call
of each shape records a tape, the second replays it checked (the Python runs, each op is compared
with its line) and, once that verified the tape, later calls replay it purely, as a flat list of
the recorded forwards and backward rules (docs/tracing.md). Losses, gradients and weights are
the eager run's, bit for bit (tests/test_traced_training.py). What is counted from the logits
(the tokens, the rows exactly right) is counted outside the tape, by the task's ``batch_outcome``.

Each worker thread has its own trace, sharing the first thread's tapes (the seam runs pieces on
one or two threads, each piece into its own gradient bucket; a replay puts the gradients there as
eager's backward does).
"""
import threading

import minigrad


class TracedPieceBackward:
    """``trainer.piece_backward`` as a traced program: called with a piece, returns the same
    (loss, tokens, per-row outcome)."""

    def __init__(self, trainer):
        self.trainer = trainer
        self._threads = threading.local()      # this thread's Traced, made on its first piece
        self._first = None                     # the first thread's, whose tapes the others share
        self._view = _TaskView(trainer)
        self.never_pure = None                 # why the tape can never replay purely, once a replay said so

    def __call__(self, piece: tuple):
        if not self._view.current(self.trainer):    # a new model or config: a new view breaks the guards
            self._view = _TaskView(self.trainer)
        if self.never_pure:
            return self.trainer.piece_backward(piece)
        traced = self.traced()
        loss, logits = traced(*piece)
        if traced.last == "replayed" and traced.last_tape.refused:
            # checked replays cost what eager does and more: once a tape can never run purely (a
            # dropout mask built outside an op, say), the pieces run eagerly, with the same bits
            self.never_pure = traced.last_tape.refused
        return (loss, *self.trainer.batch_outcome(piece, logits.data))

    def traced(self):
        """This thread's traced piece (``.last`` says how its last call ran, ``.code`` prints it).
        A second thread shares the first's tapes: its first piece replays purely, so the step
        that first tries two workers is not slowed by a recording (which the thread policy would
        time as the cost of two workers)."""
        traced = getattr(self._threads, "traced", None)
        if traced is None:
            if self._first is None:
                traced = self._first = minigrad.trace(self._forward_backward,
                                                      names=self.trainer.model.named_parameters())
            else:
                traced = self._first.for_another_thread()
            self._threads.traced = traced
        return traced

    def _forward_backward(self, *piece):
        loss, logits = type(self.trainer).batch_forward(self._view, piece)
        loss.backward()
        return loss, logits



class _TaskView:
    """What ``batch_forward`` reads of its trainer: the model and the run's config. A trace
    guards every attribute of an object whose method ran (a pure replay skips the Python that
    read them), and the trainer's own change every step (its step count, its clock)."""

    def __init__(self, trainer):
        self.model, self.config = trainer.model, trainer.config

    def current(self, trainer) -> bool:
        return self.model is trainer.model and self.config is trainer.config

    def __getattr__(self, name):
        raise AttributeError(f"a traced batch_forward reads only self.model and self.config, not self.{name}; "
                             "read it outside the traced piece (or train with --eager)")
