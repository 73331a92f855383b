"""An MPI job that cannot train ends like the plain command: one line, exit 2 from every rank,
nothing trained, no process left; and Ctrl-C ends a job even when one of its ranks is stopped.

- ranks started with different settings (MPMD ``mpiexec -n 1 cmd : -n 1 cmd``) are refused before
  the first step, in one line naming the setting and both values;
- a folder that rank 0 refuses (a finished run, a file, another job's lock) ends every rank through
  the same collective agreement, instead of leaving rank 1 waiting in it for good;
- a rank stopped with SIGSTOP (a laptop's suspend, a debugger) does not keep Ctrl-C from ending the job.

The jobs and their helpers are tests/test_mpi.py's (the same skips: mpi4py and mpiexec, Linux)."""
import os
import signal
import subprocess
import sys
import time

import pytest

from processes import alive, wait_until_gone
from test_mpi import (DATES, MPIEXEC, TINY, command, descendants, job, own_lines, pytestmark,  # noqa: F401,F811
                      rank_of, wait_for_steps)

from transformer.files.run_dir import LOCK_NAME

END_SECONDS = 120       # an upper bound for a refusal (start-up of two ranks on a loaded machine)


def finished(process, timeout=END_SECONDS):
    """(exit code, stderr's own lines) of a job that must end by itself; it fails the test (and
    the ``job`` fixture kills what is left) if it does not end within ``timeout``."""
    try:
        _, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the job did not end within {timeout} s")
    return process.returncode, own_lines(stderr)


# ------------------------------------------------------- different settings
def mpmd(out, first: list, second: list, environments=({}, {})) -> list:
    """``mpiexec -n 1 [env ...] dates-train ... : -n 1 [env ...] dates-train ...``: one rank each."""
    tail = ["--out", str(out), "--max-steps", "3", *TINY]
    ranks = []
    for options, environment in zip((first, second), environments):
        env = ["env", *(f"{name}={value}" for name, value in environment.items())] if environment else []
        ranks.append(["-n", "1", *env, *DATES, *tail, *options])
    return [MPIEXEC, *ranks[0], ":", *ranks[1]]


@pytest.mark.parametrize("first, second, environments, named", [
    ([], ["--lr", "0.01"], ({}, {}), "--lr is 0.002 on rank 0 but 0.01 on rank 1"),
    (["--seed", "1"], ["--seed", "2"], ({}, {}), "--seed is 1 on rank 0 but 2 on rank 1"),
    ([], [], ({"MINIGRAD_BLAS_THREADS": "1"}, {"MINIGRAD_BLAS_THREADS": "2"}),
     "--blas-threads is 1 on rank 0 but 2 on rank 1"),
    ([], [], ({"MINIGRAD_KERNELS": "numba"}, {"MINIGRAD_KERNELS": "numpy"}),
     'the kernel backend ($MINIGRAD_KERNELS) is "numba" on rank 0 but "numpy" on rank 1'),
])
def test_ranks_started_with_different_settings_are_refused_in_one_line(job, tmp_path, first, second, environments,
                                                                       named):
    out = tmp_path / "run"
    process = job(mpmd(out, first, second, environments))
    code, lines = finished(process)
    assert code == 2, lines
    assert lines == [f"error: the processes of this MPI job were started differently: {named}; start every rank "
                     "with the same options and environment"]
    assert not out.exists()                          # nothing trained, no run folder begun


# ------------------------------------------------------- a folder refused
def test_a_finished_run_is_refused_in_one_line_as_the_plain_command_does(job, tmp_path):
    out = tmp_path / "run"
    assert subprocess.run(command(0, out, 2), capture_output=True, timeout=300).returncode == 0
    before = (out / "model.npz").read_bytes()
    code, lines = finished(job(command(2, out, 2)))
    assert code == 2, lines
    assert lines == [f"error: {out} already holds a checkpoint ({out / 'model.npz'}): continue it with --resume "
                     f"{out / 'model.npz'}, replace it with --force, or choose another --out"]
    assert (out / "model.npz").read_bytes() == before


@pytest.mark.parametrize("folder", ["a file", "another job's"])
def test_a_folder_rank_0_cannot_claim_ends_every_rank(job, tmp_path, folder):
    """Rank 0's refusal reaches rank 1 through the agreement both take part in: no rank is left
    waiting (spinning at 100% CPU), every rank exits 2, nothing is left running."""
    out = tmp_path / "run"
    if folder == "a file":
        out.write_text("not a folder")
        expected = f"error: --out {out} is a file, not a folder: choose a folder for the checkpoint and log"
    else:
        out.mkdir()
        (out / LOCK_NAME).write_text(f"{os.getpid()} dates-train\n")      # this live process holds it
        expected = f"another dates-train (pid {os.getpid()}) is writing to {out}"
    process = job(command(2, out, 2, "--force"))
    code, lines = finished(process)
    assert code == 2, lines
    assert len(lines) == 1 and expected in lines[0], lines
    assert not [pid for pid in descendants(process.pid) if alive(pid)]


# ------------------------------------------------------- a stopped rank
@pytest.mark.parametrize("stopped_rank", [0, 1])
def test_ctrl_c_ends_a_job_whose_rank_is_stopped(job, tmp_path, stopped_rank):
    """Ctrl-C to mpiexec while a rank is stopped: the rank that is running wakes the stopped one
    (SIGCONT), it takes its own Ctrl-C, and the job stops after one agreed step as usual: rank 0
    saves it, exit 130, nothing left."""
    out = tmp_path / "run"
    process = job(command(2, out, 100000))
    wait_for_steps(out, 3, process)
    family = descendants(process.pid)
    rank = [pid for pid in family if rank_of(pid) == stopped_rank]
    assert len(rank) == 1, family
    os.kill(rank[0], signal.SIGSTOP)
    process.send_signal(signal.SIGINT)
    code, lines = finished(process, timeout=60)
    assert code == 130, lines
    assert len(lines) == 1 and lines[0].startswith("interrupted at step "), lines
    assert not wait_until_gone(family)


def test_a_rank_that_stays_stopped_is_killed_after_the_grace_period(monkeypatch):
    """A rank that stops again after SIGCONT (or that a debugger holds) cannot answer: once this
    rank is stopping, it is killed after the grace period and the wait ends with RankLost."""
    from transformer.parallel import ranks
    restops = subprocess.Popen([sys.executable, "-c", "import os, signal, time\n"
                                "signal.signal(signal.SIGCONT, lambda *_: os.kill(os.getpid(), signal.SIGSTOP))\n"
                                "print('ready', flush=True)\n"
                                "time.sleep(300)"], stdout=subprocess.PIPE, text=True)
    try:
        assert restops.stdout.readline() == "ready\n"
        os.kill(restops.pid, signal.SIGSTOP)

        class NeverDone:
            class Request:
                Testall = staticmethod(lambda requests: False)
        waiting = ranks.Job.__new__(ranks.Job)
        waiting.MPI, waiting.neighbours = NeverDone, [restops.pid]
        monkeypatch.setattr(ranks, "STOPPED_GRACE_SECONDS", 1.0)
        start = time.monotonic()
        with pytest.raises(ranks.RankLost, match=f"pid {restops.pid}.* stayed stopped during step 5"):
            waiting.wait([object()], step=5, stopping=lambda: True)
        assert time.monotonic() - start < 60
        assert restops.wait(timeout=60) == -signal.SIGKILL
    finally:
        restops.kill()
        restops.wait()



# ------------------------------------------------------- a newcomer's run
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_the_test_extra_brings_mpi_on_linux():
    """The README's test command (``pip install -e ".[test]"``) installs what these tests need."""
    import configparser
    setup = configparser.ConfigParser()
    setup.read(os.path.join(REPO, "setup.cfg"))
    extras = setup["options.extras_require"]

    def names(extra):
        return {line.split(";")[0].split(">")[0].split("=")[0].strip() for line in extras[extra].splitlines()
                if line.strip() and not line.strip().startswith("#")}
    assert names("mpi") <= names("test")


def test_without_mpi_the_skip_says_how_to_install_it(tmp_path):
    """With mpi4py missing, ``python -m pytest -q`` shows the MPI tests' skip reason in its summary."""
    hidden = tmp_path / "mpi4py"
    hidden.mkdir()
    (hidden / "__init__.py").write_text("raise ImportError('hidden by the test')\n")
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                             "tests/test_mpi.py::test_a_process_count_that_does_not_divide_the_pieces_is_one_line"],
                            cwd=REPO, env=environment, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SKIPPED" in result.stdout and 'pip install -e ".[mpi]"' in result.stdout, result.stdout
