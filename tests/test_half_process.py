"""The second half of a step in a forked process (transformer/parallel/half_process.py): the same bits as
on a thread or one worker, a fall-back to threads when the child is gone or cannot see the
parameters, and no process left behind by a run, Ctrl-C included."""
import json
import multiprocessing
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from transformer.parallel import half_process
from transformer.parallel.threads import blas_default_threads, blas_threads
from transformer.training.trainer import TrainConfig, Trainer

from test_data_parallel import SMALL, assert_same_run
from test_train_run import wait_for_logged_steps

pytestmark = pytest.mark.skipif(not half_process.available(), reason="a forked second half needs Linux")

REPO = Path(__file__).resolve().parent.parent


def trainer():
    return Trainer(SMALL, TrainConfig(steps=100, batch_size=32, eval_every=0, checkpoint_every=0))


def steps(run, workers_per_step):
    """One step of ``run`` per entry, on that many workers; -> (losses, norms, estimates), weights."""
    with blas_threads(1):
        records = [run.train_step(workers) for workers in workers_per_step]
    return [(r["loss"], r["grad_norm"], r["batch_exact_match"]) for r in records], run.model.state_dict()


def test_a_process_for_the_second_half_gives_the_one_worker_bits():
    alone = steps(trainer(), [1, 1, 1, 1, 1])
    forked = trainer()
    try:
        assert forked.start_half_process()
        assert_same_run(alone, steps(forked, [2, 1, 2, 2, 2]))
    finally:
        forked.stop_half_process()
    assert forked.half_process is None and multiprocessing.active_children() == []


def test_a_killed_child_warns_once_and_the_run_goes_on_with_the_same_numbers():
    alone = steps(trainer(), [1, 1, 1, 1])
    forked = trainer()
    assert forked.start_half_process()
    first = steps(forked, [2, 2])
    os.kill(forked.half_process._process.pid, signal.SIGKILL)
    with pytest.warns(RuntimeWarning, match=r"second half's process ended \(exit code -9\); the steps go on "
                                            "with the second half on a thread"):
        rest = steps(forked, [2])
    rest_after = steps(forked, [2])
    assert forked.half_process is None and not forked.start_half_process()   # not forked again
    assert_same_run(alone, (first[0] + rest[0] + rest_after[0], rest_after[1]))


def test_parameters_moved_out_of_the_shared_memory_run_on_a_thread():
    """The child reads the values in the shared mapping: a parameter whose ``.data`` was replaced
    there is not, so the step runs both halves here until ``gather()`` puts it back."""
    reference, forked = trainer(), trainer()
    try:
        assert forked.start_half_process()
        for run in (reference, forked):
            steps(run, [2])
            p = run.model.parameters()[0]
            p.data = p.data * np.float32(0.5)
        assert not forked.half_process.usable()
        a, b = steps(reference, [2]), steps(forked, [2])
        assert_same_run(a, b)
        forked.flat_params.gather()
        assert forked.half_process.usable()
        assert_same_run(steps(reference, [2, 2]), steps(forked, [2, 2]))
    finally:
        forked.stop_half_process()


def test_a_run_forks_after_its_first_step_and_leaves_no_process(tmp_path, monkeypatch):
    started = []
    real = half_process.HalfProcess.__init__

    def noted(self, trainer):
        started.append(trainer.step)
        real(self, trainer)
    monkeypatch.setattr(half_process.HalfProcess, "__init__", noted)
    run = Trainer(SMALL, TrainConfig(steps=4, batch_size=16, eval_every=0, checkpoint_every=0), out_dir=str(tmp_path))
    run.run(progress=False, blas_threads="auto")
    if blas_default_threads() > 1:                        # auto may use two workers
        assert started == [1]
    assert run.half_process is None and multiprocessing.active_children() == []


def test_the_setting_says_thread_or_process(monkeypatch):
    monkeypatch.setenv(half_process.ENV_VAR, "thread")
    assert not half_process.available() and not trainer().start_half_process()
    monkeypatch.setenv(half_process.ENV_VAR, "processes")
    with pytest.raises(ValueError, match="MINIGRAD_SECOND_HALF must be 'process' or 'thread', got 'processes'"):
        half_process.available()


@pytest.mark.skipif(blas_default_threads() < 2, reason="auto uses two workers only with a second core")
def test_ctrl_c_in_a_terminal_saves_and_leaves_no_process(tmp_path):
    """A terminal's Ctrl-C signals the whole process group, the child too: it ignores it, the
    parent finishes the step, saves, says how to resume, and the child ends with it."""
    folder = tmp_path / "run"
    process = subprocess.Popen([sys.executable, str(REPO / "examples" / "train_dates.py"), "--out", str(folder),
                                "--max-steps", "100000", "--d-model", "32", "--heads", "4", "--layers", "1",
                                "--d-ff", "64", "--batch-size", "32", "--no-progress"],
                               cwd=tmp_path, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               start_new_session=True, env={**os.environ, "MINIGRAD_BLAS_THREADS": "auto"})
    wait_for_logged_steps(process, folder, 5)
    assert len(group_members(process.pid)) == 2           # the run and its second half's process
    os.killpg(process.pid, signal.SIGINT)
    out, err = process.communicate(timeout=120)
    assert process.returncode == 130, err
    lines = [line for line in err.splitlines() if not line.startswith("compiling kernels")]
    assert len(lines) == 1 and lines[0].startswith("interrupted at step ") and "Traceback" not in err, err
    steps_logged = [json.loads(line)["step"] for line in (folder / "train_log.jsonl").read_text().splitlines()]
    assert steps_logged == list(range(1, len(steps_logged) + 1))
    deadline = time.monotonic() + 10
    while group_members(process.pid):      # the child ended with its parent
        assert time.monotonic() < deadline, "a process of the run outlived it"
        time.sleep(0.05)


def group_members(group):
    """The pids of the living processes in process group ``group`` (from /proc)."""
    members = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[2] == str(group) and fields[0] != "Z":      # pgrp; a zombie has ended
            members.append(int(entry))
    return members


@pytest.fixture(autouse=True)
def no_child_left():
    """Every test ends its children (a forgotten one would keep pytest waiting at exit)."""
    yield
    assert multiprocessing.active_children() == []
