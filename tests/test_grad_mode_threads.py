"""Grad mode belongs to the thread, as in PyTorch: ``no_grad()`` in one thread
never stops another thread from recording, and a new thread starts enabled."""
import sys
import threading

import numpy as np

import minigrad as mg
from minigrad import Tensor


def run_in_threads(*targets):
    errors = []

    def guarded(target):
        def run():
            try:
                target()
            except BaseException as error:      # reported to the test below, not lost in the thread
                errors.append(error)
        return run

    threads = [threading.Thread(target=guarded(t)) for t in targets]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads), "a thread hung"
    if errors:
        raise errors[0]


def test_no_grad_in_another_thread_does_not_stop_this_one_recording():
    inside, done = threading.Event(), threading.Event()

    def other():
        with mg.no_grad():
            inside.set()
            assert done.wait(30)

    recorded = []

    def this():
        assert inside.wait(30)
        x = Tensor([1.0], requires_grad=True)
        recorded.append(((x * 2).grad_fn is not None, mg.is_grad_enabled()))
        done.set()

    run_in_threads(other, this)
    assert recorded == [(True, True)]


def test_no_grad_blocks_that_end_interleaved_leave_every_thread_as_it_was():
    # a enters, b enters, a leaves, b leaves: with one process-wide flag b's exit
    # restored the "off" it saw on entry and grad stayed off everywhere.
    a_in, b_in, a_out = threading.Event(), threading.Event(), threading.Event()
    seen = {}

    def a():
        x = Tensor([1.0], requires_grad=True)
        with mg.no_grad():
            a_in.set()
            assert b_in.wait(30)
            seen["a inside"] = (x * 2).requires_grad
        seen["a after"] = (x * 2).requires_grad
        a_out.set()

    def b():
        x = Tensor([1.0], requires_grad=True)
        assert a_in.wait(30)
        with mg.no_grad():
            b_in.set()
            assert a_out.wait(30)
            seen["b inside"] = (x * 2).requires_grad
        seen["b after"] = (x * 2).requires_grad

    run_in_threads(a, b)
    assert seen == {"a inside": False, "a after": True, "b inside": False, "b after": True}
    assert mg.is_grad_enabled()


def test_a_thread_started_inside_no_grad_starts_with_grad_enabled():
    seen = []

    def child():
        x = Tensor([1.0], requires_grad=True)
        seen.append((mg.is_grad_enabled(), (x * 2).requires_grad))

    with mg.no_grad():
        run_in_threads(child)
        assert not mg.is_grad_enabled()
    assert seen == [(True, True)]


def test_two_threads_mixing_no_grad_and_backward_always_get_the_right_gradient():
    # d/dx [(2x).sum() + (3x).sum()] = 5, every time, while the other thread
    # enters and leaves no_grad as fast as it can (a tiny switch interval makes
    # the threads interleave between almost any two bytecodes).
    rounds = 400
    results = {0: [], 1: []}

    def worker(k):
        def run():
            x = Tensor(np.array([1.0]), requires_grad=True)
            for _ in range(rounds):
                with mg.no_grad():
                    (x * 7).sum()
                x.grad = None
                y = (2 * x).sum() + (3 * x).sum()
                y.backward()
                results[k].append(float(x.grad[0]))
        return run

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        run_in_threads(worker(0), worker(1))
    finally:
        sys.setswitchinterval(interval)
    assert results[0] == [5.0] * rounds and results[1] == [5.0] * rounds
    assert mg.is_grad_enabled()
