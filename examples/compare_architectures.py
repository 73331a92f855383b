"""The encoder-decoder beside the decoder-only model on the date task, in one run on one machine.

    python examples/compare_architectures.py              # seed 0, both architectures, default configs
    python examples/compare_architectures.py --seeds 0 1 2

For each architecture and seed: train with dates-train's defaults (``DateTrainer`` with the default
``TrainConfig``: until 99.9% held-out exact match, confirmed after the cool-down), then time
greedy decoding of the 2,000 held-out dates as dates-evaluate does (the kernels' numpy twins,
best of 3). Prints a markdown table on stdout (the runs' progress goes to stderr, so
``> table.md`` keeps the table alone): parameters, the step and training seconds at which the
target was first reached (and confirmed), held-out exact match, greedy dates/s.
"""
import argparse
import contextlib
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from transformer.models.config import DecoderOnlyConfig, ModelConfig  # noqa: E402
from transformer.training.evaluation import evaluate  # noqa: E402
from transformer.training.trainer import TrainConfig  # noqa: E402
from transformer.training.dates import DateTrainer

ARCHITECTURES = {"encoder-decoder": ModelConfig, "decoder-only": DecoderOnlyConfig}


def measure(architecture: str, seed: int, folder: str) -> dict:
    from minigrad import kernels
    trainer = DateTrainer(ARCHITECTURES[architecture](), TrainConfig(seed=seed), out_dir=folder)
    with contextlib.redirect_stdout(sys.stderr):      # the run's progress lines: stdout is the table
        summary = trainer.run(progress=False)
    data = trainer.data
    rates = []
    with kernels.use_backend("numpy"):
        for _ in range(3):
            start = time.perf_counter()
            result = evaluate(trainer.model, data.test_src, data.test_tgt)
            rates.append(result["count"] / (time.perf_counter() - start))
    return {"architecture": architecture, "seed": seed, "parameters": trainer.model.num_parameters(),
            "reached_step": summary["reached_step"], "reached_seconds": summary["reached_seconds"],
            "steps": summary["steps"], "seconds": summary["training_seconds"],
            "confirmed": summary["target_confirmed"], "exact_match": result["exact_match"],
            "dates_per_second": max(rates), "median_step_ms": summary["median_step_ms"]}


def row(m: dict) -> str:
    reached = (f"{m['reached_step']} / {m['reached_seconds']:.1f} s" if m["reached_step"] is not None
               else "not reached")
    return (f"| {m['architecture']} | {m['seed']} | {m['parameters']:,} | {reached} | {m['steps']} / "
            f"{m['seconds']:.1f} s{'' if m['confirmed'] else ' (not confirmed)'} | {m['median_step_ms']:.1f} ms | "
            f"{m['exact_match']:.2%} | {m['dates_per_second']:,.0f} |")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--architectures", nargs="+", choices=list(ARCHITECTURES), default=list(ARCHITECTURES))
    args = parser.parse_args(argv)
    print("| architecture | seed | parameters | 99.9% first reached: step / training s | stopped (confirmed): "
          "step / training s | median step | held-out exact match | greedy dates/s |")
    print("|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as folder:
        for seed in args.seeds:
            for architecture in args.architectures:     # alternating: the machine's drift hits both
                print(row(measure(architecture, seed, os.path.join(folder, f"{architecture}-{seed}"))), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
