"""Damaged and forged attention snapshots files: read as distrustfully as a checkpoint.

Each forgery is one SnapshotError naming the file; ``dates-explore`` says it in one line and
exits 2; a resumed run says in one line that it does not continue them and trains on. A FIFO in
the file's place hangs neither; a small file that would inflate past the limit is refused before
any member is inflated; snapshots of another model (other heads, another probe) are refused
before a page is built from them.
"""
import io
import os
import subprocess
import sys
import zipfile

import numpy as np
import pytest

from viz.explorer.training_steps import snapshot_probe

from transformer.commands import dates as cli
from transformer.files import snapshots_file
from transformer.files.npz_archive import NpzArchive
from transformer.models.config import ModelConfig
from transformer.training.snapshots import SNAPSHOTS_NAME, SnapshotError, load_snapshots
from transformer.training.trainer import TrainConfig
from transformer.training.dates import DateTrainer
from transformer.commands.explore import dates_main as explore_main

EXPLORE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples", "explore.py")
TINY = ModelConfig(d_model=16, num_heads=2, num_encoder_layers=1, num_decoder_layers=1, d_ff=32)


def tiny_run(folder, steps=2):
    trainer = DateTrainer(TINY, TrainConfig(steps=steps, batch_size=8, schedule="constant", warmup=1, target_accuracy=0,
                                        snapshot_every=1), out_dir=str(folder))
    trainer.run(progress=False)
    return trainer


@pytest.fixture(scope="module")
def good(tmp_path_factory):
    """A run's folder with its checkpoint and snapshots (steps 0, 1, 2) and its model."""
    folder = tmp_path_factory.mktemp("good")
    return folder, tiny_run(folder).model


def arrays_of(path) -> dict:
    with np.load(path, allow_pickle=False) as archive:
        return {name: archive[name] for name in archive.files}


def rewritten(change):
    def forge(source, target):
        arrays = arrays_of(source)
        change(arrays)
        np.savez_compressed(target, **arrays)
    return forge


def truncated(source, target):
    target.write_bytes(source.read_bytes()[:len(source.read_bytes()) // 2])


def bytes_flipped(source, target):
    raw = bytearray(source.read_bytes())
    with zipfile.ZipFile(source) as archive:          # the middle of the largest member's deflated data
        member = max(archive.infolist(), key=lambda m: m.compress_size)
    middle = member.header_offset + 30 + len(member.filename) + member.compress_size // 2
    raw[middle:middle + 8] = bytes(b ^ 0xFF for b in raw[middle:middle + 8])
    target.write_bytes(bytes(raw))


def heads(count):
    return rewritten(lambda a: a.update({"weights.0": np.repeat(a["weights.0"][:, :, :1], count, axis=2)}))


FORGED = {
    "truncated": (truncated, "not a readable attention snapshots file"),
    "bytes_flipped": (bytes_flipped, "not a readable attention snapshots file"),
    "modules_0d": (rewritten(lambda a: a.update(modules=np.array("encoder.layers.0.self_attn"))),
                   "modules has shape ()"),
    "missing_key": (rewritten(lambda a: a.pop("keys.1")), "it has no 'keys.1'"),
    "extra_key": (rewritten(lambda a: a.update(extra=np.zeros(3))), "it holds 'extra', which"),
    "empty_probe": (rewritten(lambda a: a.update(probe=np.array([], dtype=str))), "probe has shape (0,)"),
    "loss_shorter_than_steps": (rewritten(lambda a: a.update(loss=a["loss"][:-1])), "loss has shape (2,)"),
    "one_head": (heads(1), "weights.0 has shape (3, 1, 1, 12, 12), this model's would be (3, 1, 2, 12, 12)"),
    "64_heads": (heads(64), "weights.0 has shape (3, 1, 64, 12, 12)"),
    "no_steps": (rewritten(lambda a: a.update({k: v[:0] for k, v in a.items() if k in ("steps", "loss", "accuracy")
                                               or k.startswith("weights.")})), "it holds no step"),
    "steps_decreasing": (rewritten(lambda a: a.update(steps=a["steps"][::-1].copy())), "not increasing"),
    "weights_nan": (rewritten(lambda a: a.update({"weights.1": np.full_like(a["weights.1"], np.nan)})),
                    "weights.1 holds values outside [0, 1] or NaN"),
    "weights_as_text": (rewritten(lambda a: a.update({"weights.0": a["weights.0"].astype(str)})),
                        "weights.0 holds <U"),
    "another_probe": (rewritten(lambda a: a.update(probe=np.array(["1999-12-31 -> December 31, 1999"]))),
                      "its probe is"),
    "another_models_modules": (rewritten(lambda a: a.update(modules=a["modules"][::-1].copy())),
                               "its modules are"),
    "pickled_object": (rewritten(lambda a: a.update(probe=np.array([{"x": 1}], dtype=object))), "pickled objects"),
}


def forge(good_folder, name, target):
    make, message = FORGED[name]
    make(good_folder / SNAPSHOTS_NAME, target)
    return message


@pytest.mark.parametrize("name", sorted(FORGED))
def test_every_forgery_is_one_snapshot_error(good, name, tmp_path):
    folder, model = good
    path = tmp_path / SNAPSHOTS_NAME
    message = forge(folder, name, path)
    with pytest.raises(SnapshotError) as info:
        load_snapshots(path, model, snapshot_probe(model))
    assert message in str(info.value) and str(path) in str(info.value), str(info.value)
    assert "\n" not in str(info.value)


def test_the_good_file_loads_and_fits_the_model(good):
    folder, model = good
    snapshots = load_snapshots(folder / SNAPSHOTS_NAME, model, snapshot_probe(model))
    assert snapshots["steps"].tolist() == [0, 1, 2]
    assert [w.shape for w in snapshots["weights"]][0] == (3, 1, 2, 12, 12)


def test_a_small_file_that_would_inflate_past_the_limit_is_refused_before_inflating(good, tmp_path, monkeypatch):
    """A forged file: weights.0 declares 64 MB of zeros, deflated to ~64 kB. With the limit at 16 MB it
    is refused from the sizes the archive declares, before any member is read."""
    folder, model = good
    arrays = arrays_of(folder / SNAPSHOTS_NAME)
    path = tmp_path / SNAPSHOTS_NAME
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, value in arrays.items():
            buffer = io.BytesIO()
            np.save(buffer, np.zeros((2 ** 25,), np.float16) if name == "weights.0" else value)
            archive.writestr(name + ".npy", buffer.getvalue())
    assert os.path.getsize(path) < 2 ** 20
    monkeypatch.setattr(snapshots_file, "MAX_SNAPSHOT_BYTES", 16 * 2 ** 20)
    read = []
    real = NpzArchive._read_one
    monkeypatch.setattr(NpzArchive, "_read_one", lambda npz, member: read.append(member.filename) or real(npz, member))
    with pytest.raises(SnapshotError, match="more than the limit of 16,777,216"):
        load_snapshots(path, model, snapshot_probe(model))
    assert read == []


def test_a_member_that_inflates_past_its_declared_size_is_cut_there(good, tmp_path):
    """The central directory says 1 kB, the deflated data holds 64 MB: zipfile stops at the
    declared size and the CRC check fails, so nothing larger is ever held."""
    folder, model = good
    arrays = arrays_of(folder / SNAPSHOTS_NAME)
    path = tmp_path / SNAPSHOTS_NAME
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, value in arrays.items():
            buffer = io.BytesIO()
            np.save(buffer, value if name != "weights.0" else np.zeros((2 ** 25,), np.float16))
            archive.writestr(name + ".npy", buffer.getvalue())
    raw = bytearray(path.read_bytes())
    entry = raw.index(b"PK\x01\x02")                   # the central directory: uncompressed size at +24
    while raw[entry + 46: entry + 46 + len(b"weights.0.npy")] != b"weights.0.npy":
        entry = raw.index(b"PK\x01\x02", entry + 4)
    raw[entry + 24: entry + 28] = (1024).to_bytes(4, "little")
    path.write_bytes(bytes(raw))
    with pytest.raises(SnapshotError, match="not a readable attention snapshots file"):
        load_snapshots(path, model, snapshot_probe(model))


def test_a_fifo_is_refused_without_opening_it(good, tmp_path):
    folder, model = good
    path = tmp_path / SNAPSHOTS_NAME
    os.mkfifo(path)
    with pytest.raises(SnapshotError, match="not a regular file"):
        load_snapshots(path, model, snapshot_probe(model))


# --------------------------------------------------------------- the commands
@pytest.fixture(scope="module")
def run_with(tmp_path_factory, good):
    """-> make(name): a copy of the good run's folder whose snapshots file is that forgery."""
    folder, _ = good

    def make(name):
        target = tmp_path_factory.mktemp(name)
        for file in ("model.npz", "train_log.jsonl"):
            (target / file).write_bytes((folder / file).read_bytes())
        if name == "fifo":
            os.mkfifo(target / SNAPSHOTS_NAME)
            return target, "not a regular file"
        return target, forge(folder, name, target / SNAPSHOTS_NAME)
    return make


@pytest.mark.parametrize("name", sorted(FORGED) + ["fifo"])
def test_dates_explore_says_it_in_one_line(run_with, name, capsys):
    folder, message = run_with(name)
    code = explore_main(["--checkpoint", str(folder / "model.npz"), "--out", str(folder / "page.html"),
                         "--no-check"])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: ") and err.count("\n") == 1, err
    assert message in err and "Traceback" not in err
    assert not (folder / "page.html").exists()


@pytest.mark.parametrize("name", ["truncated", "64_heads", "missing_key", "fifo", "another_probe"])
def test_a_resumed_run_says_it_in_one_line_and_trains_on(run_with, name, capsys):
    folder, message = run_with(name)
    code = cli.train_main(["--resume", str(folder / "model.npz"), "--max-steps", "3", "--no-progress"])
    err = capsys.readouterr().err
    notes = [line for line in err.splitlines() if "attention snapshots" in line]
    assert code == 0, err
    assert len(notes) == 1 and message in notes[0] and "records its own from step 2" in notes[0], err
    assert "Traceback" not in err
    resumed = DateTrainer.resume(str(folder / "model.npz"))
    assert load_snapshots(folder / SNAPSHOTS_NAME, resumed.model, snapshot_probe(resumed.model))["steps"].tolist() == [2, 3]


def test_dates_explore_on_a_fifo_ends_in_a_subprocess(run_with):
    """The same as a user runs it: the command ends (it used to block on the FIFO's open forever)."""
    folder, _ = run_with("fifo")
    process = subprocess.Popen([sys.executable, EXPLORE, "--checkpoint", str(folder / "model.npz"),
                                "--out", str(folder / "page.html"), "--no-check"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _, err = process.communicate(timeout=300)
    finally:
        process.kill()
        process.wait()
    assert process.returncode == 2 and "not a regular file" in err and err.count("\n") == 1, err
