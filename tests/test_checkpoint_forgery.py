"""Forged checkpoints: files that look like a checkpoint but would load wrong, eat memory or
train to NaN. Each one is one CheckpointError naming the file (one line, exit 2 in every
tool), and a resumed run never replaces a good checkpoint with weights that are not finite.
"""
import io
import os
import zipfile

import numpy as np
import pytest

from transformer.files import checkpoint as checkpoint_module
from transformer.commands import dates as cli
from transformer.files.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from transformer.files.npz_archive import NpzArchive
from transformer.models.config import ModelConfig
from transformer.training.trainer import TrainConfig
from transformer.training.dates import DateTrainer
from transformer.files.trained_model import load_model

TINY = dict(d_model=16, num_heads=2, num_encoder_layers=1, num_decoder_layers=1, d_ff=32)
WEIGHT = "encoder.layers.0.self_attn.w_o.weight"


@pytest.fixture(scope="module")
def good(tmp_path_factory):
    folder = tmp_path_factory.mktemp("good")
    trainer = DateTrainer(ModelConfig(**TINY), TrainConfig(steps=4, batch_size=8, eval_every=0), out_dir=str(folder))
    trainer.train_step()
    trainer.train_step()
    path = str(folder / "model.npz")
    trainer.save(path)
    return path


def rewrite(good, path, edit):
    model_state, optimizer_state, meta = load_checkpoint(good)
    scalars = {k: optimizer_state.pop(k) for k in list(optimizer_state) if not isinstance(optimizer_state[k], np.ndarray)}
    edit(model_state, optimizer_state, scalars, meta)
    optimizer_state.update(scalars)
    save_checkpoint(path, model_state, optimizer_state, meta)
    return str(path)


def copy_zip(good, path, change):
    """Copy ``good`` member by member; ``change(archive, item, data)`` writes what it wants instead."""
    with zipfile.ZipFile(good) as src, zipfile.ZipFile(path, "w") as dst:
        for item in src.infolist():
            change(dst, item, src.read(item))
    return str(path)


def duplicated_member(good, path):
    """A second copy of one weight, with other values: zipfile would hand back the last one."""
    def change(dst, item, data):
        dst.writestr(item, data)
        if item.filename == f"model/{WEIGHT}.npy":
            buffer = io.BytesIO()
            np.save(buffer, np.full((16, 16), 0.5, dtype=np.float32))
            with pytest.warns(UserWarning, match="Duplicate name"):
                dst.writestr(item, buffer.getvalue())
    return copy_zip(good, path, change)


def deflated_member(good, path):
    def change(dst, item, data):
        dst.writestr(item.filename, data, compress_type=zipfile.ZIP_DEFLATED)
    return copy_zip(good, path, change)


def member_larger_than_the_file(good, path):
    """The central directory claims a 2 GB member."""
    copy_zip(good, path, lambda dst, item, data: dst.writestr(item, data))
    raw = bytearray(open(path, "rb").read())
    name = f"model/{WEIGHT}.npy".encode()
    entry = raw.index(b"PK\x01\x02")                   # central directory entries: name at +46
    while raw[entry + 46: entry + 46 + len(name)] != name:
        entry = raw.index(b"PK\x01\x02", entry + 4)
    raw[entry + 24: entry + 28] = (2 ** 31).to_bytes(4, "little")
    open(path, "wb").write(bytes(raw))
    return str(path)


def meta_bytes(good, path, text):
    def change(dst, item, data):
        if item.filename == "meta.json.npy":
            buffer = io.BytesIO()
            np.save(buffer, np.frombuffer(text.encode(), dtype=np.uint8))
            data = buffer.getvalue()
        dst.writestr(item, data)
    return copy_zip(good, path, change)


def stored_meta(good) -> str:
    with zipfile.ZipFile(good) as archive:
        return np.load(io.BytesIO(archive.read("meta.json.npy"))).tobytes().decode()


def on_meta(change):
    return lambda m, o, s, meta: change(meta)


def on_scalars(**values):
    return lambda m, o, s, meta: s.update(values)


def on_buffer(key, make):
    return lambda m, o, s, meta: o.update({key: make(o[key])})


FORGED = {
    "float64_beyond_float32": (lambda g, p: rewrite(g, p, lambda m, o, s, meta: m.update(
        {WEIGHT: m[WEIGHT].astype(np.float64) * 1e300})), "beyond float32's range"),
    "duplicated_member": (duplicated_member, "appears twice"),
    "deflated_member": (deflated_member, "is compressed"),
    "member_larger_than_the_file": (member_larger_than_the_file, "more than the whole file"),
    "deeply_nested_meta": (lambda g, p: meta_bytes(g, p, "[" * 200_000), "nested 200000 levels deep"),
    "version_as_a_string": (lambda g, p: meta_bytes(g, p, stored_meta(g).replace('"format_version": 1',
                                                                                  '"format_version": "1"')),
                            "format version '1' (a JSON string, not the number 1)"),
    "betas_5_5": (lambda g, p: rewrite(g, p, on_scalars(betas=[5, 5])), "optimizer betas is [5, 5]"),
    "eps_negative": (lambda g, p: rewrite(g, p, on_scalars(eps=-1.0)), "optimizer eps is -1.0"),
    "weight_decay_nan": (lambda g, p: rewrite(g, p, on_scalars(weight_decay=float("nan"))),
                         "optimizer weight_decay is nan"),
    "step_count_negative": (lambda g, p: rewrite(g, p, on_scalars(step_count=-1)), "step_count is -1"),
    "step_count_float": (lambda g, p: rewrite(g, p, on_scalars(step_count=2.5)), "step_count is 2.5"),
    "moment_wrong_shape": (lambda g, p: rewrite(g, p, on_buffer("m.0", lambda b: b.reshape(-1)[:5])),
                           "optim/m.0 has shape (5,)"),
    "second_moment_negative": (lambda g, p: rewrite(g, p, on_buffer("v.3", lambda b: b - 1.0)),
                               "second moment, holds negative values"),
    "moment_beyond_float32": (lambda g, p: rewrite(g, p, on_buffer("m.2", lambda b: b.astype(np.float64) + 1e300)),
                              "optim/m.2 holds"),
    "moment_of_no_parameter": (lambda g, p: rewrite(g, p, lambda m, o, s, meta: o.update({"m.999": o.pop("m.0")})),
                               "optim/m.999 is not a moment buffer"),
    "more_moments_than_weights": (lambda g, p: rewrite(g, p, lambda m, o, s, meta: o.update({"m.0": np.zeros(10 ** 6)})),
                                  "more than two per weight"),
    "last_step_infinite": (lambda g, p: rewrite(g, p, on_meta(lambda meta: meta["schedule"].update(
        last_step=float("inf")))), "schedule.last_step is inf"),
    "last_eval_step_infinite": (lambda g, p: rewrite(g, p, on_meta(lambda meta: meta["stopper"].update(
        last_eval_step=float("inf")))), "stopper.last_eval_step is inf"),
    "rng_state_out_of_range": (lambda g, p: rewrite(g, p, on_meta(lambda meta: meta["data_rng"]["state"].update(
        state=2 ** 200))), "data_rng is not a valid PCG64"),
    "rng_state_negative": (lambda g, p: rewrite(g, p, on_meta(lambda meta: meta["minigrad_rng"]["state"].update(
        inc=-1))), "minigrad_rng is not a valid PCG64"),
    "step_string": (lambda g, p: rewrite(g, p, on_meta(lambda meta: meta.update(step="2"))), "step is '2'"),
}


@pytest.fixture(params=sorted(FORGED))
def forged(request, good, tmp_path):
    make, message = FORGED[request.param]
    return make(good, tmp_path / "model.npz"), message


def test_every_forgery_is_one_checkpoint_error(forged):
    path, message = forged
    for load in (load_checkpoint, load_model, DateTrainer.resume):
        with pytest.raises(CheckpointError) as info:
            load(path)
        assert message in str(info.value) and path in str(info.value), str(info.value)
        assert "\n" not in str(info.value)


@pytest.mark.parametrize("tool", ["translate", "evaluate", "train"])
def test_every_forgery_is_one_line_and_exit_2_in_every_tool(forged, tool, capsys):
    path, message = forged
    before = open(path, "rb").read()
    main, argv = {"translate": (cli.translate_main, ["1996-09-08", "--checkpoint", path]),
                  "evaluate": (cli.evaluate_main, ["--checkpoint", path]),
                  "train": (cli.train_main, ["--resume", path, "--no-progress"])}[tool]
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == 2 and err.startswith("error: ") and err.count("\n") == 1, err
    assert message in err and "Traceback" not in err
    assert open(path, "rb").read() == before            # resumed in place: the file is not replaced


def test_meta_json_larger_than_the_limit_is_refused_before_reading(good, tmp_path, monkeypatch):
    monkeypatch.setattr(checkpoint_module, "MAX_META_BYTES", 100)
    with pytest.raises(CheckpointError, match=r"meta.json is \d+ bytes, more than the limit of 100"):
        load_checkpoint(good)


def test_brackets_inside_strings_do_not_count_as_nesting(good, tmp_path):
    path = rewrite(good, tmp_path / "model.npz", on_meta(lambda meta: meta["history"].append({"note": "[" * 100})))
    assert load_checkpoint(path)[2]["history"][-1]["note"] == "[" * 100


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning",
                            "ignore:invalid value encountered:RuntimeWarning")
def test_a_forged_resume_that_diverges_never_replaces_the_checkpoint(good, tmp_path, capsys):
    """Finite but absurd moments (m = 1e30, v = 0) pass every check and blow the weights up on
    the first step: the run stops at its save with one line, and the file stays as it was."""
    def blow_up(m, o, s, meta):
        for key in o:
            o[key] = np.full_like(o[key], 1e30 if key.startswith("m.") else 0.0)
    path = rewrite(good, tmp_path / "model.npz", blow_up)
    before = open(path, "rb").read()
    code = cli.train_main(["--resume", path, "--no-progress"])
    out, err = capsys.readouterr()
    assert code == 2 and err.count("\n") == 1 and "training diverged" in err, err
    assert "keeps the last good checkpoint" in err and path in err
    assert open(path, "rb").read() == before
    assert not [name for name in os.listdir(tmp_path) if name.startswith(".tmp-")]


def test_a_good_checkpoint_still_loads_and_resumes(good):
    trainer = DateTrainer.resume(good)
    assert trainer.step == 2 and trainer.optimizer.step_count == 2


def test_weights_beyond_what_the_config_describes_are_refused_before_any_is_read(good, tmp_path, monkeypatch):
    """A stored (uncompressed) member can be as large as the file: its header is compared with
    the config's parameter count first, so no weight is read (before: 2 GB read, then refused)."""
    path = rewrite(good, tmp_path / "model.npz", lambda m, o, s, meta: m.update({"output.bias": np.zeros(10 ** 6,
                                                                                                     np.float32)}))
    read = []
    real = NpzArchive._read_one
    monkeypatch.setattr(NpzArchive, "_read_one", lambda npz, member: read.append(member.filename)
                        or real(npz, member))
    with pytest.raises(CheckpointError, match="does not fit the model it describes"):
        load_checkpoint(path)
    assert read == ["meta.json.npy"]
