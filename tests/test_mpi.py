"""``mpiexec -n P dates-train`` / ``next-word-train`` (transformer/parallel/ranks.py): P processes train
one model with the plain command's bits; rank 0 alone writes; a signal or a lost rank ends every
rank in bounded time with nothing left behind; a run resumes under another P.

Each test starts an MPI job of tiny models for a few steps (``pip install -e ".[mpi]"``, or the test
extra on Linux, gives mpi4py and MPICH's ``mpiexec``; without them the tests skip and say so)."""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from processes import alive

from transformer.files.checkpoint import load_checkpoint

MPIEXEC = shutil.which("mpiexec", path=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
try:
    import mpi4py  # noqa: F401
except ImportError:
    mpi4py = None
pytestmark = [pytest.mark.skipif(mpi4py is None or MPIEXEC is None, reason="needs mpi4py and MPICH's mpiexec: "
                                 'pip install -e ".[mpi]"'),
              pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc to see live processes")]

TINY = ["--d-model", "16", "--heads", "2", "--layers", "1", "--d-ff", "32", "--batch-size", "16",
        "--target-accuracy", "0", "--no-progress"]
DATES = (sys.executable, "-c", "import sys, dates_commands; sys.exit(dates_commands.train(sys.argv[1:]))")
NEXT_WORD = (sys.executable, "-c", "import sys, dates_commands; sys.exit(dates_commands.next_word_train(sys.argv[1:]))")
LAUNCHER_LINE = "[mpiexec@"          # what mpiexec itself prints (Ctrl-C: two lines of its own)


def command(processes, out, steps, *options, program=DATES, mpiexec=()):
    launcher = [MPIEXEC, *mpiexec, "-n", str(processes)] if processes else []
    return [*launcher, *program, "--out", str(out), "--max-steps", str(steps), *TINY, *options]


def run(*args, timeout=300, **kwargs):
    result = subprocess.run(command(*args, **kwargs), capture_output=True, text=True, timeout=timeout)
    return result


def losses(out) -> list:
    with open(os.path.join(out, "train_log.jsonl")) as log:
        return [json.loads(line)["loss"] for line in log]


def weights(out) -> dict:
    with np.load(os.path.join(out, "model.npz")) as saved:
        return {name: saved[name] for name in saved.files if name.startswith(("model/", "optim/"))}


def assert_same_bits(a, b):
    assert losses(a) == losses(b)
    wa, wb = weights(a), weights(b)
    assert wa.keys() == wb.keys() and any(name.startswith("optim/") for name in wa)
    for name in wa:
        np.testing.assert_array_equal(wa[name], wb[name], err_msg=name)


# ------------------------------------------------------------------ processes
def _parent(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def descendants(pid) -> list:
    """The live processes under ``pid`` (mpiexec's proxies and the ranks)."""
    parents = {int(p): _parent(p) for p in os.listdir("/proc") if p.isdigit()}
    found, frontier = [], [pid]
    while frontier:
        children = [p for p, parent in parents.items() if parent in frontier]
        found += children
        frontier = children
    return found


def rank_of(pid):
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            variables = dict(v.split(b"=", 1) for v in f.read().split(b"\0") if b"=" in v)
    except OSError:
        return None
    return int(variables[b"PMI_RANK"]) if b"PMI_RANK" in variables and b"python" in open(
        f"/proc/{pid}/cmdline", "rb").read() else None


@pytest.fixture
def job():
    """Start a job with ``job(argv)``; every process it started is killed at the end, however the test ends."""
    started = []

    def start(argv):
        process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        started.append(process)
        return process
    yield start
    for process in started:
        family = descendants(process.pid)
        for pid in family + [process.pid]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        process.communicate()


def wait_for_steps(out, count, process, timeout=300):
    log, start = os.path.join(out, "train_log.jsonl"), time.monotonic()
    while time.monotonic() - start < timeout:
        if process.poll() is not None:
            pytest.fail(f"the job ended before step {count}: {process.communicate()}")
        if os.path.exists(log) and sum(1 for _ in open(log)) >= count:
            return
        time.sleep(0.05)
    pytest.fail(f"no step {count} in {timeout} s")


def own_lines(stderr) -> list:
    return [line for line in stderr.splitlines() if line.strip() and not line.startswith(LAUNCHER_LINE)]


# ---------------------------------------------------------------------- tests
@pytest.fixture(scope="module")
def plain_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("plain") / "run"
    result = run(0, out, 4)
    assert result.returncode == 0, result.stderr
    return out


@pytest.mark.parametrize("processes", [1, 2])
def test_ranks_give_the_plain_commands_bits_and_rank_0_alone_writes(plain_run, tmp_path, processes):
    out = tmp_path / "run"
    result = run(processes, out, 4)
    assert result.returncode == 0, result.stderr
    assert_same_bits(plain_run, out)
    assert result.stdout.count("checkpoint: ") == 1 and result.stderr == ""   # one rank speaks
    assert sorted(os.listdir(out)) == sorted(os.listdir(plain_run))  # and writes: no second log or lock
    assert sorted(os.listdir(tmp_path)) == ["run"]


def test_two_ranks_tracing_their_pieces_give_the_plain_eager_commands_bits(tmp_path):
    """The ranks replay each piece from its tape (the default) and the plain command runs every
    piece eagerly: the same losses, weights and optimizer state."""
    plain, ranks = tmp_path / "plain", tmp_path / "ranks"
    for processes, out, options in ((0, plain, ("--eager",)), (2, ranks, ())):
        result = run(processes, out, 6, *options)
        assert result.returncode == 0, result.stderr
    assert_same_bits(plain, ranks)


def test_next_word_on_two_ranks_gives_the_plain_commands_bits(tmp_path):
    plain, ranks = tmp_path / "plain", tmp_path / "ranks"
    for processes, out in ((0, plain), (2, ranks)):
        result = run(processes, out, 3, program=NEXT_WORD)
        assert result.returncode == 0, result.stderr
    assert_same_bits(plain, ranks)


def test_a_process_count_that_does_not_divide_the_pieces_is_one_line(tmp_path):
    result = run(3, tmp_path / "run", 2)
    assert result.returncode == 2
    assert own_lines(result.stderr) == ["error: mpiexec -n 3: the processes must divide the run's 2 pieces of "
                                        "each batch (use -n 1 or 2)"]
    assert not (tmp_path / "run" / "model.npz").exists()


def test_a_model_with_dropout_is_refused_in_one_line(tmp_path):
    """Its masks come from one generator in piece order, which processes cannot share."""
    result = run(2, tmp_path / "run", 2, "--dropout", "0.1")
    assert result.returncode == 2
    assert own_lines(result.stderr) == ["error: this model draws dropout masks, in piece order from one generator "
                                        "that separate processes cannot share: train it without mpiexec, or with "
                                        "--dropout 0"]


@pytest.mark.parametrize("signal_number", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_to_mpiexec_saves_exits_130_and_resumes_under_one_process(job, tmp_path, signal_number):
    """mpiexec passes the signal to every rank; they agree on the step to stop after, rank 0
    saves it, each exits 130, nothing is left. The run then resumes in a plain process and ends
    with the bits of a run never interrupted."""
    out, steps = tmp_path / "run", 60           # the schedule depends on the maximum: the same for both runs
    process = job(command(2, out, steps))
    wait_for_steps(out, 3, process)
    family = descendants(process.pid)
    process.send_signal(signal_number)
    stdout, stderr = process.communicate(timeout=120)
    assert process.returncode == 130, stderr
    lines = own_lines(stderr)
    assert len(lines) == 1 and lines[0].startswith("interrupted at step "), stderr
    assert not [pid for pid in family if alive(pid)]
    stopped_at = int(lines[0].split()[3].rstrip(";"))
    assert len(losses(out)) == stopped_at

    resumed = run(0, out, steps, "--resume", str(out / "model.npz"))
    assert resumed.returncode == 0, resumed.stderr
    whole = tmp_path / "whole"
    assert run(0, whole, steps).returncode == 0
    assert_same_bits(whole, out)


def test_a_run_of_one_process_resumes_on_two(tmp_path):
    out, whole = tmp_path / "run", tmp_path / "whole"
    assert run(0, out, 2).returncode == 0
    resumed = run(2, out, 4, "--resume", str(out / "model.npz"))
    assert resumed.returncode == 0, resumed.stderr
    assert run(0, whole, 4).returncode == 0
    assert_same_bits(whole, out)


def test_a_rank_killed_with_sigkill_ends_the_job_with_nothing_left(job, tmp_path):
    """MPICH's mpiexec kills the whole job itself when a rank dies (its exit code 9, its own lines):
    no rank is left waiting, and the checkpoint rank 0 saved last is intact."""
    out = tmp_path / "run"
    process = job(command(2, out, 2000))
    wait_for_steps(out, 102, process)                # a checkpoint every 100 steps
    family = descendants(process.pid)
    rank_1 = [pid for pid in family if rank_of(pid) == 1]
    assert len(rank_1) == 1, family
    os.kill(rank_1[0], signal.SIGKILL)
    process.communicate(timeout=120)
    assert process.returncode == 9
    assert not [pid for pid in family if alive(pid)]
    assert load_checkpoint(out / "model.npz")[2]["step"] == 100     # rank 0's last save, whole


def test_a_signal_to_one_rank_stops_every_rank_after_the_same_step(job, tmp_path):
    """A rank that alone receives SIGTERM tells the others with its next exchange: all stop after
    that step, rank 0 saves it and says so, each exits 130."""
    out = tmp_path / "run"
    process = job(command(2, out, 2000))
    wait_for_steps(out, 3, process)
    family = descendants(process.pid)
    os.kill([pid for pid in family if rank_of(pid) == 1][0], signal.SIGTERM)
    stdout, stderr = process.communicate(timeout=120)
    assert process.returncode == 130, stderr
    lines = own_lines(stderr)
    assert len(lines) == 1 and lines[0].startswith("interrupted at step "), stderr
    assert len(losses(out)) == int(lines[0].split()[3].rstrip(";"))
    assert not [pid for pid in family if alive(pid)]


def test_a_wait_for_a_rank_that_ended_is_bounded():
    """An exchange polls; a rank on this machine that has ended (a crash, an exit) ends the wait
    with RankLost instead of a hang."""
    from transformer.parallel import ranks
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()

    class NeverDone:
        class Request:
            Testall = staticmethod(lambda requests: False)
    waiting = ranks.Job.__new__(ranks.Job)
    waiting.MPI, waiting.neighbours = NeverDone, [os.getpid(), ended.pid]
    start = time.monotonic()
    with pytest.raises(ranks.RankLost, match=f"during step 7 .pid {ended.pid}"):
        waiting.wait([object()], step=7)
    assert time.monotonic() - start < 60


@pytest.mark.slow
@pytest.mark.parametrize("processes, pieces, architecture",
                         [(2, 2, "encoder-decoder"), (2, 2, "decoder-only"), (4, 4, "encoder-decoder")])
def test_fifty_steps_on_ranks_have_the_plain_bits(tmp_path, processes, pieces, architecture):
    plain, ranks = tmp_path / "plain", tmp_path / "ranks"
    options = ["--pieces", str(pieces), "--architecture", architecture]
    assert run(0, plain, 50, *options).returncode == 0
    result = run(processes, ranks, 50, *options, timeout=900)
    assert result.returncode == 0, result.stderr
    assert_same_bits(plain, ranks)


@pytest.mark.slow
def test_two_ranks_reach_the_target_at_the_plain_commands_step_with_its_bits(tmp_path):
    """The default date run, to its confirmed 99.9%: the same stopping step, accuracy and weights."""
    finished = {}
    for processes, name in ((0, "plain"), (2, "ranks")):
        out = tmp_path / name
        argv = [*([MPIEXEC, "-n", str(processes)] if processes else []), *DATES, "--out", str(out), "--no-progress"]
        result = subprocess.run(argv, capture_output=True, text=True, timeout=1800)
        assert result.returncode == 0, result.stderr
        finished[name] = [re.sub(r"after [0-9.]+ s of training", "", line)      # the seconds differ
                          for line in result.stdout.splitlines() if line.startswith(("held-out", "target"))]
    assert finished["plain"] == finished["ranks"] and "confirmed" in finished["plain"][1]
    assert_same_bits(tmp_path / "plain", tmp_path / "ranks")
