"""One check of whether a pid is alive (transformer/parallel/processes.py), for the run folder's
lock and for the ranks of an MPI job watching their neighbours."""
import os
import subprocess
import sys

from transformer.files import run_dir
from transformer.parallel import processes, ranks


def test_one_pid_check_serves_the_run_lock_and_the_mpi_ranks():
    assert run_dir.pid_alive is processes.pid_alive and ranks.pid_alive is processes.pid_alive


def test_a_pid_is_alive_until_its_process_is_reaped():
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        assert processes.pid_alive(child.pid) and processes.pid_alive(os.getpid())
    finally:
        child.stdin.close()
        child.wait(timeout=60)
    assert not processes.pid_alive(child.pid)
