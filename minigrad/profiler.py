"""Where the time goes: which ops ran, how often, for how long, and on a kernel or on numpy.

    with minigrad.profile() as prof:
        trainer.train_step()
    print(prof.table())

One row per op and pass (``forward``, ``backward``), one for the backward pass's own
bookkeeping between ops ("autograd engine": summing gradients, un-broadcasting) and one per
optimizer call (``optimizer.step``, ``clip_grad_norm``), like ``torch.profiler``'s
``key_averages()``; a row's time is its own, without the rows nested in it. The ``path``
column says what executed the arithmetic: ``kernel`` (a registered kernel,
``minigrad/kernels/``), ``numpy`` (numpy code) or ``both`` (some calls each, or an op whose
functions took different paths). What is in no row (Python in the modules, sampling the
batch) is the table's "outside the rows" line.

The profile watches from outside (``minigrad/observers.py``): ``Function.apply``, the backward
loop and the ``@accelerated`` functions pass their calls through it while it records, and
change nothing else, so what is computed is the same profiled or not. Off, the engine reads
one empty tuple per op.

As grad mode, a profile belongs to the thread that entered it: other threads' ops are not in
its rows, and each thread may record its own profile at the same time. One thread records one
profile at a time (no nesting). A ``Profile`` entered again (``with prof:`` twice) adds the
second block to the first: its rows and its wall time are the sums over the blocks.
"""
import time

from . import observers


class Profile(observers.Observer):
    """The recording of ``with profile():`` blocks: ``rows``, ``wall_seconds``, ``table()``."""

    def __init__(self):
        self.rows = {}          # (name, pass) -> [calls, own seconds, kernel calls, numpy calls]
        self._running = []      # per row running now (innermost last): [kernel calls, numpy calls, nested seconds]
        self.wall_seconds = None
        self._recording = None

    # ------------------------------------------------------------------ recording
    def __enter__(self):
        if any(isinstance(o, Profile) for o in observers.watching.observers):
            raise RuntimeError("minigrad.profile(): a profile is already recording in this thread; "
                               "nest no second one")
        self._recording = observers.observing(self)
        self._recording.__enter__()
        self._start = time.perf_counter()
        return self

    def __exit__(self, *exc):
        seconds = time.perf_counter() - self._start
        self._recording.__exit__(*exc)
        self._recording = None
        self.wall_seconds = (self.wall_seconds or 0.0) + seconds

    def timed(self, name, stage, call, *args, **options):
        """call(*args, **options); its own time (less nested rows') and the paths of the
        @accelerated functions it ran directly are added to row (name, stage)."""
        frame = [0, 0, 0.0]
        self._running.append(frame)
        start = time.perf_counter()
        try:
            return call(*args, **options)
        finally:
            seconds = time.perf_counter() - start
            self._running.pop()
            if self._running:
                self._running[-1][2] += seconds      # the outer row does not count it again
            row = self.rows.setdefault((name, stage), [0, 0.0, 0, 0])
            row[0] += 1
            row[1] += seconds - frame[2]
            row[2] += frame[0]
            row[3] += frame[1]

    def call(self, what, stage, run, *args, **options):
        """The observer's hook: an op's forward or backward gets its row; an @accelerated
        function (stage "kernel" or "numpy") notes its path in the row it runs inside."""
        if stage in ("kernel", "numpy"):
            if not self._running:                       # outside any op: a row of its own
                return self.timed(what.__name__, "call", self._noted, stage, run, *args)
            return self._noted(stage, run, *args)
        return self.timed(what if isinstance(what, str) else what.name, stage, run, *args, **options)

    def _noted(self, path, run, *args):
        """run(*args), its path counted in the innermost running row."""
        self._running[-1][0 if path == "kernel" else 1] += 1
        return run(*args)

    # ------------------------------------------------------------------ reporting
    def total_seconds(self):
        """The time of every row together (each row's own time: they never overlap)."""
        return sum(row[1] for row in self.rows.values())

    def table(self, limit=None):
        """The rows as text, the most time first: op, pass, path, calls, total ms, share, mean µs."""
        if self.wall_seconds is None:
            raise RuntimeError("profile.table(): the with block has not ended yet")
        rows = sorted(self.rows.items(), key=lambda item: -item[1][1])[:limit]
        wall = self.wall_seconds or 1e-12
        lines = [f"{'op':24s} {'pass':8s} {'path':6s} {'calls':>6s} {'total ms':>9s} {'share':>6s} {'mean us':>9s}"]
        for (name, stage), (calls, seconds, kernel_calls, numpy_calls) in rows:
            path = "both" if kernel_calls and numpy_calls else "kernel" if kernel_calls else "numpy"
            lines.append(f"{name:24s} {stage:8s} {path:6s} {calls:6d} {seconds * 1e3:9.2f} "
                         f"{seconds / wall:6.1%} {seconds / calls * 1e6:9.1f}")
        total = self.total_seconds()
        lines.append(f"{'all rows':38s} {sum(r[0] for r in self.rows.values()):8d} {total * 1e3:9.2f} "
                     f"{total / wall:6.1%}")
        lines.append(f"{'outside the rows':47s} {(wall - total) * 1e3:9.2f} {(wall - total) / wall:6.1%}")
        lines.append(f"{'wall time of the block':47s} {wall * 1e3:9.2f}")
        return "\n".join(lines)


def profile():
    """``with minigrad.profile() as prof: ...``, then ``print(prof.table())`` (see the module doc)."""
    return Profile()


def profiled(name):
    """Decorator: the calls of a function that is not an op (an optimizer step) get their own row."""
    def decorate(function):
        def run(*args, **options):
            if not observers.watching.observers:
                return function(*args, **options)
            return observers.call(name, "call", function, *args, **options)
        run.__name__, run.__qualname__, run.__doc__ = function.__name__, function.__qualname__, function.__doc__
        run.__wrapped__ = function
        return run
    return decorate
