"""A training run keeps freed memory: a step's large temporaries come back without page faults,
and leaving the run (also a run inside another) puts glibc's settings back."""
import resource
import sys

import numpy as np
import pytest

from transformer.parallel import memory

pytestmark = pytest.mark.skipif(memory._glibc() is None, reason="glibc's mallopt only")


def faults_of_steps(steps=5, arrays=6, megabytes=8):
    """Minor page faults of ``steps`` rounds that each make ``arrays`` arrays alive at once, as large
    as a big model's activations, then drop them all (as a step's graph is dropped)."""
    def step():
        alive = [np.ones(megabytes << 18, np.float32) for _ in range(arrays)]
        del alive
    step()                                                 # the first touch faults anyway: not counted
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(steps):
        step()
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before


def test_inside_a_run_a_steps_temporaries_do_not_fault_again():
    afresh = 5 * 6 * (8 << 20) // 4096                     # 61,440: every page of every step
    with memory.freed_memory_kept():
        inside = faults_of_steps()
    outside = faults_of_steps()
    assert inside < afresh / 100 and outside > afresh / 20   # (huge pages make fewer, larger faults)


def test_runs_inside_runs_keep_the_setting_until_the_outer_one_ends(monkeypatch):
    calls = []
    libc = memory._glibc()

    class Recording:
        def mallopt(self, param, value):
            calls.append((param, value))
            return libc.mallopt(param, value)

        def malloc_trim(self, pad):
            calls.append(("trim", pad))
            return libc.malloc_trim(pad)

    monkeypatch.setattr(memory, "_glibc", Recording)
    with memory.freed_memory_kept():
        with memory.freed_memory_kept():
            assert calls == [(memory.M_MMAP_THRESHOLD, memory.KEEP_UP_TO), (memory.M_TRIM_THRESHOLD, memory.TRIM_AT)]
        assert len(calls) == 2
    assert calls[2:] == [(memory.M_TRIM_THRESHOLD, memory.DEFAULT), (memory.M_MMAP_THRESHOLD, memory.DEFAULT),
                         ("trim", 0)]
    assert memory._depth == 0


def test_an_exception_in_the_run_still_puts_the_settings_back():
    with pytest.raises(RuntimeError):
        with memory.freed_memory_kept():
            raise RuntimeError("step failed")
    assert memory._depth == 0
