"""minigrad.profile(): every op of a training step, forward and backward, with its path; the
rows account for the step's time; nothing recorded (and one attribute read) when off."""
import numpy as np
import pytest

import minigrad
from minigrad import Tensor, kernels, profiler
from minigrad import functional as F
from minigrad.kernels import registry
from transformer.model import ModelConfig
from transformer.training import TrainConfig, Trainer


@pytest.fixture(scope="module")
def trainer():
    """The default model and batch: the profile's rows should account for its step's time."""
    trainer = Trainer(model_config=ModelConfig(), train_config=TrainConfig(steps=3, eval_every=0, checkpoint_every=0))
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


def test_off_nothing_is_recorded_and_misuse_is_a_clear_error():
    assert profiler.active is None and registry.path_listener is None
    prof = minigrad.profile()
    with prof:
        with pytest.raises(RuntimeError, match="already recording"):
            with minigrad.profile():
                pass
        with pytest.raises(RuntimeError, match="has not ended yet"):
            prof.table()
    assert profiler.active is None and registry.path_listener is None
