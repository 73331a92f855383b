"""Shared by the tests that check nothing is left behind: whether a process still runs, and
waiting (with a bound) until some have gone."""
import time


def alive(pid) -> bool:
    """True while ``pid`` runs (a zombie waiting to be reaped counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def wait_until_gone(pids, seconds=5.0) -> list:
    """Wait up to ``seconds`` for every process of ``pids`` to end; those still running."""
    deadline = time.monotonic() + seconds
    while any(alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    return [pid for pid in pids if alive(pid)]
