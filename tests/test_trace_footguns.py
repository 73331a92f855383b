"""The ways a tape goes silently stale, as the anchors' trackers list them (tinygrad's
test_jit_footguns.py, JAX's globals read at trace time, tinygrad #10956's int argument): one
test each. Every test shows ``naive_replay`` (a tape that replays the recorded op calls with
the piece's arguments swapped in and everything else kept from the recording: TinyJit's
capture and replay) giving another answer than eager, and ``minigrad.trace`` giving eager's.

The second half is the pure replay's: the tape runs without the piece's Python, so each thing
that Python read is guarded, or refuses the pure replay when the tape is verified. Each of those
tests fails with its guard or check switched off (seen while writing them).
"""
import numpy as np
import pytest

import minigrad
from minigrad import Tensor, functional as F, nn
from minigrad.function import Function
from minigrad.trace import TraceError, trace

RNG = np.random.default_rng(0)
SCALE = 2.0     # a global the piece reads


def naive_tape(piece, recorded_args, reuse_buffers=False):
    """A naive tape of ``piece``: it runs once on ``recorded_args`` while every op call is written
    down; the returned replay(*new_args) runs the calls again on arrays alone, an input equal to a
    recorded argument swapped for the new one, every other input and option as recorded, and
    returns the last call's output. With ``reuse_buffers`` each output is written into the
    recorded call's output array."""
    calls, apply = [], Function.apply.__func__

    def recording(cls, *inputs, **options):
        out = apply(cls, *inputs, **options)
        calls.append((cls, inputs, options, out))
        return out
    Function.apply = classmethod(recording)
    try:
        piece(*recorded_args)
    finally:
        Function.apply = classmethod(apply)
    recorded = [(old, old.copy()) for old in recorded_args if isinstance(old, np.ndarray)]

    def replay(*new_args):
        new_arrays = [new for new in new_args if isinstance(new, np.ndarray)]

        def swapped(array):
            for (_, old), new in zip(recorded, new_arrays):
                if array.shape == old.shape and np.array_equal(array, old):
                    return new
            return array
        values, out = {}, None
        for cls, inputs, options, result in calls:
            arrays = [np.asarray(x.data if isinstance(x, Tensor) else x) for x in inputs]
            arrays = [values.get(id(a), swapped(a)) for a in arrays]
            new = np.asarray(cls().forward(*arrays, **options))
            if reuse_buffers:
                result.data[...] = new
                new = result.data
            values[id(result.data)] = out = new
        return out
    return replay


def naive_replay(piece, recorded_args, new_args, reuse_buffers=False):
    return naive_tape(piece, recorded_args, reuse_buffers)(*new_args)


def weight():
    return nn.Parameter(RNG.standard_normal(4).astype(np.float32))


def loss_of(traced_or_piece, *args):
    return traced_or_piece(*args).data.copy()


def check(piece, first, second):
    """Eager on ``second`` differs from the naive tape recorded on ``first``; trace gives eager's."""
    traced = trace(piece)
    traced(*first)
    eager = loss_of(piece, *second)
    assert not np.array_equal(naive_replay(piece, first, second), eager)
    assert np.array_equal(loss_of(traced, *second), eager)
    return traced


def x(*shape):
    return RNG.standard_normal(shape or (3, 4)).astype(np.float32)


def test_a_python_constant_from_item_is_read_anew():
    w = weight()

    def piece(a):
        t = Tensor(a)
        loss = (t * w).sum() * float(t.mean().item())     # a number read out of the data
        loss.backward()
        return loss
    check(piece, (x(),), (x(),))


def test_a_branch_on_a_value_is_taken_anew():
    w = weight()

    def piece(a):
        t = Tensor(a)
        loss = (t * w).sum() if a.sum() > 0 else (t * w * 3.0).sum()
        loss.backward()
        return loss
    a = x()
    traced = check(piece, (np.abs(a),), (-np.abs(a),))
    assert traced.recordings == 2       # the other branch's ops: recorded afresh


def test_outputs_are_fresh_arrays_not_buffers_reused_between_calls():
    w = weight()

    def piece(a):
        loss = (Tensor(a) * w).sum()
        loss.backward()
        return loss
    first, second = x(), x()
    eager_first = loss_of(piece, first)
    naive = naive_tape(piece, (first,), reuse_buffers=True)
    naive_first = naive(first)
    naive(second)
    assert not np.array_equal(naive_first, eager_first)    # overwritten by the later call
    traced = trace(piece)
    kept = traced(first)
    traced(second)
    traced(x())
    assert np.array_equal(kept.data, eager_first)      # an earlier result is not overwritten


def test_a_global_read_at_trace_time_is_read_anew():
    global SCALE
    w = weight()

    def piece(a):
        loss = (Tensor(a) * w).sum() * SCALE
        loss.backward()
        return loss
    a = x()
    traced = trace(piece)
    traced(a)
    naive = naive_tape(piece, (a,))
    SCALE = 5.0
    try:
        eager = loss_of(piece, a)
        assert not np.array_equal(naive(a), eager)
        assert np.array_equal(loss_of(traced, a), eager)
    finally:
        SCALE = 2.0


def test_an_int_argument_is_not_baked_in():
    w = weight()

    def piece(a, n):
        loss = (Tensor(a) * w).sum() * n
        loss.backward()
        return loss
    a = x()
    check(piece, (a, 2), (a, 7))


def test_the_count_of_non_pad_targets_follows_each_batch():
    lin = nn.Linear(4, 5)

    def piece(a, targets):
        loss = F.cross_entropy(lin(Tensor(a)), targets[:, 1:], ignore_index=0)   # a slice: a new array
        loss.backward()
        return loss
    a = x(2, 3, 4)
    few_pads = np.array([[1, 2, 3, 4], [1, 2, 3, 4], [1, 2, 3, 4]][:2])
    many_pads = np.array([[1, 2, 0, 0], [1, 0, 0, 0]])
    check(piece, (a, few_pads), (a, many_pads))


def test_a_new_shape_records_a_new_tape():
    w = weight()

    def piece(a):
        ones = Tensor(np.ones((a.shape[0], 1), np.float32))   # built from the shape
        loss = (Tensor(a) * w * ones).sum()
        loss.backward()
        return loss
    traced = trace(piece)
    traced(x(3, 4))
    b = x(5, 4)
    with pytest.raises(ValueError):         # the recorded (3, 1) constant does not broadcast
        naive_replay(piece, (x(3, 4),), (b,))
    assert np.array_equal(loss_of(traced, b), loss_of(piece, b))
    assert traced.recordings == 2


def test_dropout_draws_from_todays_generator():
    w = weight()

    def piece(a):
        loss = F.dropout(Tensor(a) * w, 0.5, training=True).sum()
        loss.backward()
        return loss
    a = x()
    traced = trace(piece)
    traced(a)
    minigrad.manual_seed(5)        # a new generator object: a tape holding the old one draws stale masks
    eager = loss_of(piece, a)
    minigrad.manual_seed(5)
    assert np.array_equal(loss_of(traced, a), eager)
    minigrad.manual_seed(5)
    assert not np.array_equal(naive_replay(piece, (a,), (a,)), eager)


def test_dropout_switched_off_records_afresh_and_rewinds_the_generator():
    model = nn.Dropout(0.5)
    w = weight()

    def piece(a):
        loss = (model(Tensor(a) * w) * 2.0).sum()
        loss.backward()
        return loss
    a = x()
    traced = trace(piece)
    traced(a)
    model.eval()
    minigrad.manual_seed(3)
    eager = loss_of(piece, a)
    minigrad.manual_seed(3)
    assert np.array_equal(loss_of(traced, a), eager)
    assert traced.recordings == 2


def test_a_replaced_parameter_gets_the_gradient():
    lin = nn.Linear(4, 1)

    def piece(a):
        loss = lin(Tensor(a)).sum()
        loss.backward()
        return loss
    a = x()
    traced = trace(piece)
    traced(a)
    naive = naive_tape(piece, (a,))
    old = lin.weight
    lin.weight = nn.Parameter(np.full((4, 1), 0.5, np.float32))
    eager = loss_of(piece, a)
    lin.weight.grad = old.grad = None
    assert not np.array_equal(naive(a), eager)   # the old weight's values
    assert np.array_equal(loss_of(traced, a), eager)
    assert lin.weight.grad is not None and old.grad is None


def test_a_frozen_parameter_gets_no_gradient():
    lin = nn.Linear(4, 1)

    def piece(a):
        loss = lin(Tensor(a)).sum()
        loss.backward()
        return loss
    traced = trace(piece)
    traced(x())
    lin.zero_grad()
    lin.bias.requires_grad = False
    traced(x())
    assert lin.bias.grad is None and lin.weight.grad is not None


def test_no_grad_runs_as_eager_does():
    w = weight()

    def piece(a):
        loss = (Tensor(a) * w).sum()
        loss.backward()
        return loss
    traced = trace(piece)
    traced(x())
    with minigrad.no_grad():
        with pytest.raises(RuntimeError, match="does not require grad"):
            traced(x())


def test_what_a_tape_cannot_hold_is_refused_in_one_line():
    w = weight()

    def in_place(a):
        m = Tensor(np.ones(4, np.float32))
        m += 1.0
        (Tensor(a) * w * m).sum().backward()

    def hooked(a):
        t = Tensor(a) * w
        t.register_hook(lambda g: g)
        t.sum().backward()

    def grad_call(a):
        return minigrad.autograd.grad((Tensor(a) * w).sum(), [w])
    for piece, why in ((in_place, "in place"), (hooked, "hook"), (grad_call, "autograd.grad")):
        with pytest.raises(TraceError, match=why) as raised:
            trace(piece)(x())
        assert "\n" not in str(raised.value)


def test_under_the_profiler_the_piece_runs_eagerly():
    w = weight()

    def piece(a):
        loss = (Tensor(a) * w).sum()
        loss.backward()
        return loss
    traced = trace(piece)
    traced(x())
    with minigrad.profile():
        traced(x())
    assert traced.last.startswith("eager")


# ------------------------------------------------------------------ the pure replay's guards
# A pure replay runs only the recorded ops: the piece's Python does not run, so everything it
# read is frozen unless a guard notices the change. Each test below brings a tape to its pure
# replay, changes one thing, and checks the next call against eager; each fails with its guard
# (or record-time check) switched off.

def pure_after(traced, *args):
    """Call ``traced`` until it replays purely (the first call records, the second verifies)."""
    for _ in range(3):
        traced(*args)
    assert traced.last == "replayed purely", traced.why_checked


def linear_piece(lin):
    def piece(a):
        loss = lin(Tensor(a)).sum()
        loss.backward()
        return loss
    return piece


def eager_and_traced(piece, traced, *args, seed=None):
    """The loss of ``piece`` run eagerly and through ``traced`` on the same arguments (the same
    random draws if ``seed``)."""
    if seed is not None:
        minigrad.manual_seed(seed)
    eager = loss_of(piece, *args)
    if seed is not None:
        minigrad.manual_seed(seed)
    return eager, loss_of(traced, *args)


def test_pure_a_reassigned_parameter_is_used():
    lin = nn.Linear(4, 1)
    piece = linear_piece(lin)
    traced = trace(piece)
    pure_after(traced, x())
    lin.weight = nn.Parameter(np.full((4, 1), 0.5, np.float32))
    eager, replayed = eager_and_traced(piece, traced, x())
    assert np.array_equal(replayed, eager)
    assert "Linear.weight changed" in traced.why_checked


def test_pure_a_replaced_parameter_array_is_read():
    lin = nn.Linear(4, 1)
    piece = linear_piece(lin)
    traced = trace(piece)
    pure_after(traced, x())
    lin.weight.data = np.full((4, 1), 0.5, np.float32)     # load_state_dict, FlatParameters.relocate
    a = x()
    eager, replayed = eager_and_traced(piece, traced, a)
    assert np.array_equal(replayed, eager)
    lin.zero_grad()
    traced(a)
    assert np.array_equal(lin.weight.grad, a.sum(axis=0)[:, None])


def test_pure_eval_switches_dropout_off():
    drop, w = nn.Dropout(0.5), weight()

    def piece(a):
        loss = (drop(Tensor(a) * w) * 2.0).sum()
        loss.backward()
        return loss
    traced = trace(piece)
    pure_after(traced, x())
    drop.eval()
    eager, replayed = eager_and_traced(piece, traced, x(), seed=4)
    assert np.array_equal(replayed, eager)


def test_pure_a_new_dropout_p_is_used():
    drop, w = nn.Dropout(0.5), weight()

    def piece(a):
        loss = drop(Tensor(a) * w).sum()
        loss.backward()
        return loss
    traced = trace(piece)
    pure_after(traced, x())
    drop.p = 0.1
    eager, replayed = eager_and_traced(piece, traced, x(), seed=4)
    assert np.array_equal(replayed, eager)


def test_pure_a_global_is_read_anew():
    global SCALE
    w = weight()

    def piece(a):
        loss = (Tensor(a) * w).sum() * SCALE
        loss.backward()
        return loss
    traced = trace(piece)
    pure_after(traced, x())
    SCALE = 5.0
    try:
        eager, replayed = eager_and_traced(piece, traced, x())
    finally:
        SCALE = 2.0
    assert np.array_equal(replayed, eager)


def test_pure_a_value_the_piece_closes_over_is_read_anew():
    w, factor = weight(), 2.0

    def piece(a):
        loss = (Tensor(a) * w).sum() * factor
        loss.backward()
        return loss
    traced = trace(piece)
    pure_after(traced, x())
    factor = 3.0
    eager, replayed = eager_and_traced(piece, traced, x())
    assert np.array_equal(replayed, eager)


def test_pure_grad_mode_is_part_of_the_key():
    w = weight()

    def piece(a):
        loss = (Tensor(a) * w).sum()
        loss.backward()
        return loss
    traced = trace(piece)
    pure_after(traced, x())
    with minigrad.no_grad():
        with pytest.raises(RuntimeError, match="does not require grad"):
            traced(x())


def test_pure_a_python_draw_from_the_generator_keeps_the_stream_as_eager():
    w = weight()

    def piece(a):
        minigrad.rng.generator().random()       # a draw outside any op (a random choice, say)
        loss = F.dropout(Tensor(a) * w, 0.5).sum()
        loss.backward()
        return loss
    traced = trace(piece)
    for _ in range(4):
        eager, replayed = eager_and_traced(piece, traced, x(), seed=6)
        assert np.array_equal(replayed, eager)
    assert traced.pure_replays == 0 and "random numbers outside an op" in traced.why_checked


def test_pure_a_number_read_out_of_the_data_is_refused():
    w = weight()

    def piece(a):
        t = Tensor(a)
        largest = int(t.max())              # the same on the first three batches
        loss = (t * w).sum() * largest
        loss.backward()
        return loss
    traced = trace(piece)
    for a in ([[1.2, 0.5, -1, 0]], [[1.5, 0, 0, 1]], [[0.5, 1.9, 0, 1]], [[3.5, 0, 0, 1]]):
        a = np.array(a, np.float32)
        eager, replayed = eager_and_traced(piece, traced, a)
        assert np.array_equal(replayed, eager)
    assert traced.pure_replays == 0 and "int()" in traced.why_checked
    assert "\n" not in traced.why_checked


def test_pure_a_mask_built_in_numpy_from_the_data_is_refused():
    w = weight()

    def piece(a):
        loss = (Tensor(a) * w).masked_fill(a == 0, 0.0).sum()     # a numpy mask: no op computes it
        loss.backward()
        return loss
    traced = trace(piece)
    for a in ([[1, 2, 0, 0]], [[3, 1, 2, 0]], [[1, 2, 3, 4]], [[5, 0, 0, 0]]):
        eager, replayed = eager_and_traced(piece, traced, np.array(a, np.float32))
        assert np.array_equal(replayed, eager)
    assert traced.pure_replays == 0 and "built anew" in traced.why_checked


def test_pure_a_mask_computed_by_an_op_follows_each_batch():
    w = weight()

    def piece(a):
        mask = F.array_function(np.equal, a, 0.0)
        loss = (Tensor(a) * w).masked_fill(mask, 0.0).sum()
        loss.backward()
        return loss
    traced = trace(piece)
    pure_after(traced, np.array([[1, 2, 0, 0]], np.float32))
    eager, replayed = eager_and_traced(piece, traced, np.array([[5, 0, 0, 0]], np.float32))
    assert traced.last == "replayed purely" and np.array_equal(replayed, eager)


def test_pure_the_count_of_non_pad_targets_follows_each_batch():
    lin = nn.Linear(4, 5)

    def piece(a, targets):
        loss = F.cross_entropy(lin(Tensor(a)), targets[:, 1:], ignore_index=0)
        loss.backward()
        return loss
    a = x(2, 3, 4)
    traced = trace(piece)
    pure_after(traced, a, np.array([[1, 2, 3, 4], [1, 2, 3, 4]]))
    eager, replayed = eager_and_traced(piece, traced, a, np.array([[1, 2, 0, 0], [1, 0, 0, 0]]))
    assert traced.last == "replayed purely" and np.array_equal(replayed, eager)


class Step:
    """A trainer-like object whose method is the piece: its attributes are read by the piece."""

    def __init__(self):
        self.lin, self.smoothing, self.calls = nn.Linear(4, 3), 0.0, 0

    def loss(self, a, targets):
        loss = F.cross_entropy(self.lin(Tensor(a)), targets, label_smoothing=self.smoothing)
        loss.backward()
        return loss

    def counted_loss(self, a, targets):
        self.calls += 1         # a side effect a pure replay would not redo
        return self.loss(a, targets)


def test_pure_an_attribute_of_the_pieces_own_object_is_guarded():
    step, targets = Step(), np.array([0, 2, 1])
    traced = trace(step.loss)
    pure_after(traced, x(), targets)
    step.smoothing = 0.2
    eager, replayed = eager_and_traced(step.loss, traced, x(), targets)
    assert np.array_equal(replayed, eager)
    assert "Step.smoothing changed" in traced.why_checked


def test_pure_a_side_effect_on_the_pieces_own_object_is_refused():
    step, targets = Step(), np.array([0, 2, 1])
    traced = trace(step.counted_loss)
    for _ in range(4):
        traced(x(), targets)
    assert step.calls == 4 and traced.pure_replays == 0 and "Step.calls" in traced.why_checked


def test_a_call_under_cprofile_replays_checked_and_the_profiler_keeps_working():
    """Verifying a tape watches the piece's Python with sys.setprofile, which cProfile holds: the
    call is replayed checked instead (right, not verified), and cProfile still records."""
    import cProfile
    import pstats
    weight = Tensor(RNG.normal(size=3), requires_grad=True)

    def piece(x):
        loss = (Tensor(x) * weight).sum()
        loss.backward()
        return loss
    traced = trace(piece)
    xs = RNG.normal(size=(4, 3))
    profiler = cProfile.Profile()
    profiler.enable()
    try:
        losses = [float(traced(x).data) for x in xs]
    finally:
        profiler.disable()
    assert losses == [float((x * weight.data).sum()) for x in xs]
    assert traced.pure_replays == 0 and traced.why_checked == "a Python profiler is active"
    assert pstats.Stats(profiler).total_calls > 0
    traced(xs[0])
    traced(xs[1])
    assert traced.last == "replayed purely"      # verified once the profiler is gone
