"""Data-parallel training steps: each batch cut into fixed pieces, shared out among workers.

The lesson of data-parallel training in one file. A step's loss is a mean over the
batch's counted tokens, so its gradient is a sum over the tokens: each piece runs its
own forward and backward (its loss a mean over its own tokens), and the pieces'
gradients, each weighted by its share of the WHOLE batch's tokens, added give the
step's gradient, up to the order in which floats were summed (for products over
positions: per piece, then across pieces).

What keeps the run repeatable: the cut depends on the batch size and the run's piece
count only (``TrainConfig.pieces``, 2 by default: rows ``[0, n // 2)`` and ``[n // 2, n)``),
each piece runs the same ops on the same numbers whoever runs it, BLAS has one thread,
and the pieces' gradients are added in a fixed order (first + second + ...). So
``workers`` (one: the pieces one after the other on the calling thread; two: side by
side, the second half of them on a persistent helper thread) changes the speed, never a
bit: a run switching worker counts mid-way, or on a busy machine, equals one that never
switches. Nor do the processes of an MPI job, which share the pieces out the same way
(``ranks.py``). Two pieces on threads overlap because numpy releases the GIL inside BLAS
and the Numba kernels are compiled ``nogil`` (``minigrad/kernels/jit.py``); the Python
between them (the engine's bookkeeping) still takes turns. The piece count is part of the
arithmetic: another count gives other bits, and each piece pays the engine's per-op Python
once more (4 pieces cost about 15% more a step than 2: docs/mpi.md).

``BatchPieces`` is the seam the training loop sees, once: its run is one ``with
gradients.running():`` (threads, memory, Ctrl-C), and its step calls ``gradients(batch)``, which
runs the trainer's ``piece_backward(piece)`` on each piece (the task's forward and loss, then
``loss.backward()``: what a single process does with a whole batch) and leaves in every
parameter's ``.grad`` what the whole batch's ``loss.backward()`` would, up to the order of the
sums. The loop knows nothing of pieces, workers, threads or ranks, and the task only scores a
batch (``batch_loss``: each piece is a batch to it); ``ranks.step_gradients`` makes the seam
this process needs.

Not shared between the pieces: each builds its own graph, and its ``loss.backward()`` writes
its gradients into a flat array of its own (a "bucket", what the ranks of an MPI job send each
other; ``minigrad.flat.FlatParameters.gradients_into``, which keeps them out of ``.grad`` on
that thread) so two pieces can run at once. The weighted sum is then a few passes over flat
arrays instead of 200 small calls. Dropout draws from one generator, in an order two threads
would not fix: a model with dropout runs its pieces one after the other, whatever ``workers``
says.
"""
import contextlib
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

import numpy as np

import minigrad
from minigrad import observers
from minigrad.flat import FlatParameters
from transformer.parallel.memory import freed_memory_kept
from transformer.parallel.threads import TrainingThreads, blas_threads
from transformer.parallel.interrupt import GracefulInterrupt

PIECES = 2          # the default cut (TrainConfig.pieces): part of the arithmetic, not of the machine

_helper = None      # the second worker, made on first use and kept (a thread costs ~100 µs to start)


def second_worker() -> ThreadPoolExecutor:
    """The persistent helper thread that runs the second half of the pieces (made on first use)."""
    global _helper
    if _helper is None:
        _helper = ThreadPoolExecutor(max_workers=1, thread_name_prefix="minigrad-half")
    return _helper


def pieces(batch_size: int, count: int = PIECES):
    """The fixed cut of a batch into ``count`` pieces of rows: [(lo, hi), ...], an empty piece
    ``lo == hi`` kept in its place (a batch of fewer rows than pieces), so piece i is the same
    rows whoever runs it."""
    return [(batch_size * i // count, batch_size * (i + 1) // count) for i in range(count)]


def run_pieces(jobs, workers: int):
    """``[job() for job in jobs]``: one after the other (``workers`` 1) or the second half of the list
    on the helper thread while the caller runs the first (``workers`` 2). The results come back in the
    jobs' order."""
    if workers not in (1, 2):
        raise ValueError(f"data-parallel steps run on 1 or 2 workers, got {workers!r}")
    if workers == 1 or len(jobs) < 2:
        return [job() for job in jobs]
    mine = len(jobs) // 2
    handed = second_worker().submit(lambda: [job() for job in jobs[mine:]])
    first = [job() for job in jobs[:mine]]
    return first + handed.result()


def piece_gradients(params: FlatParameters, piece_backward, piece, bucket: np.ndarray):
    """Run ``piece_backward(piece)`` on this thread (the forward, the loss and ``loss.backward()``
    of one piece; it returns (the mean loss Tensor, the tokens it averages over, extra)), its
    gradients landing in ``bucket`` (a flat array of ``params``, one per piece) and in no ``.grad``:
    two pieces may run at once. Returns (the loss as a float, tokens, the gradients, extra): the
    bucket when the piece reached every parameter, else one view of it per parameter (None for a
    parameter the piece did not use)."""
    with minigrad.enable_grad(), params.gradients_into(bucket) as received:   # grad mode is per thread
        loss, tokens, extra = piece_backward(piece)
    grads = bucket if all(received) else tuple(view if got else None
                                                for view, got in zip(params.views(bucket), received))
    return float(loss.item()), tokens, grads, extra


def combine(params, results, workers: int = 1):
    """The whole batch's mean loss, and ``.grad`` of every parameter, from the pieces' results.

    Each piece's mean counts for its share of the batch's tokens; the shares and the
    gradients are added in the pieces' fixed order (a parameter no piece used keeps no
    gradient, as after ``backward()``). With flat buckets, ``workers`` 2 adds the two ends of
    the flat arrays on two threads (elementwise: the same bits). Returns (loss, tokens)."""
    tokens = sum(result[1] for result in results)
    shares = [result[1] / tokens if tokens else 0.0 for result in results]
    loss = sum(share * piece_loss for share, (piece_loss, _, _, _) in zip(shares, results) if share)
    if isinstance(params, FlatParameters) and all(isinstance(grads, np.ndarray) for _, _, grads, _ in results):
        _add_buckets(params, shares, [grads for _, _, grads, _ in results], workers)
        return loss, tokens
    results = [(*rest, params.views(grads) if isinstance(grads, np.ndarray) else grads, extra)
               for *rest, grads, extra in results]
    for i, p in enumerate(params):
        total = None
        for share, (_, _, grads, _) in zip(shares, results):
            if grads[i] is not None:
                part = _array(grads[i]) * grads[i].dtype.type(share)
                total = part if total is None else total + part
        p.grad = total
    return loss, tokens


CHUNK = 1 << 15        # elements of a pass over the buckets: 128 KB of float32 stays in L2 between passes
SPLIT_FROM = 1 << 20   # flat arrays this long go chunk by chunk, on both workers (smaller ones fit in
                       # cache whole; a hand-off costs ~0.1 ms)


def _add_buckets(params, shares, buckets, workers=1):
    """``params.grads`` = the buckets, each times its share, added in order (the same arithmetic as
    the loop over parameters); each ``.grad`` becomes its view. It runs after the pieces, and grows
    with the model: at d_model 512 (44M parameters) the whole-array form took ~300 ms of CPU a
    step (a 177 MB temporary, its pages faulted in afresh every step), chunk by chunk ~50 ms, and
    on two workers each adds one end of the arrays."""
    total, scales = params.grads, [params.dtype.type(share) for share in shares]
    if total.size < SPLIT_FROM:
        _weighted_sum(total, buckets, scales, 0, total.size, max(total.size, 1))
    else:
        cut = total.size // 2 // CHUNK * CHUNK if workers == 2 else total.size
        run_pieces([lambda: _weighted_sum(total, buckets, scales, 0, cut, CHUNK),
                    lambda: _weighted_sum(total, buckets, scales, cut, total.size, CHUNK)], workers)
    params.set_grads()


def _weighted_sum(total, buckets, scales, lo, hi, chunk):
    """total[lo:hi] = buckets[0] * scales[0] + buckets[1] * scales[1] + ..., rounded after each
    product and each sum, as whole-array numpy would, ``chunk`` elements at a time."""
    scratch = np.empty(min(chunk, max(hi - lo, 0)), total.dtype)
    for a in range(lo, hi, chunk):
        b = min(a + chunk, hi)
        out, part = total[a:b], scratch[:b - a]
        np.multiply(buckets[0][a:b], scales[0], out=out)
        for scale, bucket in zip(scales[1:], buckets[1:]):
            out += np.multiply(bucket[a:b], scale, out=part)


def _array(gradient):
    return gradient.data if isinstance(gradient, minigrad.Tensor) else gradient


class StepGradients(NamedTuple):
    """What a step's gradients came with: the batch's mean loss, its scored tokens, the task's
    per-row outcome of the whole batch (``piece_backward``'s third value, the pieces' joined; None
    if the task gives none), and how the step ran (for the log)."""
    loss: float
    tokens: int
    rows: object
    workers: int
    blas_threads: int


class BatchPieces:
    """The seam between the training loop and the workers: a batch's gradients from its fixed pieces.

    The loop enters ``running()`` once around its steps and calls ``gradients(batch)`` once a
    step: each piece of the batch is a batch of its own, run on a worker by ``piece_backward(piece)``
    (the trainer's forward, loss and ``loss.backward()`` -> (mean loss Tensor over its scored
    tokens, how many, per-row outcome or None)); their gradients, each weighted by its share of
    the tokens, summed in piece order into every parameter's ``.grad``: as ``loss.backward()`` of
    the whole batch would, up to the order of the sums. Returns a ``StepGradients``.

    How many threads run the pieces comes from ``threads`` (``TrainingThreads``: the run's policy,
    ``running()`` sets it) unless ``workers`` fixes it. They run on the calling thread when it
    is watched (``minigrad.profile()``, which sees one thread's ops), and for a model that draws
    dropout (``in_order``: one generator, a fixed order of draws).
    """

    def __init__(self, params: FlatParameters, piece_backward, in_order: bool = False, count: int = PIECES):
        self.params, self.piece_backward, self.in_order, self.count = params, piece_backward, in_order, count
        self.buckets = [params.new_array() for _ in range(count)]     # each piece's gradients
        self.threads = None          # the run's TrainingThreads (made on first use if no run set one)
        self.workers = None          # a fixed worker count (1 or 2), else the threads' policy chooses

    @contextlib.contextmanager
    def running(self, setting=None):
        """A training run: BLAS limited to the run's thread count throughout (also for the optimizer's
        and the clip's products), freed memory kept for the next step (``memory.py``), Ctrl-C and
        SIGTERM noted for the loop (yields the ``interrupt.GracefulInterrupt``). ``setting`` as
        ``TrainingThreads`` reads it, or a ``TrainingThreads`` to go on with (its policy keeps what
        it learnt)."""
        self.threads = setting if isinstance(setting, TrainingThreads) else TrainingThreads(setting)
        with blas_threads(self.threads.blas), freed_memory_kept(), self._interrupt() as interrupt:
            yield interrupt

    def _interrupt(self) -> GracefulInterrupt:
        return GracefulInterrupt()

    def __call__(self, batch) -> StepGradients:
        results, workers, blas = self.piece_results(batch, range(self.count))
        loss, tokens = combine(self.params, results, workers)
        return StepGradients(loss, tokens, joined_rows(results), workers, blas)

    def piece_results(self, batch, which) -> tuple:
        """(the results (``piece_gradients``) of the pieces ``which`` of ``batch`` that hold rows, in
        order; the workers that ran them; BLAS's thread count)."""
        threads = self.threads = self.threads or TrainingThreads()
        cut = pieces(len(batch[0]), self.count)
        jobs = [self._job(tuple(part[lo:hi] for part in batch), self.buckets[i])
                for i, (lo, hi) in enumerate(cut) if i in which and hi > lo]
        watched = bool(observers.watching.observers)      # a profile sees only this thread's ops
        workers = 1 if self.in_order or watched else self.workers or threads.current
        with threads.step() as blas:
            results = run_pieces(jobs, workers)
        return results, workers, blas

    def _job(self, piece, bucket):
        return lambda: piece_gradients(self.params, self.piece_backward, piece, bucket)


def joined_rows(results):
    """The pieces' per-row outcomes (``piece_backward``'s third value) as the whole batch's, in row order."""
    rows = [extra for *_, extra in results]
    return None if any(r is None for r in rows) else np.concatenate(rows)
