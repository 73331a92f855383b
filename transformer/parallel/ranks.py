"""One model trained by the processes of an MPI job: each rank computes its share of the fixed pieces.

``mpiexec -n P dates-train ...`` starts P copies of the command, on one machine or many. Every
copy (a *rank*) builds the same model from the same seed and samples the same batch; the batch
is cut into the run's fixed pieces (``data_parallel.pieces``) and rank r computes pieces
``r * k`` to ``r * k + k - 1`` (k = pieces / P). The ranks then exchange what they computed, every
piece's loss, token count and flat gradient bucket, with ``Allgather`` (each rank receives every
piece exactly as it was computed) and every rank adds them up in piece order with the same
``combine`` as one process does. So every rank takes the same Adam step, and the run has the
bits of the plain command: the sum's order is the pieces', never the network's (``Allreduce``
would add in an order its algorithm picks, which changes with P and the message size).

Only rank 0 writes the log, the checkpoints and the snapshots, and prints (``writes_the_run``); the
others train alike and stay silent. Ctrl-C or SIGTERM to ``mpiexec`` reaches every rank: a rank
notes the request and tells the others with its next exchange (``AgreedInterrupt``), so all stop
after the same step and rank 0 saves it. A rank that ends while the others wait for it (killed,
out of memory) ends the job: each exchange waits in bounded polls, checking that the ranks on its
own machine are still alive, and raises ``RankLost``. (MPICH's ``mpiexec`` by default kills the
whole job itself as soon as one rank dies: see docs/mpi.md.) A rank that is stopped (SIGSTOP, a
debugger) holds its Ctrl-C pending: a rank that waits for it while stopping wakes it with SIGCONT,
and kills it if it stays stopped. Before the first step the ranks check that they were started
with the same settings (``Job.first_difference``), and every agreement is polled the same way.

The job is found from the variables the MPI launcher sets (``PMI_SIZE`` for MPICH's hydra,
``OMPI_COMM_WORLD_SIZE`` for Open MPI): a plain run never imports mpi4py.
"""
import hashlib
import io
import json
import os
import signal
import socket
import time

import numpy as np

from minigrad.flat import FlatParameters
from transformer.parallel.data_parallel import PIECES, BatchPieces, StepGradients, combine, joined_rows, pieces
from transformer.parallel.interrupt import GracefulInterrupt
from transformer.parallel.processes import pid_alive

SIZE_VARIABLES = ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MV2_COMM_WORLD_SIZE")
RANK_VARIABLES = ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "MV2_COMM_WORLD_RANK")
STALL_SECONDS = 600.0       # a rank on another machine silent this long is taken for lost
LIVENESS_SECONDS = 0.05     # how often a waiting rank checks the ranks on its machine
STOPPED_GRACE_SECONDS = 10.0    # after a stop request, how long a rank continued with SIGCONT may take to answer


def _from_environment(names, default: int) -> int:
    for name in names:
        value = os.environ.get(name, "")
        if value.isdigit():
            return int(value)
    return default


def job_size() -> int:
    """Processes in this MPI job, from the launcher's variables (1: not started by ``mpiexec``)."""
    return _from_environment(SIZE_VARIABLES, 1)


def job_rank() -> int:
    """This process's rank in its MPI job (0 outside one)."""
    return _from_environment(RANK_VARIABLES, 0)


class JobError(Exception):
    """The MPI job cannot train (mpi4py missing, a process count that does not divide the pieces)."""


class RankLost(KeyboardInterrupt):
    """A rank of the job ended while the others waited for it: the job stops (the last saved
    checkpoint is intact)."""


_job = None


def job():
    """This process's ``Job`` (made once: MPI starts here)."""
    global _job
    if _job is None:
        _job = Job()
    return _job


class Job:
    """The MPI job: its communicator, this rank, and where every rank runs (machine, pid)."""

    def __init__(self):
        try:
            from mpi4py import MPI
        except ImportError:
            raise JobError(f"started by mpiexec with {job_size()} processes, but mpi4py is not installed: "
                           "pip install mpi4py mpich (or pip install -e \".[mpi]\")") from None
        self.MPI, self.comm = MPI, MPI.COMM_WORLD
        self.comm.Set_errhandler(MPI.ERRORS_RETURN)      # a failed call raises here, rather than aborting
        self.rank, self.size = self.comm.Get_rank(), self.comm.Get_size()
        here = np.array([_machine_tag(), os.getpid()], np.int64)
        places = np.zeros((self.size, 2), np.int64)
        self.comm.Allgather(here, places)
        self.neighbours = [int(pid) for r, (machine, pid) in enumerate(places)
                           if r != self.rank and machine == here[0]]

    @property
    def writer(self) -> bool:
        return self.rank == 0

    def shared_text(self, text: str) -> str:
        """Rank 0's ``text``, on every rank (e.g. the run folder rank 0 chose)."""
        return self.all_texts(text if self.writer else "")[0]

    def all_texts(self, text: str) -> list:
        """Every rank's ``text``, in rank order, on every rank (all ranks call it together)."""
        data = np.frombuffer((text or "").encode(), np.uint8).copy()
        lengths = np.zeros(self.size, np.int64)
        self.wait([self.comm.Iallgather(np.array([data.size], np.int64), lengths)])
        gathered = np.zeros(int(lengths.sum()), np.uint8)
        self.wait([self.comm.Iallgatherv(data, [gathered, lengths])])
        ends = np.cumsum(lengths)
        return [gathered[end - length:end].tobytes().decode() for end, length in zip(ends, lengths)]

    def all_agree(self, ok: bool) -> bool:
        """Whether every rank says ``ok`` (all ranks call it together, whatever each says: a rank
        that skipped it would leave the others waiting)."""
        answers = np.zeros(self.size, np.int8)
        self.wait([self.comm.Iallgather(np.array([ok], np.int8), answers)])
        return bool(answers.all())

    def first_difference(self, settings: dict):
        """None when every rank has the same ``settings`` (name -> value, JSON-able), else one phrase
        naming the first setting on which a rank differs from rank 0 and both values. Every rank
        gets the same answer, so all go on or all stop."""
        ranks = [json.loads(text) for text in self.all_texts(json.dumps(settings, default=str))]
        for rank, theirs in enumerate(ranks[1:], start=1):
            for name in [*ranks[0], *(name for name in theirs if name not in ranks[0])]:
                mine, other = ranks[0].get(name), theirs.get(name)
                if mine != other:
                    return f"{name} is {_shown(mine)} on rank 0 but {_shown(other)} on rank {rank}"
        return None

    def wait(self, requests, step: int = 0, stopping=lambda: False):
        """Wait for ``requests``, polling: raise ``RankLost`` when a rank on this machine has ended, or
        after ``STALL_SECONDS`` without an answer (a rank elsewhere). ``stopping()`` true (Ctrl-C or
        SIGTERM reached this rank): a rank on this machine that is stopped (SIGSTOP, a laptop's
        suspend) gets SIGCONT so it can stop with the others, and is killed if it still does not
        answer within ``STOPPED_GRACE_SECONDS`` (MPICH's mpiexec then ends the whole job)."""
        start = checked = time.monotonic()
        continued_at = None
        pause = 1e-5
        try:
            while not self.MPI.Request.Testall(requests):
                now = time.monotonic()
                if now - checked > LIVENESS_SECONDS:
                    checked = now
                    gone = [pid for pid in self.neighbours if not pid_alive(pid)]
                    if gone or now - start > STALL_SECONDS:
                        raise RankLost(f"a process of the MPI job ended {_when(step)} "
                                       f"({'pid ' + str(gone[0]) if gone else f'no answer in {STALL_SECONDS:.0f} s'})")
                    if stopping():
                        continued_at = self._end_stopped_neighbours(continued_at, now, step)
                time.sleep(pause)
                pause = min(2 * pause, 1e-3)
        except KeyboardInterrupt:                   # Ctrl-C, SIGTERM or RankLost: this rank ends
            _continue(self._stopped_neighbours())     # a stopped rank wakes to its own Ctrl-C, or finds us gone
            raise

    def _stopped_neighbours(self) -> list:
        return [pid for pid in self.neighbours if _stopped(pid)]

    def _end_stopped_neighbours(self, continued_at, now: float, step: int):
        """While this rank stops: SIGCONT the stopped ranks on this machine; SIGKILL those still
        stopped (stopped again, or held by a debugger) ``STOPPED_GRACE_SECONDS`` later."""
        stopped = self._stopped_neighbours()
        if continued_at is None:
            if stopped:
                _continue(stopped)
                return now
            return None
        if stopped and now - continued_at > STOPPED_GRACE_SECONDS:
            for pid in stopped:
                _signal(pid, signal.SIGKILL)
            raise RankLost(f"a process of the MPI job (pid {stopped[0]}) stayed stopped {_when(step)} "
                           "while the job was asked to stop, and was killed")
        return continued_at


def _when(step: int) -> str:
    return f"during step {step}" if step else "before the first step"


def _shown(value) -> str:
    return "not given" if value is None else json.dumps(value)


def _stopped(pid: int) -> bool:
    """Whether ``pid`` is stopped (SIGSTOP, Ctrl-Z) or held by a tracer."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("T", "t")
    except (OSError, IndexError):
        return False


def _signal(pid: int, number: int):
    try:
        os.kill(pid, number)
    except (ProcessLookupError, PermissionError):
        pass


def _continue(pids):
    for pid in pids:
        _signal(pid, signal.SIGCONT)


def _machine_tag() -> int:
    """A number that tells this machine (and this boot of it) from the others: two ranks with the
    same tag can see each other's pids."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            boot = f.read().strip()
    except OSError:
        boot = ""
    digest = hashlib.blake2b(f"{socket.gethostname()} {boot}".encode(), digest_size=8).digest()
    return int(np.frombuffer(digest, np.int64)[0])


class AgreedInterrupt(GracefulInterrupt):
    """Ctrl-C and SIGTERM counted by the whole job: a signal (or ``request_stop``) only marks
    ``pending``; ``requested``, which the loop reads after each step, turns true on every rank
    at once, after the exchange in which some rank said it was pending."""
    agreed = False

    @property
    def requested(self) -> bool:
        return self.agreed

    @requested.setter
    def requested(self, value: bool):
        self.pending = value


class RankPieces(BatchPieces):
    """``BatchPieces`` over the ranks of an MPI job: this rank computes its pieces of each batch
    (on one or two threads), the ranks exchange them, every rank combines all in piece order."""

    def __init__(self, params, piece_backward, in_order: bool = False, count: int = PIECES):
        super().__init__(params, piece_backward, in_order, count)
        self.job = job()
        if self.count % self.job.size:
            raise JobError(f"mpiexec -n {self.job.size}: the processes must divide the run's {self.count} "
                           f"pieces of each batch (use -n {' or '.join(map(str, _divisors(self.count)))})")
        if in_order:
            raise JobError("this model draws dropout masks, in piece order from one generator that separate "
                           "processes cannot share: train it without mpiexec, or with --dropout 0")
        self.share = self.count // self.job.size
        self.mine = range(self.job.rank * self.share, (self.job.rank + 1) * self.share)
        self.stop_watch = None
        self.steps = 0
        n = len(params)
        self.header_size = 1 + self.share * (4 + n)      # pending stop; per piece: present, loss, tokens,
        self.headers = np.zeros((self.job.size, self.header_size))       # extra's bytes, each parameter used
        self.sent = np.zeros((self.share, params.size), params.dtype)      # this rank's pieces' buckets
        self.received = np.zeros((self.job.size * self.share, params.size), params.dtype)
        for j, piece in enumerate(self.mine):
            self.buckets[piece] = self.sent[j]          # a piece's gradients land where they are sent from

    def _interrupt(self) -> AgreedInterrupt:
        self.stop_watch = AgreedInterrupt()
        return self.stop_watch

    def _stopping(self) -> bool:
        """Whether Ctrl-C or SIGTERM reached this rank (the job stops after this step)."""
        return bool(self.stop_watch and self.stop_watch.pending)

    def __call__(self, batch):
        self.steps += 1
        results, workers, blas = self.piece_results(batch, self.mine)
        present = [i for i, (lo, hi) in enumerate(pieces(len(batch[0]), self.count)) if hi > lo]
        header, extras = self._pack(results, [i for i in present if i in self.mine])
        comm, requests = self.job.comm, []
        requests.append(comm.Iallgather(header, self.headers))
        requests.append(comm.Iallgather(self.sent, self.received))
        self.job.wait(requests, self.steps, self._stopping)
        sizes = self.headers[:, 1:].reshape(self.job.size, self.share, -1)[:, :, 3].astype(np.int64)
        counts = sizes.sum(axis=1)
        gathered = np.zeros(int(counts.sum()), np.uint8)
        self.job.wait([comm.Iallgatherv(extras, [gathered, counts])], self.steps, self._stopping)
        if self.stop_watch is not None and self.headers[:, 0].any():
            self.stop_watch.agreed = True                  # every rank stops after this step
        results = self._unpack(gathered, sizes)
        loss, tokens = combine(self.params, results, workers)
        return StepGradients(loss, tokens, joined_rows(results), workers, blas)

    def _pack(self, results, present):
        """This rank's header (floats), buckets (into ``sent``) and extras (bytes) of its pieces."""
        header = np.zeros(self.header_size)
        header[0] = self._stopping()
        rows = header[1:].reshape(self.share, -1)      # a row per piece of this rank; absent ones stay 0
        blobs = []
        for (loss, tokens, grads, extra), piece in zip(results, present):
            j = piece - self.mine.start
            blob = _array_bytes(extra)
            rows[j, :4] = 1, loss, tokens, len(blob)
            if isinstance(grads, np.ndarray):             # the bucket, already in self.sent[j]
                rows[j, 4:] = 1
            else:                                         # some parameter unused: zeros sent, flagged unused
                rows[j, 4:] = [g is not None for g in grads]
                self.params.pack([np.zeros(p.shape, self.params.dtype) if g is None else g
                                  for p, g in zip(self.params, grads)], self.sent[j])
            blobs.append(blob)
        return header, np.frombuffer(b"".join(blobs), np.uint8).copy()

    def _unpack(self, gathered, sizes) -> list:
        """Every present piece's (loss, tokens, gradients, extra), in piece order, from the exchange."""
        results, offset = [], 0
        rows = self.headers[:, 1:].reshape(self.job.size * self.share, -1)
        for i, (present, loss, tokens, size, *used) in enumerate(rows):
            size = int(size)
            if not present:
                continue
            extra = _bytes_array(gathered[offset:offset + size])
            offset += size
            bucket = self.received[i]
            grads = bucket if all(used) else tuple(view if u else None
                                                   for view, u in zip(self.params.views(bucket), used))
            results.append((float(loss), int(tokens), grads, extra))
        return results


def _divisors(count: int) -> list:
    return [d for d in range(1, count + 1) if count % d == 0]


def _array_bytes(extra) -> bytes:
    """A piece's extra (None or an array) as bytes: numpy's own format, no pickle."""
    if extra is None:
        return b""
    out = io.BytesIO()
    np.save(out, np.asarray(extra), allow_pickle=False)
    return out.getvalue()


def _bytes_array(data: np.ndarray):
    return np.load(io.BytesIO(data.tobytes()), allow_pickle=False) if data.size else None


def silence_other_ranks():
    """Ranks other than 0 print nothing from now on (stdout and stderr go nowhere): rank 0 speaks
    for the job. Read from the launcher's variables: call it before anything is printed."""
    if job_size() > 1 and job_rank() != 0:
        import sys
        sys.stdout = sys.stderr = open(os.devnull, "w")


def step_gradients(params: FlatParameters, piece_backward, in_order: bool = False, count: int = PIECES):
    """The seam of this process: ``BatchPieces``, or in an MPI job of several processes the ranks'
    (``ranks.RankPieces``: each process computes its share of the ``count`` pieces)."""
    if job_size() > 1:
        return RankPieces(params, piece_backward, in_order, count)
    return BatchPieces(params, piece_backward, in_order, count)


def writes_the_run() -> bool:
    """Whether this process writes the run's log, checkpoints and snapshots: a plain run does, and
    in an MPI job rank 0 does for all (the others train alike)."""
    return job_size() == 1 or job().writer
