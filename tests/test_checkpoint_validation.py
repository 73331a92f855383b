"""Every bad checkpoint is one CheckpointError naming the file, and in every tool one line
on stderr with exit code 2: a bad stored config (checked before any weight is allocated),
files that are not .npz archives (a .npy, a FIFO, a folder), members that are not real
.npy arrays or that declare more data than they hold, weights of the wrong dtype, NaN
weights and weights of the wrong shape.
"""
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

from transformer.commands import dates as cli
from transformer.files.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from transformer.models.config import ModelConfig
from transformer.training.trainer import TrainConfig
from transformer.training.dates import DateTrainer
from transformer.files.trained_model import load_model

REPO = Path(__file__).resolve().parents[1]
TINY = dict(d_model=16, num_heads=2, num_encoder_layers=1, num_decoder_layers=1, d_ff=32)


@pytest.fixture(scope="module")
def good(tmp_path_factory):
    folder = tmp_path_factory.mktemp("good")
    trainer = DateTrainer(ModelConfig(**TINY), TrainConfig(steps=4, batch_size=8), out_dir=str(folder))
    trainer.train_step()
    path = str(folder / "model.npz")
    trainer.save(path)
    return path


def rewrite(good, path, edit):
    """Load ``good``, let ``edit(model_state, optimizer_state, meta)`` change it, save to ``path``."""
    model_state, optimizer_state, meta = load_checkpoint(good)
    edit(model_state, optimizer_state, meta)
    save_checkpoint(path, model_state, optimizer_state, meta)
    return str(path)


def config_edit(**values):
    return lambda model, optim, meta: meta["model_config"].update(values)


def weight_edit(change):
    def edit(model, optim, meta):
        model["encoder.layers.0.self_attn.w_o.weight"] = change(model["encoder.layers.0.self_attn.w_o.weight"])
    return edit


def make_npy(good, path):
    np.save(path.with_suffix(".npy"), np.zeros(3))
    return str(path.with_suffix(".npy"))


def make_member_not_npy(good, path):
    with zipfile.ZipFile(good) as src, zipfile.ZipFile(path, "w") as dst:
        for item in src.infolist():
            data = src.read(item)
            if item.filename == "model/output.bias.npy":
                data = b"this is not an npy array at all"
            dst.writestr(item, data)
    return str(path)


def make_member_with_forged_header(good, path):
    """A header that claims a (2**40,) float64 array: must not be allocated."""
    header = {"descr": "<f8", "fortran_order": False, "shape": (2 ** 40,)}
    import io
    buffer = io.BytesIO()
    np.lib.format.write_array_header_1_0(buffer, header)
    with zipfile.ZipFile(good) as src, zipfile.ZipFile(path, "w") as dst:
        for item in src.infolist():
            data = src.read(item)
            if item.filename == "model/output.bias.npy":
                data = buffer.getvalue() + b"\0" * 64
            dst.writestr(item, data)
    return str(path)


def make_fifo(good, path):
    os.mkfifo(path)
    return str(path)


BAD = {
    "num_heads_0": (lambda g, p: rewrite(g, p, config_edit(num_heads=0)), "num_heads must be a positive integer"),
    "d_model_2_20": (lambda g, p: rewrite(g, p, config_edit(d_model=2 ** 20, num_heads=2)),
                     "does not fit the model it describes"),
    "max_len_5": (lambda g, p: rewrite(g, p, config_edit(max_len=5)), "max_len must be at least 20 "),
    "vocab_size": (lambda g, p: rewrite(g, p, config_edit(vocab_size=70)), "vocab_size must be 68"),
    "config_not_object": (lambda g, p: rewrite(g, p, lambda m, o, meta: meta.update(model_config=[1])),
                          "invalid model config"),
    "npy_file": (make_npy, "single .npy array"),
    "member_not_npy": (make_member_not_npy, "is not a real .npy array"),
    "forged_header": (make_member_with_forged_header, "declares 8796093022208 bytes"),
    "fifo": (make_fifo, "not a regular file"),
    "bool_weights": (lambda g, p: rewrite(g, p, weight_edit(lambda w: w > 0)), "dtype bool"),
    "int_weights": (lambda g, p: rewrite(g, p, weight_edit(lambda w: (w * 100).astype(np.int32))), "dtype int32"),
    "complex_weights": (lambda g, p: rewrite(g, p, weight_edit(lambda w: w.astype(np.complex64))), "complex64"),
    "nan_weights": (lambda g, p: rewrite(g, p, weight_edit(lambda w: np.where(w > 0.2, np.nan, w))),
                    "non-finite values"),
    "inf_adam_state": (lambda g, p: rewrite(g, p, lambda m, o, meta: o.update({"m.0": np.full_like(o["m.0"], np.inf)})),
                       "optim/m.0 holds"),
    "wrong_shape": (lambda g, p: rewrite(g, p, weight_edit(lambda w: w.T.reshape(8, 32))), "has shape"),
}


@pytest.fixture(params=sorted(BAD))
def bad(request, good, tmp_path):
    make, message = BAD[request.param]
    return make(good, tmp_path / "bad.npz"), message


def test_every_loader_raises_one_line_checkpoint_error(bad):
    path, message = bad
    loaders = [load_model, DateTrainer.resume]
    if "shape" not in message:                      # shapes are only known once a model is built
        loaders.append(load_checkpoint)
    for load in loaders:
        with pytest.raises(CheckpointError, match=message) as info:
            load(path)
        assert path in str(info.value) and "\n" not in str(info.value), load


@pytest.mark.parametrize("tool", ["evaluate", "translate", "train"])
def test_every_cli_fails_in_one_line(bad, tool, capsys, tmp_path):
    path, message = bad
    argv = {"evaluate": (cli.evaluate_main, ["--checkpoint", path]),
            "translate": (cli.translate_main, ["1996-09-08", "--checkpoint", path]),
            "train": (cli.train_main, ["--resume", path, "--out", str(tmp_path / "out"), "--no-progress"])}
    main, args = argv[tool]
    code = main(args)
    out, err = capsys.readouterr()
    assert code == 2, err
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    assert path in err and message.split("..")[0] in err


def test_viz_tools_report_a_bad_checkpoint_in_one_line(good, tmp_path, capsys):
    from transformer.commands import heatmaps
    path = rewrite(good, tmp_path / "bad.npz", config_edit(num_heads=0))
    code = heatmaps.main(["--date", "1845-01-05", "--checkpoint", path, "--out-dir", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "num_heads" in err and path in err


def test_a_fifo_does_not_hang_a_real_process(tmp_path):
    fifo = tmp_path / "model.npz"
    os.mkfifo(fifo)
    result = subprocess.run([sys.executable, str(REPO / "examples" / "evaluate_dates.py"), "--checkpoint", str(fifo)],
                            capture_output=True, text=True, timeout=120, cwd=REPO)
    assert result.returncode == 2 and "not a regular file" in result.stderr
    assert result.stderr.count("\n") == 1, result.stderr


def test_num_parameters_formula_matches_the_built_model():
    """The loader compares config.num_parameters() with the stored weights before building:
    the formula must follow the model."""
    from transformer.models.encoder_decoder import Transformer
    for values in (dict(), TINY, dict(TINY, positional="learned", num_decoder_layers=3, max_len=25)):
        config = ModelConfig(**values)
        assert config.num_parameters() == Transformer(config).num_parameters()


def test_checkpoint_file_mode_follows_the_umask(good, tmp_path):
    old = os.umask(0o022)
    try:
        trainer = DateTrainer.resume(good)
        path = tmp_path / "x" / "model.npz"
        trainer.save(str(path))
    finally:
        os.umask(old)
    assert (path.stat().st_mode & 0o777) == 0o644
    assert os.listdir(path.parent) == ["model.npz"]
    meta = json.loads(np.load(path)["meta.json"].tobytes())
    assert meta["step"] == 1
