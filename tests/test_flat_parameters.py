"""Parameters as views of one flat array (minigrad/flat.py): Adam over them in one call gives the
per-parameter numbers bit for bit, and every way out of the flat layout falls back to those numbers."""
import numpy as np
import pytest

from minigrad import Tensor, optim
from minigrad.accelerated import load_kernels
from minigrad.flat import FlatParameters
from transformer.parallel import data_parallel
from transformer.training.trainer import TrainConfig
from transformer.training.dates import DateTrainer

SHAPES = [(3, 4), (4,), (2, 3, 2), (1,)]


def make_params(dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed)
    return [Tensor(rng.standard_normal(shape).astype(dtype), requires_grad=True) for shape in SHAPES]


def gradients(step, dtype=np.float32):
    rng = np.random.default_rng(100 + step)
    return [rng.standard_normal(shape).astype(dtype) for shape in SHAPES]


@pytest.fixture
def adam_calls(monkeypatch):
    """How many times each step called ``adam_update`` (one per parameter, or one for all)."""
    load_kernels()          # they register for the real function, not for this counter
    calls = []
    real = optim.adam_update

    def counted(*args):
        calls.append(args[0].shape)
        return real(*args)
    monkeypatch.setattr(optim, "adam_update", counted)
    return calls


def test_parameters_become_views_of_one_array():
    params = make_params()
    before = [p.data.copy() for p in params]
    flat = FlatParameters(params)
    assert flat.size == sum(int(np.prod(s)) for s in SHAPES) and flat.values.ndim == 1
    for p, value in zip(params, before):
        np.testing.assert_array_equal(p.data, value)
        assert np.shares_memory(p.data, flat.values)
    params[2].data[1, 0, 1] = 7.0                 # an in-place change is a change of the flat array
    assert 7.0 in flat.values
    flat.grads[:] = np.arange(flat.size)
    flat.set_grads()
    assert flat.intact()
    np.testing.assert_array_equal(params[1].grad, flat.grads[12:16])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("weight_decay", [0.0, 0.01])
def test_adam_in_one_call_gives_the_per_parameter_bits(dtype, weight_decay, adam_calls):
    one_by_one, flat = make_params(dtype), FlatParameters(make_params(dtype))
    adam_a = optim.Adam(one_by_one, lr=0.01, betas=(0.9, 0.98), eps=1e-9, weight_decay=weight_decay)
    adam_b = optim.Adam(flat, lr=0.01, betas=(0.9, 0.98), eps=1e-9, weight_decay=weight_decay)
    for step in range(5):
        for p, g in zip(one_by_one, gradients(step, dtype)):
            p.grad = g
        flat.pack(gradients(step, dtype), flat.grads)
        flat.set_grads()
        del adam_calls[:]
        adam_a.step()
        assert len(adam_calls) == len(SHAPES)
        del adam_calls[:]
        adam_b.step()
        assert adam_calls == [(flat.size,)]      # one call over the flat arrays
    for a, b in zip(one_by_one, flat.params):
        np.testing.assert_array_equal(a.data, b.data)
    for name in ("m", "v"):
        for a, b in zip(getattr(adam_a, name), getattr(adam_b, name)):
            np.testing.assert_array_equal(a, b)


def test_every_way_out_of_the_flat_layout_falls_back_to_the_same_numbers(adam_calls):
    """A gradient that is not the flat array's view, a missing gradient, a replaced ``.data``: the
    step goes parameter by parameter (same numbers); ``gather()`` brings back the one call."""
    one_by_one, flat = make_params(), FlatParameters(make_params())
    adam_a, adam_b = optim.Adam(one_by_one, lr=0.01), optim.Adam(flat, lr=0.01)

    def as_views(grads):
        flat.pack(grads, flat.grads)
        flat.set_grads()

    def as_own_arrays(grads):
        for p, g in zip(flat.params, grads):
            p.grad = g.copy()

    def step(k, give_flat_grads, skip=None):
        """Both optimizers step on step k's gradients (none for parameter ``skip``); -> adam_b's calls."""
        grads = gradients(k)
        for i, (p, g) in enumerate(zip(one_by_one, grads)):
            p.grad = None if i == skip else g
        give_flat_grads(grads)
        if skip is not None:
            flat.params[skip].grad = None
        adam_a.step()
        del adam_calls[:]
        adam_b.step()
        return len(adam_calls)

    assert step(0, as_views) == 1
    assert step(1, as_own_arrays) == len(SHAPES)
    assert step(2, as_views, skip=3) == len(SHAPES) - 1       # skipped, as without FlatParameters
    for params in (one_by_one, flat.params):
        params[0].data = params[0].data + 0                  # load_state_dict assigns .data like this
    assert step(3, as_views) == len(SHAPES) and not flat.intact()
    flat.gather()
    assert step(4, as_views) == 1
    for a, b in zip(one_by_one, flat.params):
        np.testing.assert_array_equal(a.data, b.data)
    for a, b in zip(adam_a.v, adam_b.v):
        np.testing.assert_array_equal(a, b)
    assert all(np.shares_memory(p.data, flat.values) for p in flat.params)


def test_adam_state_saved_and_loaded_continues_in_one_call(adam_calls):
    flat = FlatParameters(make_params())
    adam = optim.Adam(flat, lr=0.01)
    for k in range(3):
        flat.pack(gradients(k), flat.grads)
        flat.set_grads()
        adam.step()
    state, values = adam.state_dict(), [p.data.copy() for p in flat.params]
    flat.pack(gradients(3), flat.grads)
    adam.step()
    expected = [p.data.copy() for p in flat.params]

    params = make_params()
    for p, value in zip(params, values):
        p.data = value.copy()
    again = FlatParameters(params)
    resumed = optim.Adam(again, lr=0.01).load_state_dict(state)
    again.pack(gradients(3), again.grads)
    again.set_grads()
    del adam_calls[:]
    resumed.step()
    assert len(adam_calls) == 1
    for p, value in zip(again.params, expected):
        np.testing.assert_array_equal(p.data, value)
    assert state["m.0"] is not resumed.m[0]        # the saved state is a copy, not the flat array


def test_parameters_of_two_dtypes_or_a_changed_shape_are_refused():
    mixed = make_params()[:1] + make_params(np.float64)[:1]
    with pytest.raises(ValueError, match="one float dtype, got float32, float64"):
        FlatParameters(mixed)
    with pytest.raises(ValueError, match="empty"):
        FlatParameters([])
    flat = FlatParameters(make_params())
    flat.params[1].data = np.zeros(5, np.float32)
    with pytest.raises(ValueError, match=r"parameter 1 is now float32 of shape \(5,\), laid out as float32 "
                                         r"of shape \(4,\)"):
        flat.gather()


def test_combine_from_buckets_equals_the_loop_over_parameters():
    """The halves' flat buckets added in three passes give the tuple path's gradients bit for bit,
    and a half that left a parameter without gradient takes the tuple path."""
    rng = np.random.default_rng(3)
    halves = [[Tensor(rng.standard_normal(s).astype(np.float32)) for s in SHAPES] for _ in range(2)]
    results = [(0.5, 7, tuple(h), None) for h in halves[:1]] + [(0.25, 4, tuple(halves[1]), None)]
    params = make_params()
    loss, tokens = data_parallel.combine(params, results)
    expected = [p.grad.copy() for p in params]

    flat = FlatParameters(make_params())
    buckets = [flat.new_array() for _ in halves]
    for bucket, h in zip(buckets, halves):
        flat.pack([t.data for t in h], bucket)
    flat_results = [(r[0], r[1], bucket, None) for r, bucket in zip(results, buckets)]
    assert data_parallel.combine(flat, flat_results) == (loss, tokens)
    assert flat.intact()
    for p, g in zip(flat.params, expected):
        np.testing.assert_array_equal(p.grad, g)

    mixed = [flat_results[0], (0.25, 4, tuple(halves[1][:3]) + (None,), None)]
    data_parallel.combine(flat, mixed)
    assert not flat.intact()
    np.testing.assert_array_equal(flat.params[3].grad, halves[0][3].data * np.float32(7 / 11))
    for p, g in zip(flat.params[:3], expected[:3]):
        np.testing.assert_array_equal(p.grad, g)


def test_a_resumed_run_is_flat_again(tmp_path, adam_calls):
    """Loading a checkpoint assigns every ``.data``: the trainer gathers them back, so a resumed run
    keeps the one-call step (and its numbers, tests/test_repeatable_runs.py)."""
    from transformer.models.config import ModelConfig
    small = ModelConfig(d_model=16, num_heads=2, num_encoder_layers=1, num_decoder_layers=1, d_ff=32)
    trainer = DateTrainer(small, TrainConfig(steps=3, batch_size=8, eval_every=0, checkpoint_every=0),
                      out_dir=str(tmp_path))
    trainer.train_step()
    trainer.save(str(tmp_path / "model.npz"))
    resumed = DateTrainer.resume(str(tmp_path / "model.npz"))
    assert resumed.flat_params.params[0].data is resumed.flat_params.value_views[0]
    del adam_calls[:]
    resumed.train_step()
    assert adam_calls == [(resumed.flat_params.size,)]


# ------------------------------------------------------------ backward() into a bucket of its own
def quadratic_loss(params, scale):
    """A loss that reaches ``params`` in a known way: d/dp sum(scale * p**2) = 2 * scale * p."""
    total = None
    for p in params:
        term = (p * p * scale).sum()
        total = term if total is None else total + term
    return total


def test_backward_inside_gradients_into_fills_the_bucket_and_leaves_grad_alone():
    flat = FlatParameters(make_params())
    bucket = flat.new_array()
    with flat.gradients_into(bucket) as received:
        quadratic_loss(flat.params, 3.0).backward()
    assert received == [True] * len(SHAPES)
    assert all(p.grad is None for p in flat.params)
    for p, view in zip(flat.params, flat.views(bucket)):
        np.testing.assert_array_equal(view, (p.data * np.float32(3.0) + p.data * np.float32(3.0)))
    quadratic_loss(flat.params, 3.0).backward()            # outside: .grad as ever
    for p, view in zip(flat.params, flat.views(bucket)):
        np.testing.assert_array_equal(p.grad, view)


def test_a_second_backward_adds_to_the_bucket_as_to_grad():
    flat = FlatParameters(make_params())
    bucket = flat.new_array()
    bucket[:] = 99.0                                        # last step's numbers: overwritten, not added to
    with flat.gradients_into(bucket):
        quadratic_loss(flat.params, 1.0).backward()
        quadratic_loss(flat.params, 2.0).backward()
    quadratic_loss(flat.params, 1.0).backward()
    quadratic_loss(flat.params, 2.0).backward()
    np.testing.assert_array_equal(bucket, np.concatenate([p.grad.reshape(-1) for p in flat.params]))


def test_a_parameter_the_loss_does_not_reach_is_reported():
    flat = FlatParameters(make_params())
    with flat.gradients_into(flat.new_array()) as received:
        quadratic_loss(flat.params[:2], 1.0).backward()
    assert received == [True, True, False, False]


def test_two_threads_backward_at_once_each_into_its_own_bucket():
    """What the data-parallel seam does: two pieces' backward() at the same time, no gradient mixed."""
    import threading
    flat = FlatParameters(make_params())
    buckets = [flat.new_array() for _ in range(2)]
    start = threading.Barrier(2)

    def piece(i):
        start.wait()
        for _ in range(50):                                 # long enough to interleave
            with flat.gradients_into(buckets[i]):
                quadratic_loss(flat.params, float(i + 1)).backward()

    threads = [threading.Thread(target=piece, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i, bucket in enumerate(buckets):
        alone = FlatParameters(make_params())
        quadratic_loss(alone.params, float(i + 1)).backward()
        np.testing.assert_array_equal(bucket, np.concatenate([p.grad.reshape(-1) for p in alone.params]))
    assert all(p.grad is None for p in flat.params)


def test_gradients_into_refuses_a_graph_and_a_second_bucket():
    flat = FlatParameters(make_params(np.float64))
    with flat.gradients_into(flat.new_array()):
        with pytest.raises(RuntimeError, match="create_graph=True.*differentiate outside"):
            quadratic_loss(flat.params, 1.0).backward(create_graph=True)
        with pytest.raises(RuntimeError, match="already entered"):
            with flat.gradients_into(flat.new_array()):
                pass
    quadratic_loss(flat.params, 1.0).backward(create_graph=True)     # outside it, as ever
    assert all(p.grad is not None for p in flat.params)
