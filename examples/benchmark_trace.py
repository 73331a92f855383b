"""CPU time of one training piece (forward, loss, backward) of the date model, eager vs traced.

    python examples/benchmark_trace.py              # d_model 8 batch 2, and the default size
    python examples/benchmark_trace.py --reps 50

Eager and traced calls alternate on the same batch so that a busy moment hurts both; the
medians of process CPU time are printed with their ratio.
"""
import argparse
import statistics
import time

import numpy as np

import minigrad
from minigrad.trace import trace
from transformer.models import build_model
from transformer.models.config import ModelConfig
from transformer.tasks.dates import DateDataset
from transformer.training.dates import teacher_forced

SIZES = (("d_model 8, batch 2", dict(d_model=8, num_heads=2, d_ff=32), 2),
         ("default, batch 64", {}, 64))


def measure(config, batch_size, reps):
    minigrad.manual_seed(0)
    model = build_model(ModelConfig(**config))
    src, tgt = DateDataset().sample_batch(np.random.default_rng(0), batch_size)

    def piece(src, tgt):
        loss, _, _ = teacher_forced(model, src, tgt)
        loss.backward()
        return loss
    traced = trace(piece)
    times = {"eager": [], "traced": []}
    for _ in range(reps + 2):
        for name, step in (("eager", piece), ("traced", traced)):
            model.zero_grad()
            start = time.process_time()
            step(src, tgt)
            times[name].append(time.process_time() - start)
    return {name: statistics.median(values[2:]) * 1e3 for name, values in times.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=30, help="timed calls of each kind (default 30)")
    reps = parser.parse_args().reps
    if reps < 1:
        parser.error("--reps must be at least 1")
    for label, config, batch_size in SIZES:
        ms = measure(config, batch_size, reps)
        print(f"{label:<20} eager {ms['eager']:7.2f} ms  traced {ms['traced']:7.2f} ms  "
              f"ratio {ms['traced'] / ms['eager']:.2f}")


if __name__ == "__main__":
    main()
