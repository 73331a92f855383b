"""A decoder-only date checkpoint in the trainer and in every command that reads a date model.

The checkpoint is a tiny decoder-only model trained for a few steps: accuracy does not matter
here, only that each command accepts it, and that asking for an attention kind it lacks is one
line and exit 2. Training it to the target is the slow test at the end.
"""
import io
import json
import os
import zipfile

import numpy as np
import pytest

from transformer.commands import dates as cli
from transformer.files.checkpoint import CheckpointError, load_checkpoint
from transformer.models.config import DecoderOnlyConfig, ModelConfig
from transformer.tasks.dates import SRC_LEN, encode_batch
from transformer.models.decoder_only import DecoderOnlyTransformer
from transformer.decoding import beam_search, greedy_decode, sample_decode
from transformer.commands.export import main as export_main
from transformer.training.trainer import TrainConfig
from transformer.training.dates import DateTrainer
from transformer.files.trained_model import load_model
from transformer.commands.attention_graph import main as attention_graph_main
from transformer.commands.explore import dates_main as explore_main
from transformer.commands.heatmaps import main as heatmaps_main
from transformer.commands.explain import main as explain_main

TINY = DecoderOnlyConfig(d_model=16, num_heads=2, num_layers=1, d_ff=32)
TINY_ARGS = ["--architecture", "decoder-only", "--d-model", "16", "--heads", "2", "--layers", "1", "--d-ff", "32",
             "--batch-size", "8", "--eval-every", "0", "--no-progress"]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    folder = tmp_path_factory.mktemp("decoder-only-run")
    trainer = DateTrainer(TINY, TrainConfig(steps=3, batch_size=8, eval_every=0, checkpoint_every=0),
                      out_dir=str(folder))
    for _ in range(3):
        trainer.train_step()
    path = folder / "model.npz"
    trainer.save(str(path))
    return str(path)


def run(main, argv, capsys):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def one_line_error(code, err, *fragments):
    assert code == 2 and err.startswith("error: ") and err.count("\n") == 1, err
    for fragment in fragments:
        assert fragment in err, err


# --------------------------------------------------------------- checkpoints
def test_the_checkpoint_records_its_architecture_and_round_trips(checkpoint):
    _, _, meta = load_checkpoint(checkpoint)
    assert meta["model_config"]["architecture"] == "decoder-only"
    model = load_model(checkpoint)
    assert isinstance(model, DecoderOnlyTransformer) and model.config == TINY
    resumed = DateTrainer.resume(checkpoint)
    assert isinstance(resumed.model, DecoderOnlyTransformer) and resumed.step == 3
    for name, value in model.state_dict().items():
        assert np.array_equal(value, resumed.model.state_dict()[name])


def rewrite_meta(source, target, change):
    """Copy the checkpoint with its meta.json changed by ``change(meta)``."""
    with zipfile.ZipFile(source) as archive:
        members = {info.filename: archive.read(info) for info in archive.infolist()}
    meta_bytes = members["meta.json.npy"]
    with np.load(source) as arrays:
        meta = json.loads(arrays["meta.json"].tobytes())
    change(meta)
    buffer = io.BytesIO()
    np.save(buffer, np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8))
    members["meta.json.npy"] = buffer.getvalue()
    assert members["meta.json.npy"] != meta_bytes
    with zipfile.ZipFile(target, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)


@pytest.mark.parametrize("change, fragment", [
    (lambda meta: meta["model_config"].update(architecture="gpt"), "architecture must be one of"),
    (lambda meta: meta["model_config"].update(num_layers=2), "its config means"),
    (lambda meta: meta["model_config"].pop("architecture"), "unknown model config keys: num_layers, task"),
    (lambda meta: meta["model_config"].update(vocab_size=69), "vocab_size must be 68"),
])
def test_a_corrupt_decoder_only_checkpoint_is_refused_in_one_line(checkpoint, tmp_path, capsys, change, fragment):
    bad = str(tmp_path / "bad.npz")
    rewrite_meta(checkpoint, bad, change)
    with pytest.raises(CheckpointError, match=fragment.replace("(", r"\(")):
        load_model(bad)
    code, _, err = run(cli.translate_main, ["1996-09-08", "--checkpoint", bad], capsys)
    one_line_error(code, err, fragment)


def test_truncated_checkpoint_is_refused(checkpoint, tmp_path):
    bad = tmp_path / "truncated.npz"
    bad.write_bytes(open(checkpoint, "rb").read()[:2000])
    with pytest.raises(CheckpointError, match="corrupt"):
        load_model(str(bad))


# ---------------------------------------------------------------- decoding
def test_greedy_cached_equals_uncached_and_beam_one_is_greedy(checkpoint):
    model = load_model(checkpoint)
    src = encode_batch(["1845-01-05", "1996-09-08", "2999-12-31"], SRC_LEN)
    greedy = greedy_decode(model, src)
    assert np.array_equal(greedy, greedy_decode(model, src, use_cache=False))
    assert np.array_equal(beam_search(model, src, beam_size=1), greedy)
    assert np.array_equal(sample_decode(model, src, temperature=0), greedy)
    assert beam_search(model, src, beam_size=3).shape == greedy.shape


# ---------------------------------------------------------------- commands
def test_train_a_decoder_only_run_then_resume(tmp_path, capsys):
    out_dir = str(tmp_path / "run")
    code, out, err = run(cli.train_main, ["--out", out_dir, "--steps", "2", *TINY_ARGS], capsys)
    assert code == 0, err
    assert "model: decoder-only" in out and "1 causal layers" in out and "steps 2" in out
    checkpoint = os.path.join(out_dir, "model.npz")
    code, out, err = run(cli.train_main, ["--resume", checkpoint, "--steps", "3", "--out", out_dir,
                                          "--no-progress"], capsys)
    assert code == 0, err
    assert "model: decoder-only" in out and "at step 2 (at most 3)" in out


def test_translate_and_evaluate_accept_it(checkpoint, capsys):
    code, out, err = run(cli.translate_main, ["1996-09-08", "--checkpoint", checkpoint, "--beam", "2"], capsys)
    assert code == 0 and out.startswith("1996-09-08 -> "), err
    code, out, err = run(cli.evaluate_main, ["--checkpoint", checkpoint, "--json"], capsys)
    assert code == 0, err
    assert json.loads(out)["count"] == 2000


def test_export_accepts_it(checkpoint, tmp_path, capsys):
    code, out, err = run(export_main, ["--checkpoint", checkpoint, "--out", str(tmp_path / "w.safetensors")], capsys)
    assert code == 0 and "parameters under PyTorch's names" in out, err


def test_heatmaps_draw_its_one_kind(checkpoint, tmp_path, capsys):
    code, out, err = run(heatmaps_main, ["--checkpoint", checkpoint, "--out-dir", str(tmp_path)], capsys)
    assert code == 0, err
    assert sorted(os.listdir(tmp_path)) == ["attention_decoder-only.png"]


def test_attention_graph_defaults_to_its_kind_and_refuses_the_others(checkpoint, tmp_path, capsys):
    code, out, err = run(attention_graph_main, ["--checkpoint", checkpoint, "--out", str(tmp_path / "g")], capsys)
    assert code in (0, 3) and "g.dot" in out, err        # 3: written but not rendered (no Graphviz)
    dot = (tmp_path / "g.dot").read_text()
    assert "decoder.layers.0.self_attn" in dot and "causal" in dot
    for kind in ("encoder-self", "cross"):
        code, _, err = run(attention_graph_main, ["--checkpoint", checkpoint, "--kind", kind,
                                                  "--out", str(tmp_path / kind)], capsys)
        one_line_error(code, err, "decoder-only model", f"no {kind} attention")


@pytest.mark.parametrize("main, out, written", [(attention_graph_main, "g", ["g.dot"]),     # and g.svg with dot
                                                (explore_main, "e.html", ["e.html"])])
def test_a_kind_it_lacks_is_reported_before_an_existing_output(checkpoint, tmp_path, capsys, main, out, written):
    """The output is there from an earlier run: the real problem (no cross attention) is what is said."""
    argv = ["--checkpoint", checkpoint, "--out", str(tmp_path / out)]
    code, _, err = run(main, argv, capsys)
    assert code in (0, 3) and all((tmp_path / name).exists() for name in written), err
    code, _, err = run(main, argv + ["--kind", "cross"], capsys)
    one_line_error(code, err, "decoder-only model", "no cross attention")


def test_explore_accepts_it_and_refuses_the_kinds_it_lacks(checkpoint, tmp_path, capsys):
    page = tmp_path / "explorer.html"
    code, out, err = run(explore_main, ["--checkpoint", checkpoint, "--out", str(page)], capsys)
    assert code == 0, err
    text = page.read_text()
    assert '"kind":"decoder-self"' in text and '"encoder-self"' not in text
    code, _, err = run(explore_main, ["--checkpoint", checkpoint, "--kind", "cross", "--out",
                                      str(tmp_path / "cross.html")], capsys)
    one_line_error(code, err, "no cross attention")


def test_explain_says_it_walks_through_the_encoder_decoder(checkpoint, capsys):
    code, _, err = run(explain_main, ["--checkpoint", checkpoint], capsys)
    one_line_error(code, err, "decoder-only model")


def test_an_encoder_decoder_config_still_builds_the_encoder_decoder():
    from transformer.models.encoder_decoder import Transformer
    from transformer.models import build_model
    assert isinstance(build_model(ModelConfig(d_model=16, num_heads=2)), Transformer)
    assert isinstance(build_model(TINY), DecoderOnlyTransformer)


@pytest.mark.slow
def test_decoder_only_dates_train_reaches_the_target(tmp_path, capsys):
    """The default decoder-only model, trained by the command: 99.9% held-out, confirmed."""
    code, out, err = run(cli.train_main, ["--architecture", "decoder-only", "--out", str(tmp_path / "run"),
                                          "--no-progress"], capsys)
    assert code == 0, err
    assert "target 99.90% reached" in out and "(confirmed;" in out
