"""Training steps over fixed pieces of the batch (transformer/parallel/data_parallel.py): the same
bits on one worker or two, whatever the load, and the one-piece step's numbers up to rounding."""
import subprocess
import sys

import numpy as np
import pytest

from minigrad import functional as F
from transformer.parallel import data_parallel
from transformer.models.config import ModelConfig
from transformer.tasks.dates import PAD
from transformer.parallel.threads import blas_threads
from transformer.training.trainer import TrainConfig
from transformer.training.dates import DateTrainer, rows_exactly_right, teacher_forced_exact_match

SMALL = ModelConfig(d_model=32, num_heads=4, num_encoder_layers=1, num_decoder_layers=1, d_ff=64)


def train(workers_per_step, model_config=SMALL, batch_size=32, busy=False, pieces=2):
    """One step per entry of ``workers_per_step`` on that many workers; -> losses, gradient norms,
    final weights. ``busy``: a pure-Python spinner shares the machine meanwhile."""
    trainer = DateTrainer(model_config, TrainConfig(steps=100, batch_size=batch_size, eval_every=0, checkpoint_every=0,
                                                pieces=pieces))
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if busy else None
    try:
        with blas_threads(1):
            records = []
            for workers in workers_per_step:
                trainer.gradients.workers = workers
                records.append(trainer.train_step())
    finally:
        if spinner is not None:
            spinner.kill()
            spinner.wait()
    return [(r["loss"], r["grad_norm"], r["batch_exact_match"]) for r in records], trainer.model.state_dict()


def assert_same_run(a, b):
    assert a[0] == b[0]
    for name in a[1]:
        np.testing.assert_array_equal(a[1][name], b[1][name], err_msg=name)


def test_one_worker_or_two_switching_mid_run_gives_the_same_bits():
    assert_same_run(train([1, 1, 1, 1]), train([2, 1, 2, 2]))


def test_four_pieces_give_the_same_bits_on_one_worker_or_two():
    """Four pieces (what four MPI ranks need): two per thread, or all four on one."""
    assert_same_run(train([1, 1, 1], pieces=4), train([2, 2, 1], pieces=4))


def test_two_workers_beside_a_busy_process_give_the_quiet_bits():
    assert_same_run(train([2, 2, 2]), train([2, 2, 2], busy=True))


def test_a_model_with_dropout_repeats_on_two_workers():
    """Dropout draws from one generator: its halves run in a fixed order whatever the worker count."""
    with_dropout = ModelConfig(**{**SMALL.to_dict(), "dropout": 0.1})
    assert_same_run(train([1, 1], with_dropout), train([2, 2], with_dropout))


def test_the_halves_give_the_one_piece_gradient_and_loss():
    """The halves' gradients, each weighted by its share of the tokens, are the whole batch's, and
    their rows' exact match (each half's own) is the whole batch's."""
    trainer = DateTrainer(SMALL, TrainConfig(steps=10, batch_size=31, eval_every=0, checkpoint_every=0, clip=0))
    src, tgt = trainer.data.sample_batch(np.random.default_rng(5), 31)
    tgt[3, 9:] = PAD                                 # halves of unequal token counts
    logits = trainer.model(src, tgt[:, :-1])
    loss = F.cross_entropy(logits, tgt[:, 1:], ignore_index=PAD)
    loss.backward()
    whole = {name: p.grad.copy() for name, p in trainer.model.named_parameters()}
    trainer.data.sample_batch = lambda rng, n: (src, tgt)
    trainer.gradients.workers = 2
    record = trainer.train_step()
    np.testing.assert_allclose(record["loss"], loss.item(), rtol=1e-6)
    assert record["tokens"] == int((tgt[:, 1:] != PAD).sum())
    assert record["batch_exact_match"] == teacher_forced_exact_match(logits.data, tgt[:, 1:])
    for name, p in trainer.model.named_parameters():
        np.testing.assert_allclose(p.grad, whole[name], rtol=2e-4, atol=1e-7, err_msg=name)


def test_piece_backward_is_one_process_loss_backward():
    """The step's micro-step, run outside the seam on a whole batch, is a single process's
    ``loss.backward()``: it sets every ``.grad`` to what the one-piece seam gives, at the seam's
    BLAS thread count (OpenBLAS's products on AVX2 round differently on one thread and on two)."""
    trainer = DateTrainer(SMALL, TrainConfig(steps=10, batch_size=16, eval_every=0, checkpoint_every=0, pieces=1))
    batch = trainer.sample_batch()
    with blas_threads(1):
        loss, tokens, rows = trainer.piece_backward(batch)
    plain = {name: p.grad.copy() for name, p in trainer.model.named_parameters()}
    for p in trainer.model.parameters():
        p.grad = None
    computed = trainer.gradients(batch)
    assert computed.blas_threads == 1
    assert computed.loss == loss.item() and computed.tokens == tokens
    for name, p in trainer.model.named_parameters():
        np.testing.assert_array_equal(p.grad, plain[name], err_msg=name)


def test_the_cut_is_fixed_by_the_batch_size_alone():
    assert data_parallel.pieces(128) == [(0, 64), (64, 128)]
    assert data_parallel.pieces(31) == [(0, 15), (15, 31)]
    assert data_parallel.pieces(1) == [(0, 0), (0, 1)]      # one row: an empty piece keeps its place
    assert data_parallel.pieces(10, 4) == [(0, 2), (2, 5), (5, 7), (7, 10)]


def test_run_pieces_keeps_the_jobs_order_and_refuses_other_counts():
    jobs = [lambda: "first", lambda: "second", lambda: "third"]
    assert data_parallel.run_pieces(jobs, 1) == data_parallel.run_pieces(jobs, 2) == ["first", "second", "third"]
    with pytest.raises(ValueError, match="1 or 2 workers"):
        data_parallel.run_pieces(jobs, 3)


def test_the_halves_rows_give_the_whole_batch_exact_match():
    """Each half marks its own rows right or wrong (in its thread); the seam joins them into the
    batch's rows, whose mean is the batch's estimate."""
    trainer = DateTrainer(SMALL, TrainConfig(steps=10, batch_size=8, eval_every=0, checkpoint_every=0))
    _, tgt = trainer.data.sample_batch(np.random.default_rng(2), 8)
    targets = tgt[:, 1:]
    logits = np.eye(SMALL.vocab_size, dtype=np.float32)[targets]      # every row right ...
    logits[[1, 5, 6], 2] = np.roll(logits[[1, 5, 6], 2], 1, axis=-1)  # ... but three
    results = [(0.0, 0, None, rows_exactly_right(logits[lo:hi], targets[lo:hi]))
               for lo, hi in data_parallel.pieces(8)]
    rows = data_parallel.joined_rows(results)
    np.testing.assert_array_equal(rows, rows_exactly_right(logits, targets))
    assert trainer.batch_estimate(rows) == teacher_forced_exact_match(logits, targets) == 5 / 8


def test_a_profiled_step_runs_its_pieces_on_the_thread_the_profile_watches():
    """A profile sees one thread's ops: the seam runs the pieces there, whatever the worker count,
    so the loop needs no switch of its own for it (and the bits stay the same)."""
    import minigrad
    trainer = DateTrainer(SMALL, TrainConfig(steps=10, batch_size=16, eval_every=0, checkpoint_every=0))
    trainer.gradients.workers = 2
    with blas_threads(1):
        with minigrad.profile() as profile:
            watched = trainer.train_step()
        unwatched = trainer.train_step()
    assert profile.rows[("CrossEntropy", "backward")][0] == 2      # both pieces' losses, seen by the profile
    assert (watched["workers"], unwatched["workers"]) == (1, 2)


def test_the_parallel_room_imports_nothing_from_training():
    """Arrows point down: the training loop uses transformer/parallel/, never the other way."""
    import ast
    import pathlib
    room = pathlib.Path(data_parallel.__file__).parent
    upward = [f"{path.name}: {node.module}" for path in sorted(room.glob("*.py"))
              for node in ast.walk(ast.parse(path.read_text()))
              if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("transformer.training")]
    assert upward == []
