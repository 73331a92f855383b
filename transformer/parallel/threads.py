"""How many threads the Linear layers' matrix products use, in training and in decoding.

OpenBLAS's results depend on its thread count: at the model's shapes, every weight
gradient (``xᵀ @ g`` over all positions) and the decoder's forward products differ in
their last bits between one and two threads. A run whose thread count changes with the
machine's load would take another path from the same seed. Hence:

- training (``TrainingThreads``) keeps BLAS at **one thread** and gets its second core
  another way: each batch is cut into fixed pieces (two by default) whose forward and backward
  run one after the other or side by side on two threads (``transformer/parallel/data_parallel.py``),
  with the same bits either way. By default (``auto``) the step times itself and now and
  then tries the other worker count, keeping whichever is faster (the rule is
  ``AdaptiveThreads``): two on a quiet machine, one on a busy one if a second thread
  would only wait for a busy core. The same seed gives the same run, bit for bit, quiet or busy;
- decoding (``decoding_threads``) always uses one thread: one new token per sequence
  makes small products that gain little from a second thread on a quiet machine and
  lose several-fold on a busy one.

``MINIGRAD_BLAS_THREADS=N`` forces N BLAS threads for both, the pieces one after the
other (repeatable for the same N; N = 1 gives ``auto``'s bits;
1 <= N <= ``MAX_THREADS``); ``dates-train --blas-threads`` sets the same for one run.
BLAS thread counts are switched at run time with threadpoolctl.
"""
import contextlib
import os
import statistics
import time
from collections import Counter, deque

import numpy  # noqa: F401  (threadpoolctl only finds BLAS libraries that are already loaded)


ENV_VAR = "MINIGRAD_BLAS_THREADS"
TRAINING_DEFAULT = "auto"  # one BLAS thread, the batch pieces on one or two threads: repeatable and fast
MAX_THREADS = 256       # a forced count above this is refused (the console scripts also warn above the cores)

_blas = None            # threadpoolctl controller of the loaded BLAS libraries (made once: ~10 ms)
_blas_default = 1       # threads BLAS had before anyone limited it


def blas_setting(value=None, default="auto"):
    """``"auto"`` or a forced thread count, from ``value``, else ``$MINIGRAD_BLAS_THREADS``, else ``default``."""
    source = "argument"
    if value is None:
        value, source = os.environ.get(ENV_VAR, default), ENV_VAR
    if isinstance(value, str):
        text = value.strip().lower()
        if text in ("", "auto"):
            return "auto"
        value = int(text) if text.isdigit() else value
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_THREADS:
        raise ValueError(f"{source}: BLAS threads must be 'auto' or a whole number >= 1 and <= {MAX_THREADS}, "
                         f"got {value!r}")
    return value


def _controller():
    global _blas, _blas_default
    if _blas is None:
        from threadpoolctl import ThreadpoolController
        _blas = ThreadpoolController().select(user_api="blas")
        _blas_default = max((lib.num_threads for lib in _blas.lib_controllers), default=1)
    return _blas


def blas_default_threads() -> int:
    """Threads BLAS uses when nobody limits it (1 if threadpoolctl finds no BLAS)."""
    _controller()
    return _blas_default


@contextlib.contextmanager
def blas_threads(count: int):
    """Run the block with BLAS limited to ``count`` threads; the previous count is restored after."""
    with _controller().limit(limits=count):    # ~10 us: negligible next to a step or a decode
        yield count


def arithmetic() -> str:
    """What rounds a run's floats besides its seed and the thread counts: the BLAS library's
    kernels (OpenBLAS picks them by CPU: Haswell, SkylakeX, Zen ...) and the width of the Numba
    kernels' vectors (32 bytes with AVX2, 64 with AVX-512). A run repeats bit for bit only where
    both are the same, e.g. 'openblas 0.3.31.188.0 Haswell, 32-byte vectors' (with the numpy
    backend, 'numpy's loops': no Numba kernel runs)."""
    from minigrad.accelerated import numpy_selected
    blas = ", ".join(" ".join(str(lib.get(key, "")) for key in ("internal_api", "version", "architecture")).strip()
                     for lib in _controller().info()) or "no BLAS found"
    if numpy_selected():
        return f"{blas}, numpy's loops"
    from minigrad.kernels.simd import VECTOR_BYTES
    return f"{blas}, {VECTOR_BYTES}-byte vectors"


def decoding_threads(setting=None):
    """The BLAS limit for decoding: one thread under ``auto``, else the forced count."""
    setting = blas_setting(setting)
    return blas_threads(1 if setting == "auto" else setting)


class AdaptiveThreads:
    """Which of two thread counts the next training step uses, from the times of the steps so far.

    Pure bookkeeping (no clock, no threads): call ``choose()`` before a step and
    ``record(seconds)`` after it. The *incumbent* count runs; now and then the other
    count is *probed* for up to ``probe_steps`` steps and takes over if its median beats
    the incumbent's recent median (last ``recent`` steps) by the factor ``margin``.

    - A probe step of the second count slower than ``abort_ratio`` x that median ends
      the probe at once, so a bad setting (two threads on a busy machine) costs one step.
      A probe of the first, safe count always runs its ``probe_steps``: on a loaded
      machine one slow step of it would otherwise keep the second count for good.
    - The next probe comes after ``min_interval`` steps, and not before the steps since
      the last probe have taken ``1 / budget`` times what that probe cost beyond the
      incumbent (after a switch: what probing the old count would cost now), so
      probing costs at most ~``budget`` of the training time.
    - If the incumbent suddenly slows (median of its last ``recent`` steps more than
      ``slowdown`` x the median of its steps before them: load has arrived), probe now.
    - The first ``warmup`` steps (compilation) are not timed; the first probe comes
      after ``recent`` timed steps of the first count, so a large model, whose steps take
      seconds, is not held on one thread for long on a quiet machine. The first step ever
      run with the second count is not timed either, unless it is slower than twice what
      aborts a probe: it pays once for the helper thread's memory and caches (measured at
      the default size: 1.2-2x a later two-thread step, enough to lose a probe).
    - A probe that loses is tried again sooner than ``min_interval`` while it keeps losing
      cheaply: after 2, 4, 8 ... times ``recent`` steps (the budget still applies). On a
      quiet machine one noisy step can lose a probe of two threads; with a wait of
      ``min_interval`` (50) after it, 50 of a default run's ~210 steps ran on one thread.
    """

    def __init__(self, counts=(1, 2), warmup=2, window=8, recent=3, probe_steps=3, min_interval=50,
                 budget=0.02, abort_ratio=1.3, margin=0.95, slowdown=1.5):
        if len(counts) != 2 or counts[0] == counts[1]:
            raise ValueError(f"AdaptiveThreads chooses between two different thread counts, got {counts!r}")
        if not window > recent >= 1 or probe_steps < 1 or min_interval < 1 or not 0 < budget < 1:
            raise ValueError("AdaptiveThreads needs window > recent >= 1, probe_steps >= 1, "
                             "min_interval >= 1 and 0 < budget < 1")
        self.incumbent, self.challenger = counts      # start with the first (one thread: safe)
        self.safe = counts[0]
        self.warmup_left, self.recent, self.probe_steps = warmup, recent, probe_steps
        self.min_interval, self.budget, self.abort_ratio = min_interval, budget, abort_ratio
        self.margin, self.slowdown = margin, slowdown
        self.times = deque(maxlen=window)             # the incumbent's latest step times
        self.probe_times = []
        self.probing = False
        self.next_probe_after = recent                # steps of the incumbent before the next probe
        self.steps_since_probe = 0
        self.seconds_since_probe = 0.0
        self.probe_cost = 0.0                         # seconds the next probe may cost beyond the incumbent
        self.steps_with = Counter()                   # timed steps run with each count
        self.switches = 0
        self.challenger_untried = True                # the second count's first step is still to come
        self.losses = 0                               # probes lost in a row

    def choose(self) -> int:
        """The thread count for the next step."""
        return self.challenger if self.probing else self.incumbent

    def record(self, seconds: float):
        """The step just run with ``choose()``'s count took ``seconds``."""
        if self.warmup_left:
            self.warmup_left -= 1
            return
        self.steps_with[self.choose()] += 1
        if self.probing:
            self._record_probe(seconds)
            return
        self.times.append(seconds)
        self.steps_since_probe += 1
        self.seconds_since_probe += seconds
        if self._probe_due():
            self.probing = True

    def _reference(self) -> float:
        return statistics.median(list(self.times)[-self.recent:])

    def _slowed_down(self) -> bool:
        times = list(self.times)
        before = times[:-self.recent]
        return len(before) >= self.recent and self._reference() > self.slowdown * statistics.median(before)

    def _probe_due(self) -> bool:
        if len(self.times) < self.recent or self.seconds_since_probe * self.budget < self.probe_cost:
            return False
        return self.steps_since_probe >= self.next_probe_after or self._slowed_down()

    def _record_probe(self, seconds: float):
        first, self.challenger_untried = self.challenger_untried, False
        if first and seconds <= 2 * self.abort_ratio * self._reference():
            return              # its first step ever pays one-off costs: not timed unless far out (busy)
        self.probe_times.append(seconds)
        reference = self._reference()
        aborted = self.challenger != self.safe and seconds > self.abort_ratio * reference
        if not aborted and len(self.probe_times) < self.probe_steps:
            return
        won = not aborted and statistics.median(self.probe_times) < self.margin * reference
        if won:
            # what probing the old count would cost now: one step if the abort rule would stop it
            new = statistics.median(self.probe_times)
            aborts = self.incumbent != self.safe and reference > self.abort_ratio * new   # the old count's next probe
            self.probe_cost = (reference - new) * (1 if aborts else self.probe_steps)
            self.incumbent, self.challenger = self.challenger, self.incumbent
            self.times = deque(self.probe_times, maxlen=self.times.maxlen)
            self.switches += 1
            self.losses = 0
        else:
            self.probe_cost = max(0.0, sum(self.probe_times) - reference * len(self.probe_times))
            self.times = deque(list(self.times)[-self.recent:], maxlen=self.times.maxlen)  # now's level
            self.losses += 1
        self.probing, self.probe_times = False, []
        self.steps_since_probe, self.seconds_since_probe = 0, 0.0
        self.next_probe_after = min(self.min_interval, self.recent * 2 ** self.losses) if self.losses \
            else self.min_interval


class TrainingThreads:
    """The threads of each training step: wrap the step in ``with threads.step():``.

    ``setting`` is ``"auto"`` (one BLAS thread; ``AdaptiveThreads`` runs the batch's
    pieces on one or two threads, whichever is faster: repeatable), a BLAS thread
    count (the pieces one after the other; repeatable for that count), or ``None`` to
    read ``$MINIGRAD_BLAS_THREADS`` (default ``TRAINING_DEFAULT``, ``auto``).
    """

    def __init__(self, setting=None, **adaptive_options):
        self.setting = blas_setting(setting, default=TRAINING_DEFAULT)
        self.blas = 1 if self.setting == "auto" else self.setting
        self.policy = None
        if self.setting == "auto" and blas_default_threads() > 1:   # a second core to use
            self.policy = AdaptiveThreads((1, 2), **adaptive_options)

    @property
    def current(self) -> int:
        """How many threads run the next step's batch pieces (1 or 2)."""
        return self.policy.choose() if self.policy else 1

    @contextlib.contextmanager
    def step(self):
        """Run one step under the chosen threads and tell the policy how long it took;
        yields the BLAS thread count (the one count that can change the numbers)."""
        with blas_threads(self.blas) as count:
            start = time.perf_counter()
            yield count
            seconds = time.perf_counter() - start
        if self.policy:
            self.policy.record(seconds)
