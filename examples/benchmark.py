"""Speed of minigrad, kernels and end to end, side by side with plain numpy, in one run.

    python examples/benchmark.py            # everything (a few minutes)
    python examples/benchmark.py --quick    # fewer repetitions
    python examples/benchmark.py --skip-kernels
    python examples/benchmark.py --skip-kernels --skip-end-to-end --load 0,1,2 \
        --torch-python /tmp/torchref/bin/python       # under 0, 1, 2 busy processes
    python examples/benchmark.py --sizes --torch-python PATH --write-docs   # docs/benchmarks.md
    python examples/benchmark.py --sizes --torch-python PATH --d-models 64   # the default size alone

Part 1 (examples/benchmark_kernels.py): each Numba kernel against its numpy
twin, compile time with an empty cache and warm start-up.
Part 2: the date model's training step (forward + backward + Adam, default
config, batch 128) and greedy-decode throughput on the 2,000 held-out dates,
once with the Numba kernels and once with the pure-numpy path
(``kernels.use_backend("numpy")``).

Part 3, with ``--load`` (examples/benchmark_load.py): the training step and
greedy decoding while N busy background processes of the benchmark's own share
the machine, for each BLAS thread setting and, with ``--torch-python``, the
PyTorch reference (the same model in ``torch.nn``: ``compare_with_pytorch.py --step-summary``).

Part 4, with ``--sizes`` (examples/benchmark_sizes.py; it replaces parts 1-3): the step beside
PyTorch eager at d_model 64 / 128 / 256 / 512, fresh processes alternating, and the default
step quiet on two workers, on one, and beside a busy process; ``--write-docs`` writes
``docs/benchmarks.md`` and ``docs/images/speed_by_size.png`` (about 8 minutes on two quiet
cores, ``--quick`` about 3, without the torch.compile column).

torch.compile, with ``--sizes`` when the side Python's torch has it (``--no-compile`` leaves it
out): the same PyTorch step with its forward and loss compiled by inductor
(``examples/torch_step.py --compile``) joins each round as a third process. Compiling takes about a
minute on two cores from an empty cache (46-75 s measured at d_model 64, a little more for the larger
sizes), 4-6 s once inductor's cache is filled; it is the process's first step, reported apart as its compile time,
never in the steady median. If compiling fails, the column says why in one line.

Figures are medians over many repetitions; the first steps (compilation,
warm-up) are left out of the medians. BLAS threads follow minigrad's policy
(``transformer/parallel/threads.py``) unless ``MINIGRAD_BLAS_THREADS`` forces a count.
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
    from transformer.models.attention import MultiHeadAttention
    for _, module in model.named_modules():
        if isinstance(module, MultiHeadAttention):
            module.fused = fused


def time_training_steps(backend: str, steps: int, warmup: int = 3, fused: bool = True) -> dict:
    from minigrad import kernels
    from transformer.training.trainer import TrainConfig
    from transformer.training.dates import DateTrainer

    with kernels.use_backend(backend):
        trainer = DateTrainer(train_config=TrainConfig(steps=steps + warmup, eval_every=0, checkpoint_every=0))
        use_fused_attention(trainer.model, fused)
        times = []
        with trainer.gradients.running():                   # as dates-train does
            for i in range(steps + warmup):
                start = time.perf_counter()
                trainer.train_step()
                if i >= warmup:
                    times.append(time.perf_counter() - start)
    return {"median_ms": 1e3 * statistics.median(times),
            "p10_ms": 1e3 * float(np.percentile(times, 10)), "p90_ms": 1e3 * float(np.percentile(times, 90))}


def time_greedy_decoding(backend: str, repeats: int) -> dict:
    from minigrad import kernels
    from transformer.tasks.dates import DateDataset
    from transformer.decoding import greedy_decode
    from transformer.models.encoder_decoder import Transformer

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
    parser.add_argument("--load", type=load_levels, default=None, metavar="N,N,...",
                        help="also time training and decoding with this many busy background processes, e.g. 0,1,2")
    parser.add_argument("--torch-python", default=None, metavar="PATH",
                        help="a Python with torch: adds the PyTorch reference to --load")
    parser.add_argument("--torch-script", default=None, metavar="PATH",
                        help="the reference script (default examples/compare_with_pytorch.py, run with "
                             "--step-summary)")
    parser.add_argument("--rounds", type=int, default=None, help="alternating rounds per load (default 2, quick 1)")
    parser.add_argument("--load-steps", type=int, default=None,
                        help="minigrad steps per block under load (default 30, quick 15)")
    parser.add_argument("--sizes", action="store_true",
                        help="only the step by model size beside PyTorch (needs --torch-python), quiet and loaded")
    parser.add_argument("--write-docs", action="store_true",
                        help="with --sizes: write docs/benchmarks.md and docs/images/speed_by_size.png")
    parser.add_argument("--d-models", type=d_model_list, default=None, metavar="D,D,...",
                        help="with --sizes: only these sizes (of 64,128,256,512), and not the quiet/loaded part")
    parser.add_argument("--no-compile", action="store_true",
                        help="with --sizes: leave out the torch.compile column (otherwise there whenever the side "
                             "Python's torch has torch.compile: its first step compiles, about a minute on two cores "
                             "from an empty cache, seconds from a filled one, reported apart from the steady step)")
    args = parser.parse_args(argv)
    if args.write_docs and not args.sizes:
        parser.error("--write-docs goes with --sizes")
    if (args.d_models or args.no_compile) and not args.sizes:
        parser.error("--d-models and --no-compile go with --sizes")
    if args.write_docs and args.d_models:
        parser.error("--write-docs writes the page of every size: leave out --d-models")
    if args.sizes:
        if not args.torch_python:
            parser.error("--sizes needs --torch-python PATH: a Python with torch (minigrad never imports it)")
        from benchmark_sizes import run_size_benchmark
        command = ("python examples/benchmark.py --sizes" + (" --quick" if args.quick else "")
                   + (" --no-compile" if args.no_compile else ""))
        run_size_benchmark(args.torch_python, quick=args.quick, write_docs=args.write_docs, command=command,
                           d_models=args.d_models, compiled=not args.no_compile, loaded=args.d_models is None)
        return 0
    if args.skip_kernels:
        print(f"machine: {machine_summary()}")
    else:
        from benchmark_kernels import run_kernel_benchmarks
        run_kernel_benchmarks(quick=args.quick)
    if not args.skip_end_to_end:
        run_end_to_end(args.quick)
    if args.load is not None:
        from benchmark_load import DEFAULT_TORCH_SCRIPT, run_load_benchmark
        rounds = args.rounds or (1 if args.quick else 2)
        steps = args.load_steps or (15 if args.quick else 30)
        run_load_benchmark(args.load, args.torch_python, args.torch_script or DEFAULT_TORCH_SCRIPT,
                           rounds=rounds, steps=steps, torch_steps=max(30, 2 * steps))
    return 0


def d_model_list(text: str):
    """``"64,128"`` -> [64, 128]: sizes of examples/benchmark_sizes.py."""
    from benchmark_sizes import SIZES
    known = [size[0] for size in SIZES]
    try:
        chosen = [int(part) for part in text.split(",")]
    except ValueError:
        chosen = None
    if not chosen or any(d not in known for d in chosen):
        raise argparse.ArgumentTypeError(f"--d-models wants some of {','.join(map(str, known))} separated by "
                                         f"commas, got {text!r}")
    return chosen


def load_levels(text: str):
    """``"0,1,2"`` -> [0, 1, 2]: numbers of busy background processes."""
    try:
        levels = [int(part) for part in text.split(",")]
    except ValueError:
        levels = None
    if not levels or any(level < 0 or level > 16 for level in levels):
        raise argparse.ArgumentTypeError(f"--load wants busy-process counts 0..16 separated by commas, got {text!r}")
    return levels


if __name__ == "__main__":
    sys.exit(main())
