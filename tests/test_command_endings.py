"""How a training command ends, whatever arrives at the end, and what it says about others.

- A signal once the run has finished (during the summary, or during Python's own teardown
  after the last line, about a second) never kills it silently with -2 or -15: during the
  summary one line says the run had finished and where it is saved; after the last line the
  command exits with its own status.
- SIGTERM outside the training loop is Ctrl-C there too (one line, 130), not a silent -15.
- The lock message names the command that holds the folder (``next-word-train`` or ``dates-train``).
- A Python warning reaches the user as one plain ``warning: ...`` line, not two lines of
  Python's own format with a file path and a source line.
"""
import os
import signal
import subprocess
import sys
import warnings

import pytest
from processes import ignored_signals, wait_for

from transformer.commands import dates as cli
from transformer.commands import training_command
from transformer.commands import next_word as next_word_cli
from transformer.files.run_dir import LOCK_NAME, RunLock

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = ["--max-steps", "2", "--d-model", "16", "--heads", "2", "--layers", "1", "--d-ff", "32", "--batch-size", "8",
        "--no-progress", "--target-accuracy", "0"]


def entry_point(command):
    """The argv of an installed console script, run from the repository without installing it."""
    function = {"dates-train": "train", "next-word-train": "next_word_train"}[command]
    return [sys.executable, "-c", f"import sys; sys.path.insert(0, {REPO!r}); import dates_commands; "
                                  f"sys.exit(dates_commands.{function}())"]          # argv: sys.argv[1:]


@pytest.fixture
def started():
    """-> start(argv, **popen): a process ended (killed) however the test ends."""
    processes = []

    def start(argv, **kwargs):
        process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1,
                                   **kwargs)
        processes.append(process)
        return process
    yield start
    for process in processes:
        if process.poll() is None:
            process.kill()
        process.wait()


@pytest.mark.slow
@pytest.mark.parametrize("command", ["dates-train", "next-word-train"])
@pytest.mark.parametrize("signal_name", ["SIGINT", "SIGTERM"])
def test_a_signal_after_the_last_line_leaves_the_exit_status_alone(command, signal_name, started, tmp_path):
    process = started(entry_point(command) + ["--out", str(tmp_path / "run"), *TINY], cwd=tmp_path)
    for line in process.stdout:                   # the summary's last line: the run is over
        if line.startswith("training log:"):
            break
    # the command ignores late signals once it has returned, for Python's teardown (about a second)
    late = {signal.SIGINT, signal.SIGTERM}
    assert wait_for(lambda: late <= ignored_signals(process.pid) or process.poll() is not None, 120)
    process.send_signal(getattr(signal, signal_name))
    _, err = process.communicate(timeout=120)
    assert process.returncode == 0, (process.returncode, err)
    # a cold kernel cache (a fresh checkout, this test alone) adds its notice; nothing else may be said
    assert [line for line in err.splitlines() if not line.startswith("compiling kernels")] == [], err


SUMMARY_SIGNAL = """
import os, signal, sys, time
sys.path.insert(0, {repo!r})
from transformer.commands import dates as cli
def summary_then_signal(*args):
    print("summary starts", flush=True)
    os.kill(os.getpid(), signal.{name})
    time.sleep(30)
cli._print_summary = summary_then_signal
sys.exit(cli.train_main(sys.argv[1:]))
"""


@pytest.mark.parametrize("signal_name", ["SIGINT", "SIGTERM"])
def test_a_signal_during_the_summary_says_the_run_had_finished(signal_name, started, tmp_path):
    code = SUMMARY_SIGNAL.format(repo=REPO, name=signal_name)
    process = started([sys.executable, "-c", code, "--out", str(tmp_path / "run"), *TINY], cwd=tmp_path)
    out, err = process.communicate(timeout=240)
    assert "summary starts" in out
    assert process.returncode == 130, (process.returncode, err)
    assert err.count("\n") == 1 and "the run had finished and is saved in" in err, err


STARTUP_SIGTERM = """
import os, signal, sys
sys.path.insert(0, {repo!r})
from transformer.commands import dates as cli, training_command
def sigterm_while_compiling(seconds):
    os.kill(os.getpid(), signal.SIGTERM)
    import time; time.sleep(30)
training_command.compile_if_cold = sigterm_while_compiling
sys.exit(cli.train_main(sys.argv[1:]))
"""


def test_sigterm_before_the_first_step_is_one_line_and_130(started, tmp_path):
    process = started([sys.executable, "-c", STARTUP_SIGTERM.format(repo=REPO), "--out", str(tmp_path / "run"), *TINY],
                      cwd=tmp_path)
    _, err = process.communicate(timeout=240)
    assert process.returncode == 130, (process.returncode, err)
    assert err.count("\n") == 1 and "interrupted before a step was saved" in err, err


# ------------------------------------------------------------------ the lock
@pytest.fixture
def live_pid():
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        yield sleeper.pid
    finally:
        sleeper.kill()
        sleeper.wait()


@pytest.mark.parametrize("holder, main", [("next-word-train", cli.train_main),
                                          ("dates-train", next_word_cli.train_main)])
def test_the_lock_message_names_the_command_that_holds_it(holder, main, live_pid, tmp_path, capsys):
    (tmp_path / LOCK_NAME).write_text(f"{live_pid} {holder}\n")
    assert main(["--out", str(tmp_path), *TINY]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"another {holder} (pid {live_pid}) is writing to {tmp_path}" in err, err


def test_a_lock_written_before_it_named_its_command_is_another_training_run(live_pid, tmp_path, capsys):
    (tmp_path / LOCK_NAME).write_text(f"{live_pid}\n")
    assert cli.train_main(["--out", str(tmp_path), *TINY]) == 2
    assert f"another training run (pid {live_pid}) is writing to" in capsys.readouterr().err


def test_the_lock_holds_the_pid_and_the_command(tmp_path):
    lock = RunLock(str(tmp_path), "next-word-train").acquire()
    try:
        assert (tmp_path / LOCK_NAME).read_text() == f"{os.getpid()} next-word-train\n"
        assert lock._owner() == os.getpid()
    finally:
        lock.release()
    assert not (tmp_path / LOCK_NAME).exists()


# --------------------------------------------------------------- warnings
def test_a_warning_is_one_plain_line(tmp_path, capsys, monkeypatch):
    def warn_then_print(trainer):
        warnings.warn("the second half stopped; the steps go on with it on a thread", RuntimeWarning)
    monkeypatch.setattr(training_command, "print_model", warn_then_print)
    assert cli.train_main(["--out", str(tmp_path / "run"), *TINY]) == 0
    err = capsys.readouterr().err
    assert "warning: the second half stopped; the steps go on with it on a thread\n" in err, err
    assert "RuntimeWarning" not in err and ".py:" not in err, err


def test_warnings_are_python_s_own_again_after_the_command(tmp_path, capsys):
    before = warnings.showwarning
    assert cli.train_main(["--out", str(tmp_path / "run"), *TINY]) == 0
    assert warnings.showwarning is before


def test_a_call_with_its_own_argv_leaves_this_process_s_signals_alone(capsys):
    """Only the process's own command ignores late signals: a call from a test (or any Python
    caller) with an argv must not leave SIGINT and SIGTERM ignored in the caller and its children."""
    sys.path.insert(0, REPO)
    import dates_commands
    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    with pytest.raises(SystemExit):
        dates_commands.train(["--help"])
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before
