"""Shared by the tests that check nothing is left behind or signal a process at a given moment:
whether a process still runs, who is in a process group, which signals a process ignores, and
waiting (with a bound) for a state, never for a fixed time, so a busy machine only makes the
tests slower."""
import os
import time


def alive(pid) -> bool:
    """True while ``pid`` runs (a zombie waiting to be reaped counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def group_members(group: int) -> list:
    """Live (not zombie) processes whose process group is ``group``, wherever their parent is."""
    members = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == group and fields[0] != "Z":
            members.append(int(name))
    return members


def ignored_signals(pid) -> set:
    """The signal numbers ``pid`` ignores now (Linux: the SigIgn mask in /proc; empty once it is gone)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            mask = next(int(line.split()[1], 16) for line in f if line.startswith("SigIgn:"))
    except (OSError, StopIteration):
        return set()
    return {number for number in range(1, mask.bit_length() + 1) if mask >> (number - 1) & 1}


def wait_for(condition, seconds=60.0) -> bool:
    """Wait until ``condition()`` is true: True, or False after ``seconds`` (a bound for a very busy machine)."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def wait_until_gone(pids, seconds=5.0) -> list:
    """Wait up to ``seconds`` for every process of ``pids`` to end; those still running."""
    wait_for(lambda: not any(alive(pid) for pid in pids), seconds)
    return [pid for pid in pids if alive(pid)]
