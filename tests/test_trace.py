"""minigrad.trace: a replayed step gives exactly the eager step's losses and gradients.

Each model is run over fresh batches twice from the same weights: eagerly, and through one
traced piece (the first call records, the others replay). ``np.array_equal``, not a tolerance:
the tape runs the same kernels in the same order and sums gradients in the same order.
"""
import numpy as np
import pytest

import minigrad
from minigrad import functional as F, optim
from minigrad.trace import trace
from transformer.ladder.experiment import MAX_LEN, mix
from transformer.ladder.rungs import FullBlock, Heads
from transformer.models import build_model
from transformer.models.config import DecoderOnlyConfig, ModelConfig
from transformer.tasks import dates, language
from transformer.training.dates import teacher_forced
from transformer.training.next_word import default_model_config

BATCHES = 6


def date_piece(model):
    def piece(src, tgt):
        loss, _, _ = teacher_forced(model, src, tgt)
        loss.backward()
        return loss
    return piece


def date_batches(count, batch_size=8, seed=1):
    data, rng = dates.DateDataset(), np.random.default_rng(seed)
    return [data.sample_batch(rng, batch_size) for _ in range(count)]


def sentence_batches(count, batch_size=8, seed=1):
    """Next-word batches of one shape whose count of scored targets changes from batch to batch
    (a varying number of each row's last targets left out, as padding would)."""
    words, rng = language.Language(), np.random.default_rng(seed)
    batches = []
    for _ in range(count):
        batch = language.encode_batch(words.sample("train", batch_size, rng), loss_on="sentence")
        targets = np.where(batch.loss_mask, batch.targets, -100)
        targets[rng.integers(0, batch_size, 3), -int(rng.integers(1, 5)):] = -100
        batches.append((batch.inputs, targets))
    return batches


def next_word_piece(model):
    def piece(inputs, targets):
        loss = F.cross_entropy(model(inputs), targets, ignore_index=-100)
        loss.backward()
        return loss
    return piece


def assert_traced_equals_eager(model, piece, batches):
    traced = trace(piece)
    for batch in batches:
        model.zero_grad()
        eager_loss = piece(*batch).data.copy()
        eager_grads = [p.grad.copy() for p in model.parameters()]
        model.zero_grad()
        traced_loss = traced(*batch).data
        assert np.array_equal(traced_loss, eager_loss), traced.last
        for p, expected in zip(model.parameters(), eager_grads):
            assert np.array_equal(p.grad, expected), traced.last
    assert traced.replays >= 1, "no batch was replayed: the test compared eager with eager"
    return traced


def test_the_date_model_replays_bit_for_bit():
    minigrad.manual_seed(0)
    model = build_model(ModelConfig())
    traced = assert_traced_equals_eager(model, date_piece(model), date_batches(BATCHES))
    assert traced.recordings == 1      # one shape of batch: recorded once, replayed after


def test_the_decoder_only_date_model_replays_bit_for_bit():
    minigrad.manual_seed(0)
    model = build_model(DecoderOnlyConfig())
    assert_traced_equals_eager(model, date_piece(model), date_batches(BATCHES))


def test_the_next_word_model_replays_bit_for_bit_whatever_the_padding():
    minigrad.manual_seed(0)
    model = build_model(default_model_config())
    batches = sentence_batches(3 * BATCHES)
    assert len({b[0].shape for b in batches}) == 1
    assert len({int((b[1] != -100).sum()) for b in batches}) > 1, "the counted targets never change"
    assert_traced_equals_eager(model, next_word_piece(model), batches)


@pytest.mark.parametrize("rung", [Heads, FullBlock])
def test_ladder_sized_rungs_replay_bit_for_bit(rung):
    minigrad.manual_seed(0)
    model = rung(len(language.VOCAB), 32, MAX_LEN)
    words, rng = language.Language(), np.random.default_rng(2)
    batches = []
    for _ in range(BATCHES):
        batch = language.encode_batch(words.sample("train", 64, rng, mix=mix(words.kinds)), "answer", MAX_LEN)
        batches.append((batch.inputs, batch.answer_position, batch.targets[np.arange(64), batch.answer_position]))

    def piece(inputs, at, targets):
        loss = F.cross_entropy(model(inputs, at), targets)
        loss.backward()
        return loss
    assert_traced_equals_eager(model, piece, batches)


def test_the_printed_step_has_one_line_per_op_forward_and_backward():
    minigrad.manual_seed(0)
    model = build_model(ModelConfig(d_model=8, num_heads=2, d_ff=16, num_encoder_layers=1, num_decoder_layers=1))
    traced = trace(date_piece(model), names=model.named_parameters())
    traced(*date_batches(1, batch_size=2)[0])
    code = traced.code
    tape = traced.last_tape
    forward = [line for line in code.splitlines() if " = " in line and ".backward(" not in line
               and "ones_like" not in line and "+" not in line]
    assert len(forward) == len(tape.lines)
    assert sum(".backward(" in line for line in code.splitlines()) == sum(line.recorded for line in tape.lines)
    assert "CrossEntropy(" in code and "SelfAttentionCore" in code and "encoder_layers_0" in code


def train(model, batches, traced):
    """Adam with clipping, as the trainer does it, through the traced piece or eagerly."""
    piece = date_piece(model)
    step = trace(piece) if traced else piece
    optimizer = optim.Adam(model.parameters(), lr=3e-3)
    losses = []
    for batch in batches:
        optimizer.zero_grad()
        losses.append(step(*batch).data.copy())
        optim.clip_grad_norm(model.parameters(), 1.0)
        optimizer.step()
    return losses


@pytest.mark.slow
def test_a_whole_small_training_traced_equals_eager():
    batches = date_batches(300, batch_size=16, seed=3)
    config = ModelConfig(d_model=16, num_heads=2, d_ff=32, num_encoder_layers=1, num_decoder_layers=1)
    runs = []
    for traced in (False, True):
        minigrad.manual_seed(0)
        model = build_model(config)
        runs.append((train(model, batches, traced), [p.data.copy() for p in model.parameters()]))
    (eager_losses, eager_weights), (traced_losses, traced_weights) = runs
    assert np.array_equal(eager_losses, traced_losses)
    assert all(np.array_equal(a, b) for a, b in zip(eager_weights, traced_weights))
    assert eager_losses[-1] < eager_losses[0]      # it learned: the steps did something
