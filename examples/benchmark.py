"""Speed of minigrad, kernels and end to end, side by side with plain numpy, in one run.

    python examples/benchmark.py            # everything (a few minutes)
    python examples/benchmark.py --quick    # fewer repetitions
    python examples/benchmark.py --skip-kernels

Part 1 (examples/benchmark_kernels.py): each Numba kernel against its numpy
twin, compile time with an empty cache and warm start-up.
Part 2: the date model's training step (forward + backward + Adam, default
config, batch 128) and greedy-decode throughput on the 2,000 held-out dates,
once with the Numba kernels and once with the pure-numpy path
(``kernels.use_backend("numpy")``).

Figures are medians over many repetitions; the first steps (compilation,
warm-up) are left out of the medians.
"""
import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import numpy as np  # noqa: E402


def machine_summary() -> str:
    from benchmark_kernels import machine_info
    info = machine_info()
    return (f"{info['cpu']}, {info['cores']} cores, load average {info['load_average_1min']:.2f}; "
            f"Python {info['python']}, numpy {info['numpy']} ({info['blas']}), numba {info['numba']}; "
            f"OPENBLAS_NUM_THREADS={info['OPENBLAS_NUM_THREADS']}")


def use_fused_attention(model, fused: bool):
    """Switch every MultiHeadAttention of ``model`` between the fused op and the op-by-op path."""
    from transformer.attention import MultiHeadAttention
    for _, module in model.named_modules():
        if isinstance(module, MultiHeadAttention):
            module.fused = fused


def time_training_steps(backend: str, steps: int, warmup: int = 3, fused: bool = True) -> dict:
    from minigrad import kernels
    from transformer.training import TrainConfig, Trainer

    with kernels.use_backend(backend):
        trainer = Trainer(train_config=TrainConfig(steps=steps + warmup, eval_every=0, checkpoint_every=0))
        use_fused_attention(trainer.model, fused)
        times = []
        for i in range(steps + warmup):
            start = time.perf_counter()
            trainer.train_step()
            if i >= warmup:
                times.append(time.perf_counter() - start)
    return {"median_ms": 1e3 * statistics.median(times),
            "p10_ms": 1e3 * float(np.percentile(times, 10)), "p90_ms": 1e3 * float(np.percentile(times, 90))}


def time_greedy_decoding(backend: str, repeats: int) -> dict:
    from minigrad import kernels
    from transformer.dates import DateDataset
    from transformer.decoding import greedy_decode
    from transformer.model import Transformer

    data = DateDataset()
    model = Transformer()
    with kernels.use_backend(backend):
        greedy_decode(model, data.test_src[:10])                 # compile / warm up
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            for i in range(0, len(data.test_src), 1000):
                greedy_decode(model, data.test_src[i:i + 1000])
            times.append(time.perf_counter() - start)
    seconds = statistics.median(times)
    return {"seconds": seconds, "dates_per_s": len(data.test_src) / seconds}


def run_end_to_end(quick: bool):
    steps, repeats = (15, 2) if quick else (40, 5)
    print("\n== End to end: date model, default config (d_model 64, 4 heads, 2+2 layers, d_ff 256) ==")
    print(f"training step = forward + backward + clip + Adam, batch 128; median of {steps} steps")
    rows = {}
    for backend in ("numba", "numpy"):
        rows[backend] = (time_training_steps(backend, steps), time_greedy_decoding(backend, repeats))
    rows["step-by-step"] = (time_training_steps("numba", steps, fused=False), None)
    labels = {"numba": "minigrad + Numba", "numpy": "minigrad, pure numpy",
              "step-by-step": "Numba, attention op by op"}
    print(f"{'path':<27}{'step median':>12}{'p10..p90':>20}{'greedy decode':>22}")
    for key, (train, decode) in rows.items():
        decode_text = f"{decode['dates_per_s']:>13.0f} dates/s" if decode else f"{'-':>13}"
        print(f"{labels[key]:<27}{train['median_ms']:>9.1f} ms{train['p10_ms']:>10.1f}..{train['p90_ms']:<6.1f} ms"
              f"{decode_text}")
    step = {key: train["median_ms"] for key, (train, _) in rows.items()}
    print(f"kernels speed up the training step {step['numpy'] / step['numba']:.2f}x over the pure-numpy path; "
          f"the fused attention op {step['step-by-step'] / step['numba']:.2f}x over attention op by op")
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    parser.add_argument("--skip-kernels", action="store_true", help="only the end-to-end part")
    parser.add_argument("--skip-end-to-end", action="store_true", help="only the kernel part")
    args = parser.parse_args(argv)
    if args.skip_kernels:
        print(f"machine: {machine_summary()}")
    else:
        from benchmark_kernels import run_kernel_benchmarks
        run_kernel_benchmarks(quick=args.quick)
    if not args.skip_end_to_end:
        run_end_to_end(args.quick)
    return 0


if __name__ == "__main__":
    sys.exit(main())
