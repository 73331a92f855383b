"""The same --seed gives the same run on any load.

OpenBLAS's last bits depend on its thread count (``transformer/parallel/threads.py``), so training
keeps one BLAS thread unless told otherwise and its thread policy only chooses whether
the batch's two fixed halves run one after the other or side by side
(``transformer/parallel/data_parallel.py``): nothing a busy machine changes (timing, the policy's
choices) can reach the numbers. These tests run without the suite's own
``MINIGRAD_BLAS_THREADS=1`` (conftest.py), as a user's run would, with and without a
busy process beside them.
"""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from transformer.parallel import threads

REPO = Path(__file__).resolve().parents[1]
TIMING = ("seconds", "tokens_per_s", "elapsed", "workers")   # what the load may change: speed only
SMALL = ["--d-model", "32", "--heads", "4", "--layers", "1", "--d-ff", "64", "--batch-size", "128",
         "--schedule", "constant", "--warmup", "10", "--target-accuracy", "0", "--no-progress"]


def test_training_defaults_to_one_blas_thread_and_a_policy_for_the_halves(monkeypatch):
    monkeypatch.delenv(threads.ENV_VAR, raising=False)
    monkeypatch.setattr(threads, "blas_default_threads", lambda: 2)
    default = threads.TrainingThreads()
    assert default.setting == "auto" and default.blas == 1 and default.policy is not None
    monkeypatch.setenv(threads.ENV_VAR, "1")
    assert threads.TrainingThreads().policy is None and threads.TrainingThreads().blas == 1
    assert threads.blas_setting() == 1             # decoding's reading of the same variable is unchanged


def busy_process():
    """A pure-Python spinner keeping one core busy, as another program would."""
    return subprocess.Popen([sys.executable, "-c", "while True: pass"])


def train_run(folder, *argv, busy=False):
    """dates-train in a fresh process with the user's environment (no forced thread count);
    -> its log records without the timing fields, and its stdout."""
    env = {k: v for k, v in os.environ.items() if k != threads.ENV_VAR}
    spinner = busy_process() if busy else None
    try:
        done = subprocess.run([sys.executable, str(REPO / "examples" / "train_dates.py"), "--out", str(folder),
                               *map(str, argv)], env=env, capture_output=True, text=True, timeout=900)
    finally:
        if spinner is not None:
            spinner.kill()
            spinner.wait()
    assert done.returncode == 0, done.stderr
    records = [json.loads(line) for line in (folder / "train_log.jsonl").read_text().splitlines()]
    if threads.blas_default_threads() > 1:         # the policy tries two workers after 8 timed steps, on any load
        assert {r["workers"] for r in records} == {1, 2}
    return [{k: v for k, v in r.items() if k not in TIMING} for r in records], done.stdout


def test_the_same_seed_repeats_bit_for_bit_with_a_busy_process_beside_it(tmp_path):
    quiet, _ = train_run(tmp_path / "quiet", "--max-steps", 25, "--seed", 3, *SMALL)
    busy, _ = train_run(tmp_path / "busy", "--max-steps", 25, "--seed", 3, *SMALL, busy=True)
    assert [r["blas_threads"] for r in quiet] == [1] * 25
    assert quiet == busy                           # losses, gradient norms, accuracies: every bit


@pytest.mark.slow
def test_a_default_run_stops_at_the_same_step_with_the_same_accuracy_on_any_load(tmp_path):
    """``dates-train --seed 0`` twice, the second with a busy process beside it (~20 s quiet)."""
    quiet, quiet_out = train_run(tmp_path / "quiet", "--seed", 0, "--no-progress")
    busy, busy_out = train_run(tmp_path / "busy", "--seed", 0, "--no-progress", busy=True)
    assert quiet == busy
    assert outcome(quiet_out) == outcome(busy_out)


def outcome(stdout):
    """The summary's accuracy and stopping lines, without the seconds."""
    lines = [line for line in stdout.splitlines() if line.startswith(("held-out exact match", "target"))]
    assert len(lines) == 2, stdout
    return [re.sub(r"after [0-9.]+ s", "after N s", line) for line in lines]
