"""kill -9, SIGSTOP, Ctrl-C and SIGTERM against the three trainers, run as a user runs them.

For each trainer (``dates-train``, ``dates-train --architecture decoder-only``,
``next-word-train``), a tiny model training for good, with the user's default thread policy
(``MINIGRAD_BLAS_THREADS`` unset, so whatever may run beside a step does):

- Ctrl-C (to the whole process group, as a terminal sends it) or SIGTERM (to the run): the run ends within 30 s with exit 130 and its one line; nothing of
  its process group is left; the checkpoint holds the step it names, and resuming it trains on.
- kill -9: nothing of its process group is left (a worker must not outlive the run); the last
  checkpoint loads and resumes (its lock, now stale, is taken over).
- SIGSTOP: the run is simply stopped (no step is written while it is), CONT resumes it, and
  Ctrl-C then ends it as above.

"Nothing left" is checked on the process group (each run starts its own session), which also
finds a child that was re-parented to init when its parent died. Every process a test starts
is killed, with its whole group, however the test ends.
"""
import os
import signal
import subprocess
import sys
import time

import pytest
from processes import group_members

from transformer.commands import dates as cli
from transformer.commands import next_word as next_word_cli
from transformer.files.checkpoint import load_checkpoint

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = ["--d-model", "16", "--heads", "2", "--layers", "1", "--d-ff", "32", "--batch-size", "8",
        "--no-progress", "--target-accuracy", "0", "--max-steps", "100000"]
TRAINERS = {"dates-train": ("train", []),
            "decoder-only": ("train", ["--architecture", "decoder-only"]),
            "next-word-train": ("next_word_train", [])}
MAINS = {"train": cli.train_main, "next_word_train": next_word_cli.train_main}
STARTUP_SECONDS = 300       # imports, and compiling the kernels on a cold cache, on a loaded machine
END_SECONDS = 30            # the bound asked for: no wait longer than this once the signal is sent
CHECKPOINT_EVERY = 100      # TrainConfig.checkpoint_every: the steps a kill -9 can lose at most


def state(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


class Run:
    """One trainer in its own session, and what it wrote."""

    def __init__(self, trainer, folder):
        function, extra = TRAINERS[trainer]
        self.function, self.folder = function, folder
        self.log = folder / "train_log.jsonl"
        env = {k: v for k, v in os.environ.items() if k != "MINIGRAD_BLAS_THREADS"}   # the user's default
        code = (f"import sys; sys.path.insert(0, {REPO!r}); import dates_commands; "
                f"sys.exit(dates_commands.{function}())")                # as the console script: sys.argv
        self.process = subprocess.Popen([sys.executable, "-c", code, "--out", str(folder), *extra, *TINY],
                                        cwd=folder.parent, env=env, start_new_session=True,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.group = self.process.pid

    def steps_logged(self) -> int:
        try:
            return self.log.read_text().count("\n")
        except FileNotFoundError:
            return 0

    def wait_for_steps(self, count: int, seconds: float = STARTUP_SECONDS):
        deadline = time.monotonic() + seconds
        while self.steps_logged() < count:
            assert self.process.poll() is None, f"the run ended early: {self.process.stderr.read()}"
            assert time.monotonic() < deadline, f"fewer than {count} steps in {seconds} s"
            time.sleep(0.05)

    def ends_within(self, seconds: float) -> str:
        """stderr, once the run has ended (it must within ``seconds``)."""
        try:
            _, err = self.process.communicate(timeout=seconds)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the run did not end within {seconds} s")
        return err

    def nothing_left(self, seconds: float = END_SECONDS) -> bool:
        deadline = time.monotonic() + seconds
        while group_members(self.group):
            if time.monotonic() > deadline:
                return False
            time.sleep(0.1)
        return True

    def kill_everything(self):
        try:
            os.killpg(self.group, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()


@pytest.fixture
def start(tmp_path):
    runs = []

    def start_run(trainer):
        runs.append(Run(trainer, tmp_path / "run"))
        return runs[-1]
    yield start_run
    for run in runs:
        run.kill_everything()


def resumes(run, checkpoint):
    """The checkpoint loads, and a resumed run trains two more steps from it (in this process)."""
    _, _, meta = load_checkpoint(checkpoint)
    step = meta["step"]
    code = MAINS[run.function](["--resume", str(checkpoint), "--max-steps", str(step + 2), "--no-progress"])
    assert code == 0
    assert load_checkpoint(checkpoint)[2]["step"] == step + 2
    return step


@pytest.mark.slow
@pytest.mark.parametrize("trainer", list(TRAINERS))
@pytest.mark.parametrize("signal_name", ["SIGINT", "SIGTERM"])
def test_ctrl_c_and_sigterm_end_the_run_and_lose_nothing(trainer, signal_name, start, capsys):
    run = start(trainer)
    run.wait_for_steps(3)
    if signal_name == "SIGINT":            # Ctrl-C: the terminal signals the whole foreground group
        os.killpg(run.group, signal.SIGINT)
    else:                                  # kill PID
        run.process.send_signal(signal.SIGTERM)
    err = run.ends_within(END_SECONDS)
    assert run.process.returncode == 130, err
    assert err.count("\n") == 1 and "interrupted at step" in err and "resume with:" in err, err
    assert run.nothing_left(), f"left behind: {group_members(run.group)}"
    named = int(err.split("interrupted at step ")[1].split(";")[0])
    assert resumes(run, run.folder / "model.npz") == named


@pytest.mark.slow
@pytest.mark.parametrize("trainer", list(TRAINERS))
def test_kill_9_leaves_nothing_behind_and_the_last_checkpoint_resumes(trainer, start, capsys):
    run = start(trainer)
    run.wait_for_steps(CHECKPOINT_EVERY + 2)                   # a checkpoint was saved
    os.kill(run.process.pid, signal.SIGKILL)
    run.ends_within(END_SECONDS)
    assert run.process.returncode == -signal.SIGKILL
    assert run.nothing_left(), f"left behind: {group_members(run.group)}"
    assert resumes(run, run.folder / "model.npz") >= CHECKPOINT_EVERY


@pytest.mark.slow
@pytest.mark.parametrize("trainer", list(TRAINERS))
def test_a_stopped_run_is_simply_stopped_and_cont_resumes_it(trainer, start, capsys):
    run = start(trainer)
    run.wait_for_steps(3)
    os.kill(run.process.pid, signal.SIGSTOP)
    deadline = time.monotonic() + END_SECONDS
    while state(run.process.pid) != "T":
        assert time.monotonic() < deadline
        time.sleep(0.05)
    stopped_at = run.steps_logged()
    time.sleep(1.0)
    assert run.steps_logged() == stopped_at                     # stopped: no step is written
    os.kill(run.process.pid, signal.SIGCONT)
    run.wait_for_steps(stopped_at + 2)                          # going on where it was
    os.killpg(run.group, signal.SIGINT)
    err = run.ends_within(END_SECONDS)
    assert run.process.returncode == 130 and "interrupted at step" in err, err
    assert run.nothing_left(), f"left behind: {group_members(run.group)}"
    resumes(run, run.folder / "model.npz")
