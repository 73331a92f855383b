"""Checkpoints written before the models were rewritten still load, compute what they computed
then, and export.

tests/data holds two tiny checkpoints written by the dates-train of that time
(``--max-steps 2 --d-model 8 --heads 2 --layers 1 --d-ff 8``: an encoder-decoder, and a
decoder-only one with learned positions) and the logits those models gave on three held-out
dates (``main-logits.npz``, computed by the code of that time on ``sample_batch`` of seed 0).
"""
from pathlib import Path

import numpy as np
import pytest

from minigrad import no_grad
from transformer.commands.export import main as export_main
from transformer.files.checkpoint import load_checkpoint
from transformer.files.trained_model import load_model
from transformer.tasks.dates import DateDataset, join_for_decoder_only

DATA = Path(__file__).parent / "data"
OLD = {"encoder-decoder": DATA / "main-encoder-decoder.npz", "decoder-only": DATA / "main-decoder-only.npz"}


def old_logits(architecture):
    return np.load(DATA / "main-logits.npz")["ed" if architecture == "encoder-decoder" else "do"]


def held_out_logits(model):
    src, tgt = DateDataset().sample_batch(np.random.default_rng(0), 3)
    with no_grad():
        if model.config.architecture == "encoder-decoder":
            return model(src, tgt[:, :-1]).data
        return model(join_for_decoder_only(src, tgt)[:, :-1]).data


@pytest.mark.parametrize("architecture", sorted(OLD))
def test_an_old_checkpoint_loads_every_weight_under_its_old_name(architecture):
    stored, _, _ = load_checkpoint(OLD[architecture])
    model = load_model(OLD[architecture])
    assert model.config.architecture == architecture
    state = model.state_dict()
    assert list(state) == list(stored)          # the same names, in the same order (Adam's buffers follow it)
    for name, value in stored.items():
        assert np.array_equal(state[name], value), name


@pytest.mark.parametrize("architecture", sorted(OLD))
def test_an_old_checkpoint_computes_the_same_logits(architecture):
    # Bit for bit on the machine and numpy that recorded them (a 2-vCPU Xeon with AVX-512, numpy 2.4);
    # another BLAS or vector width rounds float32 sums in another order, so elsewhere: to its rounding.
    np.testing.assert_allclose(held_out_logits(load_model(OLD[architecture])), old_logits(architecture),
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("architecture", sorted(OLD))
def test_an_old_checkpoint_exports(architecture, tmp_path, capsys):
    out = tmp_path / "old.safetensors"
    assert export_main(["--checkpoint", str(OLD[architecture]), "--out", str(out)]) == 0
    assert out.stat().st_size > 0
    assert "PyTorch's names" in capsys.readouterr().out
