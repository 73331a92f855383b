"""minigrad.profile(): every op of a training step, forward and backward, with its path; the
rows account for the step's time; nothing recorded when off; a profile watches its own thread
only, and what is computed is the same profiled or not (second derivatives included)."""
import threading

import numpy as np
import pytest

import minigrad
from minigrad import Tensor, autograd, detect_anomaly, kernels
from minigrad import functional as F
from minigrad.observers import watching
from transformer.models.encoder_decoder import ModelConfig
from transformer.training.trainer import TrainConfig
from transformer.training.dates import DateTrainer


@pytest.fixture(scope="module")
def trainer():
    """The default model and batch: the profile's rows should account for its step's time."""
    trainer = DateTrainer(model_config=ModelConfig(), train_config=TrainConfig(steps=3, eval_every=0, checkpoint_every=0))
    trainer.train_step()  # compiles: not what the profile should show
    return trainer


def test_a_training_step_shows_every_op_forward_and_backward_with_its_path(trainer):
    with kernels.use_backend("numba"), minigrad.profile() as prof:
        trainer.train_step()
    rows = {key: row for key, row in prof.rows.items()}
    for op in ("SelfAttentionCore", "CrossAttentionCore", "Linear", "LayerNorm", "ReLU", "CrossEntropy"):
        assert (op, "forward") in rows and (op, "backward") in rows, op
    assert rows[("SelfAttentionCore", "forward")][2] > 0 and rows[("SelfAttentionCore", "forward")][3] == 0
    assert rows[("optimizer.step", "call")][2] > 0  # Adam's kernel ran inside the optimizer's row
    table = prof.table()
    assert "SelfAttentionCore        forward  kernel" in table and "optimizer.step" in table
    assert "outside the rows" in table and "wall time of the block" in table
    # the rows account for the step: loose, the machine may be busy
    assert 0.7 * prof.wall_seconds <= prof.total_seconds() <= prof.wall_seconds


def test_the_numpy_backend_shows_numpy_everywhere(trainer):
    with kernels.use_backend("numpy"), minigrad.profile() as prof:
        trainer.train_step()
    assert all(row[2] == 0 for row in prof.rows.values())
    assert " kernel " not in prof.table()


def test_a_nested_call_counts_once_in_its_outer_row():
    x = Tensor(np.random.default_rng(0).standard_normal((4, 5)), requires_grad=True)
    with minigrad.profile() as prof:
        F.softmax(x, axis=-1).sum().backward()
    assert prof.rows[("Softmax", "forward")][0] == 1
    assert ("softmax", "call") not in prof.rows  # the accelerated function ran inside the op's row
    assert prof.rows[("autograd engine", "backward")][0] == 1


def test_autograd_grad_gives_the_engine_its_row_as_backward_does():
    """A data-parallel training step takes its gradients with grad(): its profile keeps the engine's row."""
    x = Tensor(np.random.default_rng(0).standard_normal((4, 5)), requires_grad=True)
    with minigrad.profile() as prof:
        (gx,) = minigrad.autograd.grad(F.softmax(x, axis=-1).sum(), x)
    assert prof.rows[("autograd engine", "backward")][0] == 1
    assert gx.shape == x.shape


def test_off_nothing_is_recorded_and_misuse_is_a_clear_error():
    assert watching.observers == ()
    prof = minigrad.profile()
    with prof:
        with pytest.raises(RuntimeError, match="already recording"):
            with minigrad.profile():
                pass
        with pytest.raises(RuntimeError, match="has not ended yet"):
            prof.table()
    assert watching.observers == ()


# ------------------------------------------------- watched or not, the same numbers
def hessian_diagonal(where):
    """d2/dx2 of sum(exp(x) * x) at x = [0.3, -1.2, 2.0], with the forward wholly, partly or not
    at all inside a profile (or under detect_anomaly); both grads outside. Exact: exp(x) (x + 2)."""
    x = Tensor(np.array([0.3, -1.2, 2.0]), requires_grad=True)
    watch = detect_anomaly if where == "anomaly" else minigrad.profile
    if where in ("whole", "anomaly"):
        with watch():
            y = (x.exp() * x).sum()
    elif where == "part":
        e = x.exp()
        with watch():
            y = (e * x).sum()
    else:
        y = (x.exp() * x).sum()
    g, = autograd.grad(y, x, create_graph=True)
    assert g.requires_grad
    return np.array([autograd.grad(g[i], x, retain_graph=True)[0].data[i] for i in range(3)])


@pytest.mark.parametrize("where", ["whole", "part", "none", "anomaly"])
def test_second_derivatives_are_the_same_profiled_or_not(where):
    x = np.array([0.3, -1.2, 2.0])
    np.testing.assert_allclose(hessian_diagonal(where), np.exp(x) * (x + 2), rtol=1e-12)


def test_the_backward_passes_profiled_too():
    x = Tensor(np.array([0.3, -1.2, 2.0]), requires_grad=True)
    with minigrad.profile() as prof:
        y = (x.exp() * x).sum()
        g, = autograd.grad(y, x, create_graph=True)
        h = autograd.grad(g.sum(), x)[0]
    np.testing.assert_allclose(h.data, np.exp(x.data) * (x.data + 2) + 0 * x.data, rtol=1e-12)
    assert prof.rows[("Mul", "backward")][0] >= 2     # the first and the second backward


def test_a_profile_sees_its_own_thread_only_and_two_threads_may_profile_at_once():
    x = Tensor(np.ones((3, 4)), requires_grad=True)
    inside, release = threading.Event(), threading.Event()
    other = {}

    def other_thread():
        with minigrad.profile() as prof:         # a second profile, at the same time: allowed
            inside.set()
            release.wait(10)
            (x.tanh() * 2).sum()
        other["rows"] = set(prof.rows)

    thread = threading.Thread(target=other_thread)
    with minigrad.profile() as prof:
        thread.start()
        inside.wait(10)
        x.exp().sum()
        release.set()
        thread.join(10)
    assert {name for name, _ in prof.rows} == {"Exp", "Sum"}       # not the other thread's Tanh
    assert {name for name, _ in other["rows"]} == {"Tanh", "Mul", "Sum"}


def test_a_profile_entered_again_adds_the_blocks_rows_and_wall_time():
    x = Tensor(np.ones(3), requires_grad=True)
    prof = minigrad.profile()
    with prof:
        x.exp()
    first = prof.wall_seconds
    with prof:
        x.exp()
    assert prof.rows[("Exp", "forward")][0] == 2
    assert prof.wall_seconds > first
