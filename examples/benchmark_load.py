"""The training step and greedy decoding while N busy background processes share the machine.

    python examples/benchmark.py --skip-kernels --skip-end-to-end --load 0,1,2 \\
        --torch-python /tmp/torchref/bin/python

For each load (0, 1, 2 busy processes: pure-Python loops this benchmark starts and
stops itself) it times, in alternating blocks, minigrad with the BLAS thread policy
(``auto``), minigrad with one and with two BLAS threads forced, and, given a Python
with torch, the PyTorch reference: the same model built from ``torch.nn`` layers and trained at
the same config (``examples/compare_with_pytorch.py --step-summary``, run as a subprocess; its
SUMMARY line gives the step median, p90 and decode rate).

The busy processes are bounded in time, leave when this process dies (they watch
their parent), and are killed on any exit: normal, exception, Ctrl-C or SIGTERM.
"""
import atexit
import json
import os
import signal
import statistics
import subprocess
import sys
import time

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_TORCH_SCRIPT = os.path.join(REPO, "examples", "compare_with_pytorch.py")

# A busy process: pure CPU, no memory traffic; it stops at its deadline or when its parent is gone.
# The parent's pid comes as an argument: a parent killed before the spinner's first line still counts.
SPINNER = """
import os, sys, time
deadline, parent, x = time.monotonic() + float(sys.argv[1]), int(sys.argv[2]), 0
while time.monotonic() < deadline and os.getppid() == parent:
    for _ in range(100000):
        x += 1
"""


class BusyProcesses:
    """``with BusyProcesses(n):`` runs n CPU-bound processes for at most ``seconds``."""

    def __init__(self, count: int, seconds: float = 1800.0):
        if count < 0 or seconds <= 0:
            raise ValueError(f"need count >= 0 and seconds > 0, got {count} and {seconds}")
        self.count, self.seconds = count, seconds
        self.processes = []
        self._previous_sigterm = None

    def __enter__(self):
        atexit.register(self.stop)
        if self.count and _in_main_thread():                # SIGTERM's default would skip every cleanup
            self._previous_sigterm = signal.signal(signal.SIGTERM, _exit_on_sigterm)
        for _ in range(self.count):
            self.processes.append(subprocess.Popen(
                [sys.executable, "-S", "-c", SPINNER, str(self.seconds), str(os.getpid())], start_new_session=True,
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        return self

    def __exit__(self, *exc_info):
        self.stop()
        return False

    @property
    def pids(self):
        return [process.pid for process in self.processes]

    def stop(self):
        """Kill every busy process (each leads its own process group) and reap it. Idempotent."""
        for process in self.processes:
            if process.poll() is None:
                try:
                    os.killpg(process.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            process.wait()
        self.processes = []
        if self._previous_sigterm is not None and _in_main_thread():
            signal.signal(signal.SIGTERM, self._previous_sigterm)
            self._previous_sigterm = None
        atexit.unregister(self.stop)


def _in_main_thread():
    import threading
    return threading.current_thread() is threading.main_thread()


def _exit_on_sigterm(signum, frame):
    raise SystemExit(128 + signum)


def other_runnable_threads(seconds: float = 0.5, samples: int = 10):
    """Threads ready to run besides the one reading, averaged over ``seconds`` (Linux; None elsewhere).

    On two cores, 1 or more means a second BLAS thread has to share a core."""
    counts = []
    try:
        for _ in range(samples):
            with open("/proc/loadavg") as f:
                counts.append(int(f.read().split()[3].split("/")[0]) - 1)
            time.sleep(seconds / samples)
    except (OSError, ValueError, IndexError):
        return None
    return statistics.mean(counts)


# ------------------------------------------------------------------ the PyTorch reference
def torch_command(torch_python, torch_script, steps: int, skip: int):
    """The reference run: PyTorch's twin of the default model at dates-train's config, on two
    threads (the row's label), from seed 0's weights; no evaluation until its decode timing."""
    return [torch_python, torch_script, "--step-summary", "--steps", str(steps), "--timing-skip", str(skip),
            "--torch-threads", "2", "--seed", "0"]


def run_torch_reference(torch_python, torch_script, steps: int = 60, skip: int = 20, timeout: float = 900):
    """Run the reference once; its SUMMARY as a dict (median_step_ms, p90_step_ms, decode_dates_per_s, ...)."""
    command = torch_command(torch_python, torch_script, steps, skip)
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=REPO)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"the PyTorch reference took more than {timeout:.0f} s: {' '.join(command)}") from None
    for line in reversed(result.stdout.splitlines()):
        if line.startswith("SUMMARY "):
            return json.loads(line[len("SUMMARY "):])
    tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-5:])
    raise RuntimeError(f"the PyTorch reference printed no SUMMARY line (exit {result.returncode}): "
                       f"{' '.join(command)}\n{tail}")


def check_torch(torch_python, torch_script):
    """One clear error before the long run if the reference cannot start (it imports the
    repository's minigrad and transformer too, so their dependencies must be there)."""
    if not os.path.isfile(torch_script):
        raise SystemExit(f"--torch-script: no file {torch_script}; pass examples/compare_with_pytorch.py "
                         "or a script printing the same SUMMARY line")
    probe = subprocess.run([torch_python, "-c", "import torch, numpy, numba"], capture_output=True, text=True)
    if probe.returncode:
        raise SystemExit(f"--torch-python {torch_python} cannot import torch, numpy and numba "
                         f"(pip install -e {REPO} into it): "
                         f"{probe.stderr.strip().splitlines()[-1] if probe.stderr.strip() else probe.returncode}")


# ------------------------------------------------------------------------ minigrad blocks
class MinigradRun:
    """One training run kept across blocks (so ``auto`` learns as a real run would) under one setting."""

    def __init__(self, setting):
        from transformer.parallel.threads import TrainingThreads
        from transformer.training.trainer import TrainConfig
        from transformer.training.dates import DateTrainer
        self.setting = setting
        self.trainer = DateTrainer(train_config=TrainConfig(steps=10 ** 6, eval_every=0, checkpoint_every=0))
        self.threads = TrainingThreads(setting)

    def steps(self, count: int, max_seconds: float):
        """Step times of up to ``count`` steps, stopping early (after 5 steps) past ``max_seconds``."""
        times, start = [], time.perf_counter()
        with self.trainer.gradients.running(self.threads):      # as dates-train does
            while len(times) < count and (len(times) < 5 or time.perf_counter() - start < max_seconds):
                begin = time.perf_counter()
                self.trainer.train_step()
                times.append(time.perf_counter() - begin)
        return times


def decode_rate(setting, model, src) -> float:
    """Greedy-decoded dates per second under ``setting`` (decoding reads MINIGRAD_BLAS_THREADS)."""
    from transformer.parallel.threads import ENV_VAR
    from transformer.decoding import greedy_decode
    previous = os.environ.get(ENV_VAR)
    os.environ[ENV_VAR] = str(setting)
    try:
        start = time.perf_counter()
        for i in range(0, len(src), 1000):
            greedy_decode(model, src[i:i + 1000])
        return len(src) / (time.perf_counter() - start)
    finally:
        if previous is None:
            del os.environ[ENV_VAR]
        else:
            os.environ[ENV_VAR] = previous


LABELS = {"auto": "minigrad, threads auto", 1: "minigrad, 1 BLAS thread", 2: "minigrad, 2 BLAS threads",
          "torch": "PyTorch eager, 2 threads"}


def run_load_benchmark(loads, torch_python=None, torch_script=DEFAULT_TORCH_SCRIPT, rounds=2, steps=30,
                       torch_steps=60, decode_dates=2000, max_block_seconds=30.0, spin_seconds=1800.0):
    """Alternating blocks per load level; returns {load: {variant: summary}} and prints the table."""
    from transformer.parallel.threads import blas_default_threads
    from transformer.tasks.dates import DateDataset
    from transformer.models.encoder_decoder import Transformer

    variants = ["auto", 1, max(2, blas_default_threads())]
    if torch_python:
        check_torch(torch_python, torch_script)
        variants.append("torch")
    print(f"\n== Under load: 0..{max(loads)} busy background processes; {rounds} rounds of alternating blocks, "
          f"{steps} minigrad steps each, PyTorch {torch_steps} steps ({torch_steps // 3} skipped) ==")
    runs = {v: MinigradRun(v) for v in variants if v != "torch"}
    for run in runs.values():
        run.steps(3, max_block_seconds)                   # compile, warm up, let auto leave its warm-up
    decode_src = DateDataset().test_src[:decode_dates]
    decode_model = Transformer()                          # untrained: always decodes all 19 tokens
    for setting in runs:
        decode_rate(setting, decode_model, decode_src[:10])
    results = {}
    for load in loads:
        blocks = {v: [] for v in variants}
        with BusyProcesses(load, spin_seconds):
            time.sleep(0.3)
            busy = other_runnable_threads()
            for round_ in range(rounds):
                for variant in (variants if round_ % 2 == 0 else variants[::-1]):
                    blocks[variant].append(_block(variant, runs, steps, max_block_seconds, decode_model,
                                                  decode_src, torch_python, torch_script, torch_steps))
        results[load] = {v: _summarise(b) for v, b in blocks.items()}
        results[load]["other_runnable"] = busy
        _print_level(load, results[load], variants, runs)
    _print_targets(results, loads, variants)
    return results


def _block(variant, runs, steps, max_seconds, decode_model, decode_src, torch_python, torch_script, torch_steps):
    if variant == "torch":
        try:
            summary = run_torch_reference(torch_python, torch_script, torch_steps, torch_steps // 3)
        except RuntimeError as error:                     # e.g. too slow under load: keep the other rows
            print(f"   PyTorch block failed: {error}")
            return {"median_ms": float("nan"), "p90_ms": float("nan"), "dates_per_s": float("nan")}
        return {"median_ms": summary["median_step_ms"], "p90_ms": summary["p90_step_ms"],
                "dates_per_s": summary["decode_dates_per_s"]}
    times = runs[variant].steps(steps, max_seconds)
    return {"median_ms": 1e3 * statistics.median(times), "p90_ms": 1e3 * float(np.percentile(times, 90)),
            "dates_per_s": decode_rate(variant, decode_model, decode_src)}


def _summarise(blocks):
    """Median over the blocks of each block's median, p90 and decode rate."""
    return {key: statistics.median(block[key] for block in blocks) for key in blocks[0]}


def _print_level(load, row, variants, runs):
    busy = row["other_runnable"]
    busy_text = f" (threads ready to run besides ours, busy processes included: {busy:.1f})" if busy is not None else ""
    print(f"-- {load} busy process{'es' if load != 1 else ''}{busy_text}; load average {os.getloadavg()[0]:.2f}")
    for variant in variants:
        r = row[variant]
        note = ""
        if variant == "auto" and runs["auto"].threads.policy:
            used = runs["auto"].threads.policy.steps_with
            note = f"   (so far: {used[1]} steps on 1 worker, {sum(used.values()) - used[1]} on 2)"
        print(f"   {LABELS.get(variant, f'minigrad, {variant} BLAS threads'):<27}step median {r['median_ms']:7.1f} ms"
              f"   p90 {r['p90_ms']:7.1f} ms   greedy decode {r['dates_per_s']:6.0f} dates/s{note}")


def _print_targets(results, loads, variants):
    """The ratios the speed targets are stated in (docs/speed.md): quiet step <= 0.75x PyTorch
    eager's, a step beside one busy process <= 1.3x the quiet one."""
    if 0 not in loads or 1 not in loads:
        return
    quiet, busy = results[0]["auto"], results[1]["auto"]
    print(f"threads auto, 1 busy process vs none: step median {busy['median_ms'] / quiet['median_ms']:.2f}x "
          f"(target <= 1.3x), p90 {busy['p90_ms'] / quiet['median_ms']:.2f}x the quiet median, "
          f"decoding {busy['dates_per_s'] / quiet['dates_per_s']:.0%} of its quiet rate")
    fixed = [v for v in variants if v not in ("auto", 1, "torch")]
    if fixed:
        before = results[0][fixed[0]]
        print(f"threads auto / {fixed[0]} BLAS threads (OpenBLAS's default), no busy process: "
              f"step median {quiet['median_ms'] / before['median_ms']:.2f}x, "
              f"decoding {quiet['dates_per_s'] / before['dates_per_s']:.2f}x the rate")
    if "torch" in variants:
        print(f"minigrad auto / PyTorch step median: {quiet['median_ms'] / results[0]['torch']['median_ms']:.2f}x "
              f"with no busy process (target <= 0.75x), "
              f"{busy['median_ms'] / results[1]['torch']['median_ms']:.2f}x with one")
