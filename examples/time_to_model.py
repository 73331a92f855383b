"""Time to a trained model: the README's first table, re-drawn by one command.

    python examples/time_to_model.py                   # seed 0 cold, seeds 0 1 2 warm, seed 0 beside a busy process
    python examples/time_to_model.py --seeds 0 --no-cold --no-busy

Each row is one ``dates-train --seed S --no-progress`` run of the default model, in a fresh process
and a fresh temporary folder, as a user runs it: "cold" with an empty Numba cache (a fresh clone's
state: the kernels' compilation is included), "warm" with the cache the cold run filled, "busy"
beside one busy process (a pure-Python spinner, as ``benchmark_load.py`` starts). It prints the
machine, then the table in the README's markdown: where the cool-down started, where the run
stopped, the held-out exact match and the whole command's wall time.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

EXAMPLES = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, EXAMPLES)
sys.path.insert(0, os.path.dirname(EXAMPLES))

TRAIN = os.path.join(EXAMPLES, "train_dates.py")
PATTERNS = {"cooldown": r"cool-down from step (\d+)", "stopped": r"^steps (\d+),",
            "exact": r"^held-out exact match ([0-9.]+%) \("}


def train(seed: int, cache_dir: str) -> dict:
    """One dates-train run in a fresh process: its figures and its whole wall time."""
    env = {**os.environ, "NUMBA_CACHE_DIR": cache_dir}
    with tempfile.TemporaryDirectory() as out:
        start = time.perf_counter()
        done = subprocess.run([sys.executable, TRAIN, "--seed", str(seed), "--no-progress", "--out", out],
                              env=env, capture_output=True, text=True)
        seconds = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"error: dates-train --seed {seed} failed:\n{done.stderr}")
    found = {key: re.search(pattern, done.stdout, re.M) for key, pattern in PATTERNS.items()}
    return {key: match.group(1) if match else "-" for key, match in found.items()} | {"seconds": seconds}


def row(label, runs) -> str:
    def joined(key, fmt="{}"):
        return " / ".join(fmt.format(run[key]) for run in runs)
    return (f"| {label} | {joined('cooldown')} | {joined('stopped')} | {joined('exact')} | "
            f"{joined('seconds', '{:.1f}')} s |")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", default="0,1,2", help="the warm runs' seeds (default: %(default)s)")
    parser.add_argument("--no-cold", action="store_true", help="skip the cold-cache run")
    parser.add_argument("--no-busy", action="store_true", help="skip the run beside a busy process")
    args = parser.parse_args(argv)
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    from benchmark_kernels import machine_info
    from benchmark_load import BusyProcesses
    info = machine_info()
    print(f"{info['cpu']}, {info['cores']} cores, {info['vector_bits']}-bit vectors, load average "
          f"{info['load_average_1min']:.1f}; Python {info['python']}, numpy {info['numpy']} ({info['blas']}), "
          f"numba {info['numba']}; {time.strftime('%Y-%m-%d')}", flush=True)
    rows = ["| run | cool-down from step | stopped at step | held-out exact match | whole command |",
            "|---|---|---|---|---|"]
    with tempfile.TemporaryDirectory() as cache:
        if not args.no_cold:
            rows.append(row(f"seed {seeds[0]}, cold", [train(seeds[0], cache)]))
        else:
            train(seeds[0], cache)                  # fills the cache for the warm runs
        rows.append(row(f"seed {' / '.join(map(str, seeds))}, warm cache", [train(s, cache) for s in seeds]))
        if not args.no_busy:
            with BusyProcesses(1):
                rows.append(row(f"seed {seeds[0]}, warm, beside one busy process", [train(seeds[0], cache)]))
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
