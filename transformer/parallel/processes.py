"""Whether a process of this machine, known by its pid, is still there.

The ranks of an MPI job watch those on their own machine while they wait for them
(``ranks.Job.wait``), and a run folder's lock asks whether the process that holds it is
still alive (``transformer/files/run_dir.py``). One answer for both.
"""
import os


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` exists (alive or a zombie not yet reaped; another user's counts)."""
    try:
        os.kill(pid, 0)          # signal 0: only the checks, nothing is sent
    except ProcessLookupError:
        return False
    except PermissionError:      # alive, but another user's
        return True
    except OSError:
        return False
    return True
