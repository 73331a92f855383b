"""Shared by the explorer's tests: small real training runs with their attention snapshots (the
files the trainers write, never hand-made ones), and an explorer server in a subprocess that is
killed however the test ends (``viz/served.py``, shared with examples/benchmark_explorer.py)."""

from transformer.models.config import ModelConfig
from transformer.training.next_word import NextWordTrainer, default_model_config, default_train_config
from transformer.training.dates import DateTrainer
from transformer.training.trainer import TrainConfig
from viz.served import command, served  # noqa: F401  (the tests' import)

TINY = dict(d_model=16, num_heads=2, d_ff=32)
TINY_TRAIN = dict(batch_size=8, lr=1e-2, warmup=1, schedule="constant", target_accuracy=0)


def next_word_run(folder, steps=12, every=4, seed=0) -> str:
    """A next-word run of ``steps`` steps recording snapshots every ``every``: its checkpoint's path."""
    trainer = NextWordTrainer(default_model_config(num_layers=2, **TINY),
                              default_train_config(steps=steps, snapshot_every=every, seed=seed, **TINY_TRAIN),
                              out_dir=str(folder))
    trainer.run(progress=False)
    return str(folder / "model.npz")


def dates_run(folder, steps=12, every=4, config=None) -> str:
    """A date run like ``next_word_run``'s; ``config``: another model (default: a tiny encoder-decoder)."""
    config = config or ModelConfig(num_encoder_layers=1, num_decoder_layers=1, **TINY)
    trainer = DateTrainer(config, TrainConfig(steps=steps, snapshot_every=every, **TINY_TRAIN), out_dir=str(folder))
    trainer.run(progress=False)
    return str(folder / "model.npz")
