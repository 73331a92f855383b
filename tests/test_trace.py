"""minigrad.trace: a replayed step gives exactly the eager step's losses and gradients.

Each model is run over fresh batches twice from the same weights: eagerly, and through one
traced piece (the first call records, the second replays checked and verifies the tape, the
others replay purely). ``np.array_equal``, not a tolerance: the tape runs the same kernels in
the same order and sums gradients in the same order.
"""
import threading

import numba
import numpy as np
import pytest

import minigrad
from minigrad import functional as F, optim
from minigrad.trace import trace
from transformer.ladder.experiment import MAX_LEN, mix
from transformer.ladder.rungs import RUNGS
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


def assert_traced_equals_eager(model, piece, batches, pure=True):
    """Eager and traced agree on every batch; with ``pure``, the later batches replay purely."""
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
    if pure:
        assert traced.pure_replays >= len(batches) - 2 * traced.recordings, traced.why_checked
    return traced


def test_the_date_model_replays_bit_for_bit():
    minigrad.manual_seed(0)
    model = build_model(ModelConfig())
    traced = assert_traced_equals_eager(model, date_piece(model), date_batches(BATCHES))
    assert traced.recordings == 1      # one shape of batch: recorded once, replayed after


def test_the_decoder_only_date_model_replays_bit_for_bit():
    minigrad.manual_seed(0)
    model = build_model(DecoderOnlyConfig())
    traced = assert_traced_equals_eager(model, date_piece(model), date_batches(BATCHES), pure=False)
    assert traced.pure_replays == 0 and "built anew" in traced.why_checked   # the joined sequences: numpy


def decoder_only_piece(model):
    """The decoder-only step with its batch prepared outside (as a trainer prepares it): pure."""
    def piece(sequences, answer):
        loss, _, _ = model.next_token_loss(sequences, answer)
        loss.backward()
        return loss
    return piece


def decoder_only_batches(count):
    batches = []
    for src, tgt in date_batches(count):
        sequences = dates.join_for_decoder_only(src, tgt)
        batches.append((sequences, (np.arange(sequences.shape[1]) >= dates.PROMPT_LEN) & (sequences != dates.PAD)))
    return batches


def test_the_decoder_only_date_model_replays_purely_bit_for_bit():
    minigrad.manual_seed(0)
    model = build_model(DecoderOnlyConfig())
    batches = decoder_only_batches(BATCHES)
    assert len({int(answer.sum()) for _, answer in batches}) > 1, "the scored targets never change"
    assert_traced_equals_eager(model, decoder_only_piece(model), batches)


def test_the_next_word_model_replays_bit_for_bit_whatever_the_padding():
    minigrad.manual_seed(0)
    model = build_model(default_model_config())
    batches = sentence_batches(3 * BATCHES)
    assert len({b[0].shape for b in batches}) == 1
    assert len({int((b[1] != -100).sum()) for b in batches}) > 1, "the counted targets never change"
    assert_traced_equals_eager(model, next_word_piece(model), batches)


@pytest.mark.parametrize("rung", RUNGS, ids=lambda rung: rung.__name__)
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
    traced = assert_traced_equals_eager(model, piece, batches)
    assert traced.pure_replays > 0, traced.why_checked      # the averaging weights are made once, too


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


def train(model, batches, traced, piece_of=date_piece):
    """Adam with clipping, as the trainer does it, through the traced piece or eagerly."""
    piece = piece_of(model)
    step = trace(piece) if traced else piece
    optimizer = optim.Adam(model.parameters(), lr=3e-3)
    losses = []
    for batch in batches:
        optimizer.zero_grad()
        losses.append(step(*batch).data.copy())
        optim.clip_grad_norm(model.parameters(), 1.0)
        optimizer.step()
    if traced:
        assert step.pure_replays == len(batches) - 2, step.why_checked
    return losses


SMALL = dict(d_model=16, num_heads=2, d_ff=32)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("config, batches_of, piece_of", [
    (ModelConfig(num_encoder_layers=1, num_decoder_layers=1, **SMALL), date_batches, date_piece),
    (DecoderOnlyConfig(num_layers=2, **SMALL), decoder_only_batches, decoder_only_piece)],
    ids=["encoder-decoder", "decoder-only"])
def test_adam_steps_replayed_purely_end_with_eager_weights(threads, config, batches_of, piece_of):
    batches, runs = batches_of(25), []
    before = numba.get_num_threads()
    numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    try:
        for traced in (False, True):
            minigrad.manual_seed(0)
            model = build_model(config)
            runs.append((train(model, batches, traced, piece_of), [p.data.copy() for p in model.parameters()]))
    finally:
        numba.set_num_threads(before)
    (eager_losses, eager_weights), (traced_losses, traced_weights) = runs
    assert np.array_equal(eager_losses, traced_losses)
    assert all(np.array_equal(a, b) for a, b in zip(eager_weights, traced_weights))


def test_two_threads_each_replaying_its_own_piece_equal_eager():
    """Two workers, each with its own model copy and traced piece, at the same time (a data-parallel
    trainer's threads): the class-wide watch of a recording in one thread spoils nothing in the other."""
    batches = date_batches(8, seed=5)
    config = ModelConfig(num_encoder_layers=1, num_decoder_layers=1, **SMALL)
    models, expected, got, errors = {}, {}, {}, []
    for worker in (0, 1):
        minigrad.manual_seed(worker)
        models[worker] = build_model(config)
        expected[worker] = [date_piece(models[worker])(*b).data.copy() for b in batches[worker::2] * 3]

    def work(worker):
        try:
            traced = trace(date_piece(models[worker]))
            got[worker] = [traced(*b).data.copy() for b in batches[worker::2] * 3]
            assert traced.pure_replays > 0, traced.why_checked
        except BaseException as error:       # reported by the main thread
            errors.append(error)
    threads = [threading.Thread(target=work, args=(worker,)) for worker in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=600)
    assert not errors, errors
    assert all(np.array_equal(a, b) for worker in (0, 1) for a, b in zip(got[worker], expected[worker]))


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
