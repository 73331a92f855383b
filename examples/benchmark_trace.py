"""CPU time of one training piece (forward, loss, backward) of the date model: eager, the
checked replay (the piece's Python runs, each op checked against its tape line) and the pure
replay (the tape alone, as a flat list of forwards and backward rules).

    python examples/benchmark_trace.py              # d_model 8 batch 2, and the default size
    python examples/benchmark_trace.py --reps 50

The three kinds of call alternate on the same batch so that a busy moment hurts all of them;
the medians of process CPU time are printed with their ratio to eager.
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
WARM_UP = 3     # calls of each kind before timing: the recording and the verifying call among them


def measure(config, batch_size, reps):
    minigrad.manual_seed(0)
    model = build_model(ModelConfig(**config))
    src, tgt = DateDataset().sample_batch(np.random.default_rng(0), batch_size)

    def piece(src, tgt):
        loss, _, _ = teacher_forced(model, src, tgt)
        loss.backward()
        return loss
    kinds = {"eager": piece, "checked": trace(piece, pure=False), "pure": trace(piece)}
    times = {name: [] for name in kinds}
    for _ in range(reps + WARM_UP):
        for name, step in kinds.items():
            model.zero_grad()
            start = time.process_time()
            step(src, tgt)
            times[name].append(time.process_time() - start)
    if kinds["pure"].last != "replayed purely":
        raise SystemExit(f"the pure replay did not run: {kinds['pure'].why_checked}")
    return {name: statistics.median(values[WARM_UP:]) * 1e3 for name, values in times.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=30, help="timed calls of each kind (default 30)")
    reps = parser.parse_args().reps
    if reps < 1:
        parser.error("--reps must be at least 1")
    for label, config, batch_size in SIZES:
        ms = measure(config, batch_size, reps)
        print(f"{label:<20} eager {ms['eager']:7.2f} ms  checked {ms['checked']:7.2f} ms "
              f"({ms['checked'] / ms['eager']:.2f}x)  pure {ms['pure']:7.2f} ms ({ms['pure'] / ms['eager']:.2f}x)  "
              f"pure saves {ms['eager'] - ms['pure']:.2f} ms")


if __name__ == "__main__":
    main()
