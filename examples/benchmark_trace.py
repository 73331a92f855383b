"""CPU time of one training piece (forward, loss, backward) of the date model: eager, the
checked replay (the piece's Python runs, each op checked against its tape line) and the pure
replay (the tape alone, as a flat list of forwards and backward rules). Beside them, "ops
alone": the time a pure replay spends inside the ops' own forward and backward functions, which
any replay that runs the ops must spend too; pure minus it is what the replay's own loop costs.

    python examples/benchmark_trace.py              # d_model 8 batch 2, and the default size
    python examples/benchmark_trace.py --reps 50
    python examples/benchmark_trace.py --ladder     # each rung of attention-ladder, one step of seed 0

The three kinds of call alternate on the same batch so that a busy moment hurts all of them;
the medians of process CPU time are printed with their ratio to eager.
"""
import argparse
import statistics
import time

import numpy as np

from threadpoolctl import threadpool_limits

import minigrad
from minigrad.trace import trace
from transformer.ladder.experiment import MAX_LEN, LadderConfig, answer_loss_and_backward, mix
from transformer.ladder.rungs import RUNGS
from transformer.models import build_model
from transformer.models.config import ModelConfig
from transformer.tasks.batch_sampler import BatchSampler
from transformer.tasks.dates import DateDataset
from transformer.tasks.language import VOCAB, Language
from transformer.training.dates import teacher_forced

SIZES = (("d_model 8, batch 2", dict(d_model=8, num_heads=2, d_ff=32), 2),
         ("default, batch 64", {}, 64))
WARM_UP = 3     # calls of each kind before timing: the recording and the verifying call among them


def date_piece(config, batch_size):
    """(model, the piece the date trainer traces, its arguments) for a ModelConfig's fields."""
    minigrad.manual_seed(0)
    model = build_model(ModelConfig(**config))
    src, tgt = DateDataset().sample_batch(np.random.default_rng(0), batch_size)

    def piece(src, tgt):
        loss, _, _ = teacher_forced(model, src, tgt)
        loss.backward()
        return loss
    return model, piece, (src, tgt)


def ladder_piece(rung_class):
    """(model, the function ``experiment.train_rung`` traces, a first batch of seed 0)."""
    config = LadderConfig()
    language = Language(seed=0, kinds=config.kinds)
    minigrad.manual_seed(0)
    model = rung_class(len(VOCAB), config.d_model, MAX_LEN)
    batch = BatchSampler(language, "train", mix=mix(language.kinds), loss_on="answer", length=MAX_LEN).sample(
        config.batch_size, np.random.default_rng([0, 2]))
    at = batch.answer_position
    return model, answer_loss_and_backward(model), (batch.inputs, at, batch.targets[np.arange(len(at)), at])


def measure(model, piece, args, reps):
    """Median CPU ms of ``piece(*args)``: eager, checked, pure, and the pure replay's ops alone."""
    pure = trace(piece)
    kinds = {"eager": piece, "checked": trace(piece, pure=False), "pure": pure}
    times = {name: [] for name in (*kinds, "ops")}
    for i in range(reps + WARM_UP):
        for name, step in kinds.items():
            model.zero_grad()
            start = time.process_time()
            step(*args)
            times[name].append(time.process_time() - start)
        if i >= WARM_UP - 1:                      # the tape is verified: pure calls from here
            model.zero_grad()
            times["ops"].append(ops_alone(pure, args))
    if pure.last != "replayed purely":
        raise SystemExit(f"the pure replay did not run: {pure.why_checked}")
    return {name: statistics.median(values[-reps:]) * 1e3 for name, values in times.items()}


def ops_alone(traced, args):
    """One pure replay of ``traced``'s tape; -> the CPU seconds spent inside its ops' ``forward``
    and ``backward`` (each call timed on its own; the replay's loop, feeds and sums left out)."""
    tape = traced.last_tape.pure
    spent = [0.0]

    def timed(method):
        def run(*a, **k):
            start = time.process_time()
            try:
                return method(*a, **k)
            finally:
                spent[0] += time.process_time() - start
        return run

    class TimedOp:                                  # what the replay calls to make each op's Function
        def __init__(self, op):
            self.op, self.backward_reads = op, op.backward_reads

        def __call__(self):
            fn = self.op()
            fn.forward, fn.backward = timed(fn.forward), timed(fn.backward)
            return fn
    plain = tape.steps
    tape.steps = [(TimedOp(op), *rest) for op, *rest in plain]
    try:
        traced(*args)
    finally:
        tape.steps = plain
    return spent[0]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=30, help="timed calls of each kind (default 30)")
    parser.add_argument("--ladder", action="store_true", help="the ladder's rungs instead of the date model")
    args = parser.parse_args()
    if args.reps < 1:
        parser.error("--reps must be at least 1")
    cases = ([(rung.name, lambda rung=rung: ladder_piece(rung)) for rung in RUNGS] if args.ladder else
             [(label, lambda c=config, b=batch: date_piece(c, b)) for label, config, batch in SIZES])
    total = dict.fromkeys(("eager", "checked", "pure", "ops"), 0.0)
    for label, build in cases:
        with threadpool_limits(1, user_api="blas"):      # as the trainers run a piece: one BLAS thread
            ms = measure(*build(), args.reps)
        print(line(label, ms))
        total = {name: total[name] + ms[name] for name in total}
    if args.ladder:
        print(line("every rung, one step", total))


def line(label, ms):
    return (f"{label:<20} eager {ms['eager']:7.2f} ms  checked {ms['checked'] / ms['eager']:.2f}x  "
            f"pure {ms['pure']:7.2f} ms ({ms['pure'] / ms['eager']:.2f}x)  "
            f"ops alone {ms['ops']:7.2f} ms ({ms['ops'] / ms['eager']:.2f}x)")


if __name__ == "__main__":
    main()
