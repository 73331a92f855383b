"""A checkpoint must fit the command that reads it, as its command line would have to.

- A resumed run's stored sizes meet the limits of the command line (``transformer/commands/limits.py``):
  a stored batch of 200,000 is refused in one line before a step, as ``--batch-size 200000`` is.
- A next-word checkpoint's vocabulary is the language's: a date model relabelled ``next-word``,
  or one of 300 words, is refused in one line by next-word-complete and next-word-train --resume.
"""
import numpy as np
import pytest

from transformer.commands import dates as cli
from transformer.commands import next_word as next_word_cli
from transformer.files.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from transformer.models.config import DecoderOnlyConfig, ModelConfig
from transformer.tasks import language
from transformer.training.next_word import NextWordTrainer, default_model_config, default_train_config
from transformer.training.trainer import TrainConfig
from transformer.training.dates import DateTrainer
from transformer.files.trained_model import load_model

TINY_TRAIN = dict(steps=4, batch_size=8, schedule="constant", warmup=1, target_accuracy=0)


def saved(trainer, path):
    trainer.train_step()
    trainer.save(str(path))
    return str(path)


def rewrite(path, edit):
    """The checkpoint with ``edit(meta)`` applied to its metadata (as a forger would)."""
    model_state, optimizer_state, meta = load_checkpoint(path)
    edit(meta)
    save_checkpoint(path, model_state, optimizer_state, meta)
    return path


def one_line_error(capsys, *needles):
    out, err = capsys.readouterr()
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    for needle in needles:
        assert needle in err, err
    return err


# ------------------------------------------------------------ sizes on resume
@pytest.mark.parametrize("command", ["dates-train", "next-word-train"])
def test_a_stored_batch_size_above_the_limit_is_refused_before_a_step(command, tmp_path, capsys):
    if command == "dates-train":
        trainer = DateTrainer(ModelConfig(d_model=16, num_heads=2, num_encoder_layers=1, num_decoder_layers=1, d_ff=32),
                          TrainConfig(**TINY_TRAIN), out_dir=str(tmp_path))
        main = cli.train_main
    else:
        trainer = NextWordTrainer(default_model_config(d_model=16, num_heads=2, num_layers=1, d_ff=32),
                                  default_train_config(**TINY_TRAIN), out_dir=str(tmp_path))
        main = next_word_cli.train_main
    path = rewrite(saved(trainer, tmp_path / "model.npz"), lambda meta: meta["train_config"].update(batch_size=200_000))
    before = open(path, "rb").read()
    code = main(["--resume", path, "--no-progress"])
    assert code == 2
    one_line_error(capsys, path, "batch_size 200,000", "16,384")
    assert open(path, "rb").read() == before
    with pytest.raises(SystemExit) as exit_info:                     # as on the command line
        main(["--batch-size", "200000", "--out", str(tmp_path / "new")])
    assert exit_info.value.code == 2 and "at most 16,384" in capsys.readouterr().err


def test_stored_sizes_whose_activations_pass_the_limit_are_refused(tmp_path, capsys):
    """Each size within its own limit, together more activation memory than a command line may ask."""
    config = ModelConfig(d_model=8, num_heads=2, num_encoder_layers=4, num_decoder_layers=4, d_ff=512)
    path = saved(DateTrainer(config, TrainConfig(**TINY_TRAIN), out_dir=str(tmp_path)), tmp_path / "model.npz")
    rewrite(path, lambda meta: meta["train_config"].update(batch_size=16_384))
    assert cli.train_main(["--resume", path, "--no-progress"]) == 2
    one_line_error(capsys, path, "a batch of 16384 would need", "more than the limit of 268,435,456")


# ------------------------------------------------------- next-word vocabulary
@pytest.fixture(scope="module")
def date_model_relabelled(tmp_path_factory):
    folder = tmp_path_factory.mktemp("relabelled")
    trainer = DateTrainer(DecoderOnlyConfig(d_model=16, num_heads=2, num_layers=1, d_ff=32), TrainConfig(**TINY_TRAIN),
                      out_dir=str(folder))
    return rewrite(saved(trainer, folder / "model.npz"), lambda meta: meta["model_config"].update(task="next-word"))


@pytest.fixture(scope="module")
def vocabulary_of_300(tmp_path_factory):
    folder = tmp_path_factory.mktemp("vocab300")
    trainer = NextWordTrainer(default_model_config(d_model=16, num_heads=2, num_layers=1, d_ff=32, vocab_size=300),
                              default_train_config(**TINY_TRAIN), out_dir=str(folder))
    return saved(trainer, folder / "model.npz")


@pytest.mark.parametrize("forged", ["date_model_relabelled", "vocabulary_of_300"])
def test_a_next_word_checkpoint_of_another_vocabulary_is_refused(forged, request, capsys):
    path = request.getfixturevalue(forged)
    size = 300 if forged == "vocabulary_of_300" else 68
    with pytest.raises(CheckpointError, match=f"vocabulary of {size} tokens"):
        load_model(path, task="next-word")
    assert next_word_cli.complete_main(["ann", "--checkpoint", path]) == 2
    one_line_error(capsys, path, f"vocabulary of {size} tokens", f"the language's {len(language.VOCAB)}")
    assert next_word_cli.complete_main(["ann is at the lake and bob is at the mill . bob is at the",
                                        "--checkpoint", path]) == 2
    one_line_error(capsys, path)
    assert next_word_cli.train_main(["--resume", path, "--no-progress"]) == 2
    one_line_error(capsys, path, f"vocabulary of {size} tokens")


def test_the_languages_own_checkpoint_still_loads(tmp_path):
    trainer = NextWordTrainer(default_model_config(d_model=16, num_heads=2, num_layers=1, d_ff=32),
                              default_train_config(**TINY_TRAIN), out_dir=str(tmp_path))
    model = load_model(saved(trainer, tmp_path / "model.npz"), task="next-word")
    assert model.config.vocab_size == len(language.VOCAB)
    assert np.isfinite(model.output.weight.data).all()
