"""Where the time of one default training step goes: the profiler's table.

    python examples/profile_step.py              # warm up 3 steps, profile the 4th
    python examples/profile_step.py --steps 5 --backend numpy

Runs the date model with its default configuration (the one ``dates-train`` trains) and
prints ``minigrad.profile()``'s table for one step: every op forward and backward, the
backward pass's own bookkeeping and the optimizer, with calls, time and whether a kernel
or numpy ran it. The README's "Where the time goes" is this command's output.
"""
import argparse
import os
import platform
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

import minigrad  # noqa: E402
from minigrad import kernels  # noqa: E402
from transformer.parallel.threads import TrainingThreads  # noqa: E402
from transformer.models.encoder_decoder import ModelConfig  # noqa: E402
from transformer.training.trainer import TrainConfig  # noqa: E402
from transformer.training.dates import DateTrainer


def profile_step(warm_up_steps=3, backend="numba"):
    """(the step's Profile, the time of the step before it, unprofiled) after warm-up steps,
    BLAS threads chosen per step as ``dates-train`` chooses them."""
    trainer = DateTrainer(model_config=ModelConfig(), train_config=TrainConfig(eval_every=0, checkpoint_every=0))
    blas = TrainingThreads()
    with kernels.use_backend(backend):
        for _ in range(warm_up_steps):
            start = time.perf_counter()
            with blas.step():
                trainer.train_step()
            plain = time.perf_counter() - start
        with blas.step(), minigrad.profile() as prof:
            trainer.train_step()
    return prof, plain


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3, help="warm-up steps before the profiled one (>= 1)")
    parser.add_argument("--backend", choices=kernels.BACKENDS, default="numba")
    args = parser.parse_args()
    prof, plain = profile_step(max(1, args.steps), args.backend)
    print(f"{platform.machine()}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}; "
          f"backend {args.backend}; the step before, unprofiled: {plain * 1e3:.1f} ms")
    print(prof.table())


if __name__ == "__main__":
    main()
