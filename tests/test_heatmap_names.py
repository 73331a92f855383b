"""dates-heatmaps names its pictures by architecture: the decoder-only model's one picture is
``<prefix>_decoder-only.png``, never the encoder-decoder's ``<prefix>_decoder-self.png``. So one
model never refuses over another's picture, and ``--force`` never replaces one model's picture
with another's under the same name."""
import os

import pytest

from transformer.models.config import DecoderOnlyConfig, ModelConfig
from transformer.training.trainer import TrainConfig
from transformer.training.dates import DateTrainer
from transformer.commands.heatmaps import main as heatmaps_main

TINY = dict(d_model=16, num_heads=2, d_ff=32)
ENCODER_DECODER = ["attention_cross.png", "attention_decoder-self.png", "attention_encoder-self.png"]


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    folder = tmp_path_factory.mktemp("models")
    paths = {}
    for name, config in (("encoder-decoder", ModelConfig(num_encoder_layers=1, num_decoder_layers=1, **TINY)),
                         ("decoder-only", DecoderOnlyConfig(num_layers=1, **TINY))):
        trainer = DateTrainer(config, TrainConfig(steps=1, batch_size=8), out_dir=str(folder / name))
        paths[name] = str(folder / f"{name}.npz")
        trainer.save(paths[name])
    return paths


def heatmaps(checkpoint, folder, *extra):
    return heatmaps_main(["--checkpoint", checkpoint, "--out-dir", str(folder), "--date", "1845-01-05", *extra])


@pytest.mark.parametrize("first, second", [("encoder-decoder", "decoder-only"), ("decoder-only", "encoder-decoder")])
def test_two_architectures_share_a_folder_without_refusing_or_mixing(checkpoints, first, second, tmp_path, capsys):
    assert heatmaps(checkpoints[first], tmp_path) == 0
    before = {name: (tmp_path / name).read_bytes() for name in os.listdir(tmp_path)}
    assert heatmaps(checkpoints[second], tmp_path) == 0, capsys.readouterr().err
    assert sorted(os.listdir(tmp_path)) == sorted(ENCODER_DECODER + ["attention_decoder-only.png"])
    for name, data in before.items():              # the first model's pictures are as it drew them
        assert (tmp_path / name).read_bytes() == data


def test_the_decoder_only_picture_still_needs_force_over_its_own(checkpoints, tmp_path, capsys):
    assert heatmaps(checkpoints["decoder-only"], tmp_path) == 0
    capsys.readouterr()
    assert heatmaps(checkpoints["decoder-only"], tmp_path) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "attention_decoder-only.png" in err and "--force" in err, err
    assert heatmaps(checkpoints["decoder-only"], tmp_path, "--force") == 0
