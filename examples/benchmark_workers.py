"""Why two workers are not twice as fast as one: what a step cannot overlap, and what the
machine gives two matrix products at once.

    python examples/benchmark_workers.py                 # the default model (d_model 64)
    python examples/benchmark_workers.py --d-model 256   # a size of examples/benchmark_sizes.py

The training step runs its batch's two pieces on two threads (transformer/parallel/data_parallel.py).
Three measurements, each alternating its two settings in one process (medians):

1. the step on one worker and on two (``T1``, ``T2``);
2. the same model with d_model 8 and a batch of 2, where nearly all of a step is Python and the
   fixed cost of each call: the part of a step that holds the GIL and cannot overlap (``O``);
3. the step's largest products (x W, g Wᵀ and xᵀ g of the feed-forward layer, one piece's rows)
   alone and on two threads side by side: how much faster two at once are (``P``, 2 at best).

If a step were that Python plus products that scale like the pair, two workers would take
``O + (T1 - O) / P``; the command prints that beside the measured ``T2``.
"""
import argparse
import os
import statistics
import sys
import tempfile
import time

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

from benchmark_sizes import BATCH, SIZES, TGT_LEN  # noqa: E402
from transformer.models.config import ModelConfig  # noqa: E402
from transformer.parallel.data_parallel import second_worker  # noqa: E402
from transformer.parallel.threads import blas_threads  # noqa: E402
from transformer.training.dates import DateTrainer  # noqa: E402
from transformer.training.trainer import TrainConfig  # noqa: E402


def trainer_for(d_model, heads, layers, d_ff, batch):
    return DateTrainer(ModelConfig(d_model=d_model, num_heads=heads, num_encoder_layers=layers,
                                   num_decoder_layers=layers, d_ff=d_ff),
                       TrainConfig(steps=10 ** 6, batch_size=batch, eval_every=0, checkpoint_every=0),
                       out_dir=tempfile.gettempdir())


def alternate(run_a, run_b, pairs, warm=3):
    """Medians of ``run_a()`` and ``run_b()`` timed in alternating pairs, after ``warm`` untimed pairs."""
    a, b = [], []
    for i in range(warm + pairs):
        for run, times in ((run_a, a), (run_b, b)) if i % 2 == 0 else ((run_b, b), (run_a, a)):
            start = time.perf_counter()
            run()
            if i >= warm:
                times.append(time.perf_counter() - start)
    return statistics.median(a), statistics.median(b)


def step_on(trainer, workers):
    def step():
        trainer.gradients.workers = workers
        trainer.train_step()
    return step


def step_times(d_model, heads, layers, d_ff, batch, pairs):
    """(one worker, two workers) median step seconds."""
    trainer = trainer_for(d_model, heads, layers, d_ff, batch)
    with trainer.gradients.running("auto"):
        return alternate(step_on(trainer, 1), step_on(trainer, 2), pairs)


def product_times(d_model, d_ff, rows, pairs):
    """(one trio of products alone, two trios side by side on two threads) median seconds. The
    second thread is the one the training step uses, made once and kept (a new thread's first
    BLAS call sets up its buffers: that would be timed too)."""
    rng = np.random.default_rng(0)

    def trio():
        x, w = rng.standard_normal((rows, d_model), np.float32), rng.standard_normal((d_model, d_ff), np.float32)
        g = rng.standard_normal((rows, d_ff), np.float32)

        def run():
            for _ in range(repeat):
                x @ w, g @ w.T, x.T @ g
        return run

    repeat = max(1, int(1e9 / (6 * rows * d_model * d_ff)))      # ~1 GFLOP a timing
    first, second = trio(), trio()

    def together():
        handed = second_worker().submit(second)
        first()
        handed.result()
    with blas_threads(1):
        one, two = alternate(first, together, pairs)
    return one / repeat, two / repeat


def measure(size, pairs):
    d_model, heads, layers, d_ff = size
    t1, t2 = step_times(d_model, heads, layers, d_ff, BATCH, pairs)
    o1, o2 = step_times(8, 2, layers, 32, 2, pairs)
    alone, together = product_times(d_model, d_ff, BATCH // 2 * TGT_LEN, pairs)
    scaling = 2 * alone / together
    return {"t1": t1, "t2": t2, "o1": o1, "o2": o2, "alone": alone, "together": together, "scaling": scaling,
            "predicted": o1 + (t1 - o1) / scaling}


def report(size, m) -> str:
    d_model, heads, layers, d_ff = size
    ms = 1e3
    return "\n".join([
        f"d_model {d_model}, {heads} heads, {layers}+{layers} layers, d_ff {d_ff}, batch {BATCH} "
        f"({os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f})",
        f"  step, one worker / two workers:             {m['t1'] * ms:8.1f} / {m['t2'] * ms:.1f} ms  "
        f"(two are {m['t1'] / m['t2']:.2f}x faster)",
        f"  Python and call costs (d_model 8, batch 2): {m['o1'] * ms:8.1f} / {m['o2'] * ms:.1f} ms  "
        f"(O = {m['o1'] * ms:.1f} ms holds the GIL)",
        f"  products x W, g Wᵀ, xᵀ g ({BATCH // 2 * TGT_LEN} rows), alone / two side by side: "
        f"{m['alone'] * ms:.2f} / {m['together'] * ms:.2f} ms  (P = {m['scaling']:.2f}x)",
        f"  O + (T1 - O) / P = {m['predicted'] * ms:.1f} ms, measured two workers {m['t2'] * ms:.1f} ms"])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--d-model", type=int, default=64, choices=[s[0] for s in SIZES],
                        help="the size (layers, heads, d_ff as examples/benchmark_sizes.py)")
    parser.add_argument("--pairs", type=int, default=15, help="timed pairs of each comparison (>= 1)")
    args = parser.parse_args(argv)
    if args.pairs < 1:
        parser.error(f"--pairs must be at least 1, got {args.pairs}")
    size = next(s for s in SIZES if s[0] == args.d_model)
    print(report(size, measure(size, args.pairs)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
