"""dates-train keeps the user's work safe and stops when the model is done:

- Ctrl-C (SIGINT to a real process): exit 130, one line, the checkpoint holds the last
  completed step, and --resume ends with the same weights as an uninterrupted run and a
  log without duplicate steps;
- a folder that holds a checkpoint is never silently overwritten (--force, --resume);
- --resume writes into the checkpoint's folder, cuts the log back, continues `elapsed`;
- a lock keeps a second run out of a folder; a stale lock (dead pid) is taken over;
- failed writes: one line, exit 2, previous checkpoint intact, no temporary files;
- the stopping rule: the cool-down starts at the first evaluation at the target and the
  target must hold at its end (scripted accuracies), and a real tiny run stops early.
"""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from transformer.commands import dates as cli

from transformer.training import trainer as training
from transformer.files.checkpoint import load_checkpoint
from transformer.files.run_dir import LOCK_NAME
from transformer.training.stopping import TargetStop
from transformer.training.dates import DateTrainer
from transformer.models.config import ModelConfig

REPO = Path(__file__).resolve().parents[1]
TINY = ["--d-model", "16", "--heads", "2", "--layers", "1", "--d-ff", "32", "--batch-size", "8",
        "--schedule", "constant", "--warmup", "4", "--target-accuracy", "0", "--no-progress"]


def train(capsys, *argv):
    code = cli.train_main([*map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


def log_steps(folder):
    with open(os.path.join(folder, "train_log.jsonl")) as f:
        return [json.loads(line)["step"] for line in f]


def weights(path):
    with np.load(path) as archive:
        return {name: archive[name] for name in archive.files if name.startswith(("model/", "optim/"))}


def wait_for_logged_steps(process, folder, count, seconds=240):
    """Wait until the run ``process`` trains into ``folder`` has logged ``count`` steps."""
    log = folder / "train_log.jsonl"
    deadline = time.monotonic() + seconds
    while not (log.exists() and len(log.read_text().splitlines()) >= count):
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "the run did not start training"
        time.sleep(0.05)


def assert_one_line_error(code, err, *fragments):
    assert code == 2, err
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    for fragment in fragments:
        assert fragment in err, err


# ------------------------------------------------------------------ interrupt
def test_ctrl_c_saves_the_last_step_and_resume_matches_an_uninterrupted_run(tmp_path):
    folder = tmp_path / "run"
    process = subprocess.Popen([sys.executable, str(REPO / "examples" / "train_dates.py"), "--out", str(folder),
                                "--max-steps", "100000", *TINY], cwd=tmp_path, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    wait_for_logged_steps(process, folder, 5)
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=120)
    assert process.returncode == 130, err
    lines = [line for line in err.splitlines() if not line.startswith("compiling kernels")]
    assert len(lines) == 1 and "Traceback" not in err, err
    step = load_checkpoint(str(folder / "model.npz"))[2]["step"]
    assert lines[0] == (f"interrupted at step {step}; checkpoint saved to {folder / 'model.npz'}; "
                        f"resume with: dates-train --resume {folder / 'model.npz'}")
    assert log_steps(folder) == list(range(1, step + 1))            # the last completed step, saved
    assert [p for p in os.listdir(folder) if p.startswith(".")] == []

    total = step + 3                   # the rest in fresh processes too: nothing shared with this one
    for argv in (["--resume", folder / "model.npz", "--max-steps", total, "--no-progress"],
                 ["--out", tmp_path / "straight", "--max-steps", total, *TINY]):
        finished = subprocess.run([sys.executable, str(REPO / "examples" / "train_dates.py"), *map(str, argv)],
                                  cwd=tmp_path, capture_output=True, text=True, timeout=240)
        assert finished.returncode == 0, finished.stderr
    resumed, straight = weights(folder / "model.npz"), weights(tmp_path / "straight" / "model.npz")
    assert sorted(resumed) == sorted(straight)
    for name in straight:
        np.testing.assert_array_equal(resumed[name], straight[name], err_msg=name)
    assert log_steps(folder) == list(range(1, total + 1))


def test_interrupt_before_the_first_step_saves_nothing(tmp_path, capsys, monkeypatch):
    def interrupted(self):
        raise KeyboardInterrupt

    monkeypatch.setattr(DateTrainer, "train_step", interrupted)
    code, out, err = train(capsys, "--out", tmp_path, "--max-steps", 5, *TINY)
    assert code == 130 and err.count("\n") == 1 and "interrupted before a step was saved" in err
    assert not (tmp_path / "model.npz").exists() and not (tmp_path / LOCK_NAME).exists()


def test_second_ctrl_c_during_the_save_keeps_the_previous_checkpoint(tmp_path, capsys, monkeypatch):
    code, _, err = train(capsys, "--out", tmp_path, "--max-steps", 3, *TINY)
    assert code == 0, err
    before = (tmp_path / "model.npz").read_bytes()

    def ctrl_c_twice(file, **arrays):            # the first Ctrl-C asked for this save; a second one lands
        file.write(b"PK\x03\x04 half")
        raise KeyboardInterrupt

    monkeypatch.setattr(np, "savez", ctrl_c_twice)
    code, _, err = train(capsys, "--resume", tmp_path / "model.npz", "--max-steps", 6, "--no-progress")
    assert code == 130 and err.count("\n") == 1, err
    assert (tmp_path / "model.npz").read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == ["model.npz", "train_log.jsonl"]


# -------------------------------------------------------- folders and resume
def test_a_new_run_refuses_to_replace_a_checkpoint_unless_forced(tmp_path, capsys):
    code, _, err = train(capsys, "--out", tmp_path, "--max-steps", 3, *TINY)
    assert code == 0, err
    before = (tmp_path / "model.npz").read_bytes()
    code, out, err = train(capsys, "--out", tmp_path, "--max-steps", 2, *TINY)
    assert_one_line_error(code, err, "already holds a checkpoint", "--force", f"--resume {tmp_path / 'model.npz'}")
    assert (tmp_path / "model.npz").read_bytes() == before and out == ""
    code, _, err = train(capsys, "--out", tmp_path, "--max-steps", 2, "--force", *TINY)
    assert code == 0, err
    assert load_checkpoint(str(tmp_path / "model.npz"))[2]["step"] == 2 and log_steps(tmp_path) == [1, 2]


def test_resume_writes_into_the_checkpoints_folder_and_cuts_the_log(tmp_path, capsys, monkeypatch):
    run = tmp_path / "run"
    code, _, err = train(capsys, "--out", run, "--max-steps", 3, *TINY)
    assert code == 0, err
    elapsed_before = json.loads((run / "train_log.jsonl").read_text().splitlines()[-1])["elapsed"]
    with open(run / "train_log.jsonl", "a") as log:      # steps a killed run logged after its last save
        log.write(json.dumps({"step": 4, "loss": 1.0}) + "\n" + json.dumps({"step": 5, "loss": 1.0}) + "\n")
        log.write('{"step": 6, "lo')                      # and a torn last line
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    code, out, err = train(capsys, "--resume", run / "model.npz", "--max-steps", 5, "--no-progress")
    assert code == 0, err
    assert log_steps(run) == [1, 2, 3, 4, 5] and os.listdir(elsewhere) == []
    records = [json.loads(line) for line in (run / "train_log.jsonl").read_text().splitlines()]
    assert records[3]["elapsed"] >= elapsed_before                 # elapsed continues
    assert load_checkpoint(str(run / "model.npz"))[2]["elapsed"] >= records[3]["elapsed"] - 1e-3


def test_resume_into_another_folder_copies_the_log_and_refuses_a_checkpoint_there(tmp_path, capsys):
    code, _, err = train(capsys, "--out", tmp_path / "a", "--max-steps", 3, *TINY)
    assert code == 0, err
    code, _, err = train(capsys, "--resume", tmp_path / "a" / "model.npz", "--out", tmp_path / "b",
                         "--max-steps", 4, "--no-progress")
    assert code == 0, err
    assert log_steps(tmp_path / "b") == [1, 2, 3, 4] and log_steps(tmp_path / "a") == [1, 2, 3]
    code, _, err = train(capsys, "--resume", tmp_path / "a" / "model.npz", "--out", tmp_path / "b",
                         "--max-steps", 4, "--no-progress")
    assert_one_line_error(code, err, "already holds a checkpoint")


def test_a_live_lock_refuses_a_second_run_and_a_stale_one_is_taken_over(tmp_path, capsys):
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (tmp_path / LOCK_NAME).write_text(f"{sleeper.pid}\n")
        code, _, err = train(capsys, "--out", tmp_path, "--max-steps", 2, *TINY)
        assert_one_line_error(code, err, f"another training run (pid {sleeper.pid}) is writing to {tmp_path}")
    finally:
        sleeper.kill()
        sleeper.wait()
    assert not (tmp_path / "model.npz").exists()
    (tmp_path / ".tmp-999-dead.npz").write_bytes(b"half a checkpoint")   # left by the killed run
    code, _, err = train(capsys, "--out", tmp_path, "--max-steps", 2, *TINY)         # the pid is dead now
    assert code == 0, err
    assert sorted(os.listdir(tmp_path)) == ["model.npz", "train_log.jsonl"]       # lock released, tmp gone


def test_two_real_runs_into_one_folder(tmp_path):
    argv = [sys.executable, str(REPO / "examples" / "train_dates.py"), "--out", str(tmp_path / "run"),
            "--max-steps", "100000", *TINY]
    first = subprocess.Popen(argv, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 240
        log = tmp_path / "run" / "train_log.jsonl"
        while not (log.exists() and log.read_text().count("\n") >= 1):     # a first step is done
            assert first.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        second = subprocess.run(argv + ["--force"], cwd=tmp_path, capture_output=True, text=True, timeout=240)
        assert second.returncode == 2 and f"(pid {first.pid})" in second.stderr
        assert second.stderr.count("\n") == 1, second.stderr
    finally:
        first.send_signal(signal.SIGTERM)
        _, err = first.communicate(timeout=120)
    assert first.returncode == 130 and "interrupted at step" in err


# --------------------------------------------------------------- bad writes
def test_a_failed_write_is_one_line_and_keeps_the_previous_checkpoint(tmp_path, capsys, monkeypatch):
    code, _, err = train(capsys, "--out", tmp_path, "--max-steps", 3, *TINY)
    assert code == 0, err
    before = (tmp_path / "model.npz").read_bytes()

    def disk_full(file, **arrays):
        file.write(b"PK\x03\x04 half")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(np, "savez", disk_full)
    code, _, err = train(capsys, "--resume", tmp_path / "model.npz", "--max-steps", 5, "--no-progress")
    assert_one_line_error(code, err, "No space left on device", "intact")
    assert (tmp_path / "model.npz").read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == ["model.npz", "train_log.jsonl"]


@pytest.mark.parametrize("make, fragment", [
    (lambda p: (p / "file").write_text("x") and p / "file", "is a file, not a folder"),
    (lambda p: (p / "file").write_text("x") and p / "file" / "sub", "file is a file, not a folder"),
    (lambda p: (p / "run" / "model.npz").mkdir(parents=True) or p / "run", "is a folder"),
    (lambda p: "", "--out is empty"),
])
def test_bad_out_folders(tmp_path, capsys, make, fragment):
    code, out, err = train(capsys, "--out", make(tmp_path), "--max-steps", 2, *TINY)
    assert_one_line_error(code, err, fragment)


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write anywhere")
def test_unwritable_out_folder(tmp_path, capsys):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    code, _, err = train(capsys, "--out", locked, "--max-steps", 2, *TINY)
    assert_one_line_error(code, err, "permission denied")


# ------------------------------------------------------------ stopping rule
def test_target_stop_rule():
    rule = TargetStop(target=0.9, confirm_steps=10, cooldown_at=0.8, window=2, min_gap=5)
    assert not rule.record_batch(1, 1.0)                     # the estimate needs a full window
    assert not rule.record_batch(2, 0.5)                     # estimate 0.75 < 0.8
    assert not rule.record_batch(3, 0.6)
    assert not rule.record_batch(4, 1.0) and rule.hit_step is None   # 0.8, but 4 steps < min_gap
    assert rule.record_batch(5, 1.0) and rule.hit_step == 5  # 1.0 >= cooldown_at: the cool-down starts
    assert not rule.record_batch(6, 1.0)                     # one hit at a time
    assert not rule.evaluation_due(14) and rule.evaluation_due(15)
    assert rule.record_evaluation(10, 0.95, 2.0) == ""       # inside the cool-down: logged only
    assert rule.reached_step == 10
    assert rule.record_evaluation(15, 0.85, 3.0) == "missed"  # the settled model fell short: search on,
    assert rule.hit_step is None and rule.hit_at == 0.9 and rule.reached_step is None   # for the target
    assert not rule.record_batch(21, 0.7) and not rule.record_batch(22, 0.9)    # estimates 0.85, 0.8 < 0.9
    assert rule.record_batch(23, 0.95) and rule.hit_step == 23
    assert rule.record_evaluation(33, 0.92, 5.0) == "confirmed"
    assert (rule.reached_step, rule.reached_seconds) == (33, 5.0) and rule.confirmed(33)

    assert not TargetStop(0.0, 10, window=1).record_batch(20, 1.0)   # 0 disables stopping
    assert TargetStop(0.0, 10).record_evaluation(5, 1.0, 0) == ""
    assert TargetStop(0.5, 10, cooldown_at=0.99).hit_at == 0.5     # cooldown_at is capped at the target


def scripted(monkeypatch, accuracy_at, batch_at=lambda step: 1.0):
    """Held-out accuracy and each training batch's exact match as functions of the step."""
    steps = iter(range(1, 10 ** 6))
    monkeypatch.setattr(DateTrainer, "batch_estimate", lambda self, extras: batch_at(next(steps)))
    monkeypatch.setattr(DateTrainer, "evaluate", lambda self, limit=None, show_wrong=5: {
        "exact_match": accuracy_at(self.step), "char_accuracy": 1.0, "count": 2000, "wrong": []})


def tiny_trainer(tmp_path):
    return DateTrainer(ModelConfig(d_model=16, num_heads=2, num_encoder_layers=1, num_decoder_layers=1,
                                        d_ff=32),
                   training.TrainConfig(steps=200, batch_size=8, warmup=4, cooldown=6, target_accuracy=0.99),
                   out_dir=str(tmp_path))


def test_run_cools_down_when_the_batches_are_right_and_stops_when_it_holds(tmp_path, monkeypatch):
    scripted(monkeypatch, lambda step: 1.0, batch_at=lambda step: 1.0 if step >= 9 else 0.5)
    trainer = tiny_trainer(tmp_path)
    summary = trainer.run(progress=False)
    # batches 9-12 all right: the cool-down starts after step 12; held-out checked once, at 18
    assert [h["step"] for h in trainer.history] == [18]
    assert trainer.schedule.cooldown_start == 12
    assert summary["steps"] == 18 and summary["target_confirmed"] and summary["reached_step"] == 18
    assert trainer.optimizer.lr == pytest.approx(trainer.config.lr * trainer.config.final_lr_fraction)
    assert load_checkpoint(str(tmp_path / "model.npz"))[2]["step"] == 18
    assert DateTrainer.resume(str(tmp_path / "model.npz")).run(progress=False)["steps"] == 18   # done is done


def test_a_settled_model_below_the_target_trains_on(tmp_path, monkeypatch):
    scripted(monkeypatch, lambda step: 1.0 if step >= 20 else 0.5)
    trainer = tiny_trainer(tmp_path)
    trainer.stopper.min_gap = 4
    summary = trainer.run(progress=False)
    # hit at 4 (first full window), missed at 10; the next hit needs min_gap: 14, confirmed at 20
    assert [h["step"] for h in trainer.history] == [10, 20]
    assert summary["steps"] == 20 and summary["reached_step"] == 20 and summary["cooldown_step"] == 14


@pytest.mark.slow
def test_a_real_run_stops_at_a_low_target(tmp_path, monkeypatch):
    """d_model 32, 1+1 layers, batch 64, evaluated on 500 held-out dates: the run must stop
    well before its 600-step cap, at a confirmed target. Measured while writing this test:
    held-out exact match 28.0% at step 162, 48.6% at 172 (the cool-down began), 72.6% at the
    stop at step 192 (on a quiet 2-core machine ~10 s; 8 min on a heavily shared one)."""
    full = DateTrainer.evaluate
    monkeypatch.setattr(DateTrainer, "evaluate", lambda self, limit=None, show_wrong=5: full(self, 500, show_wrong))
    trainer = DateTrainer(ModelConfig(d_model=32, num_heads=4, num_encoder_layers=1, num_decoder_layers=1,
                                           d_ff=64),
                      training.TrainConfig(steps=600, batch_size=64, lr=3e-3, warmup=50, cooldown=20,
                                           target_accuracy=0.3), out_dir=str(tmp_path))
    summary = trainer.run(progress=False)
    assert summary["target_confirmed"] and summary["steps"] < 600
    assert summary["steps"] == summary["cooldown_step"] + 20 and summary["exact_match"] >= 0.3
    assert trainer.history[-1]["step"] == summary["steps"]
