"""The graph is released: memory does not grow with training steps.

A tiny Linear-ReLU-Linear model trained with Adam for 1,000 steps keeps the
same number of live Tensor and Function objects and the same tracemalloc
memory at step 1,000 as at step 100. An op output dropped with ``del`` is
freed at once by reference counting (checked with the cycle collector off, so
any reference cycle would show), and a decoding-style loop under ``no_grad``
keeps no graph alive.
"""
import gc
import tracemalloc
import weakref

import numpy as np
import pytest

import minigrad as mg
from minigrad import Tensor, nn, optim
from minigrad.function import Function


@pytest.fixture
def no_cycle_collector():
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def live(cls):
    gc.collect()
    # type() rather than isinstance(): isinstance on a dead weakref.proxy raises ReferenceError
    return sum(1 for o in gc.get_objects() if issubclass(type(o), cls))


class TinyNet(nn.Module):
    def __init__(self):
        self.first = nn.Linear(4, 8)
        self.second = nn.Linear(8, 1)

    def forward(self, x):
        return self.second(self.first(x).relu())


def test_training_loop_does_not_grow_objects_or_memory():
    mg.manual_seed(0)
    rng = np.random.default_rng(0)
    x = Tensor(rng.standard_normal((8, 4)).astype(np.float32))
    y = Tensor(rng.standard_normal((8, 1)).astype(np.float32))
    model = TinyNet()
    opt = optim.Adam(model.parameters(), lr=1e-3)

    def step():
        opt.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        return loss.item()

    tracemalloc.start()
    try:
        snapshots = {}
        for i in range(1, 1001):
            step()
            if i in (100, 1000):
                snapshots[i] = (live(Tensor), live(Function), tracemalloc.get_traced_memory()[0])
    finally:
        tracemalloc.stop()
    (tensors_100, functions_100, bytes_100), (tensors_1000, functions_1000, bytes_1000) = snapshots[100], snapshots[1000]
    assert tensors_1000 <= tensors_100, (tensors_100, tensors_1000)
    assert functions_1000 <= functions_100, (functions_100, functions_1000)
    assert bytes_1000 - bytes_100 < 50_000, f"memory grew by {bytes_1000 - bytes_100} bytes in 900 steps"


def test_dropped_op_output_is_freed_immediately(no_cycle_collector):
    x = Tensor(np.ones((3, 3)), requires_grad=True)
    y = (x * 2).exp()
    inner = weakref.ref(y.grad_fn)
    out = weakref.ref(y)
    del y
    assert out() is None and inner() is None


def test_whole_unused_graph_is_freed_when_its_root_is_dropped(no_cycle_collector):
    x = Tensor(np.ones(4), requires_grad=True)
    h1 = x * 3
    h2 = h1.tanh()
    h3 = h2 + h1
    refs = [weakref.ref(t) for t in (h1, h2, h3)] + [weakref.ref(t.grad_fn) for t in (h1, h2, h3)]
    loss = h3.sum()
    del h1, h2, h3
    assert all(r() is not None for r in refs)   # the graph keeps them alive ...
    del loss
    assert all(r() is None for r in refs)       # ... until the root goes


def test_backward_releases_saved_arrays_and_inputs(no_cycle_collector):
    x = Tensor(np.ones(4), requires_grad=True)
    h = x * 3
    h_ref = weakref.ref(h)
    loss = (h * h).sum()
    del h
    assert h_ref() is not None           # held by the graph of `loss`
    loss.backward()
    assert h_ref() is None               # backward dropped the graph's references
    assert loss.grad_fn.released


def test_decoding_loop_under_no_grad_builds_no_graph(no_cycle_collector):
    mg.manual_seed(0)
    cell = nn.Linear(6, 6)
    state = Tensor(np.ones((1, 6), np.float32))
    first_refs = []
    with mg.no_grad():
        for step in range(50):
            state = (cell(state).tanh() + state) * 0.5
            assert state.grad_fn is None and not state.requires_grad
            if step == 0:
                first_refs.append(weakref.ref(state))
    assert first_refs[0]() is None       # earlier steps are not kept alive by a graph


def test_the_same_loop_with_grad_keeps_its_history():
    """Control for the test above: with grad enabled the chain is retained."""
    cell = nn.Linear(6, 6)
    state = Tensor(np.ones((1, 6), np.float32))
    first = None
    for step in range(5):
        state = (cell(state).tanh() + state) * 0.5
        if step == 0:
            first = weakref.ref(state)
    assert first() is not None and state.grad_fn is not None
