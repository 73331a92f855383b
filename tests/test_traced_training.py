"""The trainers' step runs traced by default (``transformer/training/traced_pieces.py``: each piece's
forward, loss and ``loss.backward()`` recorded once per thread and shape, then replayed from the
tape): the same losses, gradient norms, weights and optimizer state as the eager step
(``--eager``, ``Trainer.trace_pieces(False)``), bit for bit, for the date model on one and two
workers and four pieces, with dropout, decoder-only, the next-word model, the ladder's rungs and the
commands themselves (an MPI job: tests/test_mpi.py). Each test also checks the replay was pure
where it can be, so the fast path is the one compared."""
import hashlib
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import minigrad
from transformer.ladder import RUNGS, LadderConfig
from transformer.ladder import experiment
from transformer.models.config import DecoderOnlyConfig, ModelConfig
from transformer.tasks.language import Language
from transformer.training.dates import DateTrainer
from transformer.parallel.data_parallel import second_worker
from transformer.training.next_word import NextWordTrainer, default_model_config
from transformer.training.trainer import TrainConfig

SMALL = ModelConfig(d_model=32, num_heads=4, num_encoder_layers=1, num_decoder_layers=1, d_ff=64)
STEPS = 8


def fingerprint(trainer) -> str:
    """SHA-256 of every weight and every optimizer array."""
    digest = hashlib.sha256()
    for p in trainer.model.parameters():
        digest.update(p.data.tobytes())
    for array in trainer.optimizer.state_dict().values():
        if isinstance(array, np.ndarray):
            digest.update(array.tobytes())
    return digest.hexdigest()


def train(trainer_class, model_config, traced, workers=None, **train_options):
    trainer = trainer_class(model_config, TrainConfig(steps=STEPS, batch_size=32, eval_every=0, checkpoint_every=0,
                                                      target_accuracy=0, **train_options), out_dir="unused")
    trainer.trace_pieces(traced)
    trainer.gradients.workers = workers
    with trainer.gradients.running():
        log = [trainer.train_step() for _ in range(STEPS)]
    steps = [(r["loss"], r["grad_norm"], r["tokens"], r["batch_exact_match"]) for r in log]
    return steps, fingerprint(trainer), trainer


def how_the_last_pieces_ran(trainer) -> str:
    return trainer.gradients.piece_backward.traced().last


@pytest.mark.parametrize("workers, pieces", [(1, 2), (2, 2), (2, 4)])
def test_the_date_trainer_traced_is_the_eager_one_bit_for_bit(workers, pieces):
    eager = train(DateTrainer, SMALL, False, workers, pieces=pieces)
    traced = train(DateTrainer, SMALL, True, workers, pieces=pieces)
    assert traced[:2] == eager[:2]
    assert how_the_last_pieces_ran(traced[2]) == "replayed purely"


def test_with_dropout_the_trace_replays_checked_and_keeps_the_bits():
    """Dropout's masks are built outside an op (the attention's step-by-step path): the verifying
    replay says so, and from then on the pieces run eagerly, never purely with a stale mask."""
    config = ModelConfig(d_model=32, num_heads=4, num_encoder_layers=1, num_decoder_layers=1, d_ff=64, dropout=0.1)
    eager, traced = train(DateTrainer, config, False), train(DateTrainer, config, True)
    assert traced[:2] == eager[:2]
    pieces = traced[2].gradients.piece_backward
    assert "built anew" in pieces.never_pure and pieces.traced().pure_replays == 0
    assert pieces.traced().replays == 1         # one checked replay said so; the rest ran eagerly


def test_the_decoder_only_date_model_traced_keeps_the_bits():
    config = DecoderOnlyConfig(d_model=32, num_heads=4, num_layers=1, d_ff=64)
    eager, traced = train(DateTrainer, config, False, 1), train(DateTrainer, config, True, 1)
    assert traced[:2] == eager[:2]


def test_the_next_word_trainer_traced_is_the_eager_one_bit_for_bit():
    config = default_model_config(d_model=32, num_heads=4, num_layers=2, d_ff=64)
    eager, traced = train(NextWordTrainer, config, False, 2), train(NextWordTrainer, config, True, 2)
    assert traced[:2] == eager[:2]
    assert how_the_last_pieces_ran(traced[2]) == "replayed purely"


def test_a_second_worker_replays_the_first_workers_tape_from_its_first_piece():
    """Each thread holds a trace of its own, and the helper's shares the tapes the first recorded:
    once the first worker has recorded and verified, a second worker (the thread policy's first
    probe of two) never records and replays purely at once; a recording there would make two
    workers look slower than one."""
    trainer = DateTrainer(SMALL, TrainConfig(batch_size=32, eval_every=0, checkpoint_every=0, target_accuracy=0),
                          out_dir="unused")
    with trainer.gradients.running():
        trainer.gradients.workers = 1
        for _ in range(2):
            trainer.train_step()                  # two pieces a step: recorded, verified, pure
        trainer.gradients.workers = 2
        for _ in range(3):
            trainer.train_step()
    pieces = trainer.gradients.piece_backward
    helper = second_worker().submit(pieces.traced).result()
    assert helper is not pieces.traced() and helper.tapes is pieces.traced().tapes
    assert pieces.traced().recordings == 1 and helper.recordings == 0
    assert helper.replays == helper.pure_replays == 3


def test_a_traced_batch_forward_reads_only_the_model_and_the_config():
    trainer = DateTrainer(SMALL, TrainConfig(batch_size=8, eval_every=0, checkpoint_every=0), out_dir="unused")
    original = DateTrainer.batch_forward

    def reads_the_data(self, batch):
        self.data
        return original(self, batch)
    try:
        DateTrainer.batch_forward = reads_the_data
        with pytest.raises(AttributeError, match=r"reads only self.model and self.config, not self.data.*--eager"):
            trainer.gradients(trainer.sample_batch())
    finally:
        DateTrainer.batch_forward = original
    trainer.trace_pieces(False)
    assert trainer.gradients.piece_backward == trainer.piece_backward


def test_every_rung_trains_to_the_same_weights_traced_and_eager():
    made = []
    real = minigrad.trace

    def kept(*args, **kwargs):
        made.append(real(*args, **kwargs))
        return made[-1]
    for rung in RUNGS:
        weights = []
        for eager in (True, False):
            experiment.minigrad.trace, made[:] = kept, []
            try:
                model = experiment.train_rung(rung, LadderConfig(steps=6, eager=eager), Language(seed=1), 1)
            finally:
                experiment.minigrad.trace = real
            weights.append([p.data.copy() for p in model.parameters()])
        for a, b in zip(*weights):
            np.testing.assert_array_equal(a, b, err_msg=rung.name)
        assert made and made[0].last == "replayed purely", (rung.name, made[0].why_checked)


DATES = (sys.executable, "-c", "import sys, dates_commands; sys.exit(dates_commands.train(sys.argv[1:]))")
TINY = ["--d-model", "16", "--heads", "2", "--layers", "1", "--d-ff", "32", "--batch-size", "16",
        "--target-accuracy", "0", "--no-progress", "--max-steps", "5"]


def test_dates_train_eager_and_traced_write_the_same_run(tmp_path):
    runs = {}
    for flag in ((), ("--eager",)):
        out = tmp_path / ("eager" if flag else "traced")
        result = subprocess.run([*DATES, "--out", str(out), *TINY, *flag], capture_output=True, text=True, timeout=300)
        assert result.returncode == 0, result.stderr
        with open(os.path.join(out, "train_log.jsonl")) as log:
            losses = [(r["loss"], r.get("grad_norm")) for r in map(json.loads, log)]
        with np.load(os.path.join(out, "model.npz")) as saved:
            arrays = {name: saved[name] for name in saved.files if name.startswith(("model/", "optim/"))}
        runs[flag] = losses, arrays
    (traced_losses, traced), (eager_losses, eager) = runs[()], runs[("--eager",)]
    assert traced_losses == eager_losses and traced.keys() == eager.keys()
    assert any(name.startswith("optim/") for name in traced)       # Adam's moments are compared too
    for name in traced:
        np.testing.assert_array_equal(traced[name], eager[name], err_msg=name)


def test_the_readme_and_the_help_quote_the_same_measured_ratio():
    """The --eager help states what tracing bought, measured; the README and docs/tracing.md quote it."""
    from transformer.commands.training_command import EAGER_COST
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ratio = re.search(r"(\d\.\d+)x the eager", EAGER_COST).group(1)
    traced, eager = re.search(r"\((\d+\.\d) against (\d+\.\d) ms", EAGER_COST).groups()
    with open(os.path.join(repo, "README.md"), encoding="utf-8") as readme:
        assert f"{ratio}x the eager step's time" in readme.read()
    with open(os.path.join(repo, "docs", "tracing.md"), encoding="utf-8") as page:
        assert f"| {traced} ms | {eager} ms | median {ratio} " in page.read()


@pytest.mark.slow
def test_evaluations_and_snapshots_between_steps_keep_the_pure_replay(tmp_path):
    """They run the model eagerly between steps (decoding, attention maps): no guard of the tape may
    break, or every evaluation would cost a recording, and three breaks the pure replay."""
    trainer = DateTrainer(SMALL, TrainConfig(steps=12, batch_size=16, target_accuracy=0, eval_every=3,
                                             snapshot_every=4), out_dir=str(tmp_path))
    trainer.run(progress=False)
    pieces = trainer.gradients.piece_backward
    traces = [pieces.traced(), second_worker().submit(pieces.traced).result()]
    used = [t for t in traces if t.recordings]
    assert used and sum(t.recordings + t.replays for t in used) == 12 * 2
    for t in used:
        assert t.recordings == 1, t.why_checked                  # no guard broke: nothing recorded afresh
        assert t.pure_replays >= t.replays - 1, t.why_checked    # one verifying call, the rest pure
