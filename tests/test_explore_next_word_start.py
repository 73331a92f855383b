"""next-word-explore's start: the ladder's rungs trained once and kept beside the run (read back
as distrustfully as a checkpoint, and giving the same page), a taken port refused before any
training, and no run at all drawn as an untrained model, as dates-explore draws one."""
import json
import os
import pathlib
import re
import shutil
import socket

import numpy as np
import pytest

import viz.explorer.ladder_rungs as ladder_module
from explore_runs import next_word_run
from transformer.files.checkpoint import write_npz_atomically
from transformer.files.rungs_file import save_rungs
from transformer.commands.explore import dates_main, next_word_main
from viz.explorer.next_word import default_sentence
from viz.explorer.ladder_rungs import RUNGS_FILE, ladder_data, ladder_rungs, train_rungs, training_settings

STEPS = 2           # the fewest Adam steps that still move every rung: enough to tell them apart


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A tiny next-word run's folder (its model.npz and attention snapshots)."""
    folder = tmp_path_factory.mktemp("run") / "next-word"
    next_word_run(folder, steps=2, every=1)
    return folder


@pytest.fixture(scope="module")
def trained():
    """The rungs trained ``STEPS`` steps each, as a first start trains them."""
    return train_rungs(STEPS)


@pytest.fixture
def no_training(monkeypatch):
    """Fails the test if the rungs are trained."""
    def refuse(*args, **kwargs):
        raise AssertionError("the rungs were trained")
    monkeypatch.setattr(ladder_module, "train_rungs", refuse)


def copy_run(run, folder) -> str:
    shutil.copytree(run, folder)
    return str(folder / "model.npz")


def page_data(path) -> dict:
    text = open(path, encoding="utf-8").read()
    found = re.search(r'<script type="application/json" id="explorer-data">(.*?)</script>', text, re.S)
    return json.loads(found.group(1).replace("<\\/", "</"))


def same_weights(rungs, others):
    assert [rung for rung, _ in rungs] == [rung for rung, _ in others]
    for (rung, model), (_, other) in zip(rungs, others):
        mine, theirs = model.state_dict(), other.state_dict()
        assert list(mine) == list(theirs), rung.name
        for name in mine:
            assert mine[name].dtype == theirs[name].dtype and np.array_equal(mine[name], theirs[name]), \
                f"{rung.name}: {name}"


# ------------------------------------------------------------------ trained once, kept, reused
@pytest.mark.slow
def test_the_second_start_reuses_the_rungs_kept_beside_the_run(run, tmp_path, capsys, monkeypatch):
    checkpoint = copy_run(run, tmp_path / "run")
    kept = tmp_path / "run" / RUNGS_FILE
    argv = ["--checkpoint", checkpoint, "--ladder-steps", str(STEPS), "--no-check"]
    assert next_word_main([*argv, "--out", str(tmp_path / "first.html")]) == 0
    err = capsys.readouterr().err
    assert "trained the ladder's 10 rungs in" in err and f"kept in {kept}" in err and kept.is_file()

    monkeypatch.setattr(ladder_module, "train_rungs", lambda *a, **k: pytest.fail("trained again"))
    assert next_word_main([*argv, "--out", str(tmp_path / "second.html")]) == 0
    err = capsys.readouterr().err
    assert f"ladder rungs: reused from {kept} (trained {STEPS} steps each on" in err and "training" not in err
    first, second = page_data(tmp_path / "first.html"), page_data(tmp_path / "second.html")
    assert second["ladder"] == first["ladder"] and second == first


@pytest.mark.slow
def test_rungs_read_back_are_bit_identical_to_freshly_trained_ones(trained, tmp_path):
    kept = ladder_rungs(STEPS, str(tmp_path), say=lambda line: None)
    same_weights(kept, trained)                       # trained here and kept
    read = ladder_rungs(STEPS, str(tmp_path), say=lambda line: None)
    same_weights(read, trained)                       # read back
    words = default_sentence().split()
    assert ladder_data(read, words, STEPS) == ladder_data(trained, words, STEPS)


# ------------------------------------------------------------------ a file we cannot use
def valid_arrays(trained) -> dict:
    """The arrays ``save_rungs`` writes, to forge from."""
    arrays = {f"rung{i}/{name}": value for i, (_, model) in enumerate(trained)
              for name, value in model.state_dict().items()}
    meta = {"format_version": 1, "settings": training_settings(STEPS, 0),
            "trained": {"seconds": 1.0, "date": "2026-11-28"}}
    return arrays, meta


def with_meta(arrays, meta) -> dict:
    return {**arrays, "meta.json": np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)}


def forged(change):
    """A corruption of the file: ``change(arrays, meta)`` -> the arrays to write."""
    return lambda path, trained: write_npz_atomically(path, change(*valid_arrays(trained)))


def settings_changed(**changes):
    return forged(lambda arrays, meta: with_meta(arrays, {**meta, "settings": {**meta["settings"], **changes}}))


def weight_changed(value):
    def change(arrays, meta):
        return with_meta({**arrays, "rung0/bias": value(arrays["rung0/bias"])}, meta)
    return forged(change)


def truncated(path, trained):
    save_rungs(path, [model for _, model in trained], training_settings(STEPS, 0), 1.0)
    data = open(path, "rb").read()
    with open(path, "wb") as file:
        file.write(data[:len(data) // 2])


CORRUPTIONS = {
    "truncated": (truncated, "unreadable"),
    "not an archive": (lambda path, _: pathlib.Path(path).write_text("not rungs"), "unreadable: not a .npz archive"),
    "a FIFO": (lambda path, _: os.mkfifo(path), "unreadable: not a regular file"),
    "a link to /dev/zero": (lambda path, _: os.symlink("/dev/zero", path), "unreadable: not a regular file"),
    "other steps": (settings_changed(steps=STEPS + 1), f"trained with steps {STEPS + 1}, not {STEPS}"),
    "another seed": (settings_changed(seed=1), "trained with seed 1, not 0"),
    "another language": (settings_changed(vocabulary=["a", "b"]), "trained with vocabulary"),
    "older training code": (settings_changed(code="0123456789abcdef"), "trained with code \"0123456789abcdef\""),
    "another format": (forged(lambda arrays, meta: with_meta(arrays, {**meta, "format_version": 2})),
                       "written in format 2"),
    "meta.json not JSON": (forged(lambda arrays, meta: {**arrays, "meta.json": np.frombuffer(b"{", np.uint8)}),
                           "unreadable"),
    "a weight missing": (forged(lambda arrays, meta: with_meta({k: v for k, v in arrays.items()
                                                               if k != "rung3/w_v.weight"}, meta)),
                         "members differ: rung3/w_v.weight"),
    "a weight of another shape": (weight_changed(lambda bias: np.zeros(len(bias) + 1, np.float32)),
                                  "rung0/bias is float32"),
    "a weight in float64": (weight_changed(lambda bias: bias.astype(np.float64)), "rung0/bias is float64"),
    "a NaN weight": (weight_changed(lambda bias: np.full_like(bias, np.nan)),
                     "rung0/bias holds values that are not finite"),
    "a pickled weight": (weight_changed(lambda bias: np.array([None] * len(bias), dtype=object)), "pickled"),
    "compressed": (lambda path, trained: write_npz_atomically(path, with_meta(*valid_arrays(trained)),
                                                               compressed=True), "is compressed"),
}


@pytest.mark.slow
@pytest.mark.parametrize("corruption", list(CORRUPTIONS))
def test_a_file_it_cannot_use_is_ignored_with_one_note_and_replaced(trained, tmp_path, monkeypatch, corruption):
    make, reason = CORRUPTIONS[corruption]
    path = str(tmp_path / RUNGS_FILE)
    make(path, trained)
    calls = []
    monkeypatch.setattr(ladder_module, "train_rungs", lambda *args, **kwargs: calls.append(args) or trained)
    said = []
    rungs = ladder_rungs(STEPS, str(tmp_path), say=said.append)
    notes = [line for line in said if line.startswith("note:")]
    assert len(notes) == 1 and notes[0].startswith(f"note: ignoring {path} (") and reason in notes[0], said
    assert len(calls) == 1 and rungs is trained
    assert any(f"kept in {path}" in line for line in said), said
    same_weights(ladder_rungs(STEPS, str(tmp_path), say=said.append), trained)     # replaced by a good one


@pytest.mark.slow
def test_a_place_it_cannot_write_keeps_nothing_and_says_so(trained, tmp_path, monkeypatch):
    """A folder where the file belongs (as good as a read-only run folder, even for root)."""
    path = tmp_path / RUNGS_FILE
    (path / "something").mkdir(parents=True)
    monkeypatch.setattr(ladder_module, "train_rungs", lambda *args, **kwargs: trained)
    said = []
    assert ladder_rungs(STEPS, str(tmp_path), say=said.append) is trained
    assert said[0] == f"note: ignoring {path} (unreadable: a folder): training the rungs again"
    assert said[-1].startswith(f"note: could not keep the ladder's rungs in {path} (")
    assert said[-1].endswith("): the next start trains them again") and (path / "something").is_dir()


# ------------------------------------------------------------------ a taken port
@pytest.mark.slow
def test_a_taken_port_is_refused_before_anything_is_trained(run, tmp_path, capsys, no_training):
    with socket.socket() as other_server:
        other_server.bind(("127.0.0.1", 0))
        other_server.listen()
        port = other_server.getsockname()[1]
        code = next_word_main(["--checkpoint", str(run / "model.npz"), "--serve", "--port", str(port)])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert f"cannot serve on 127.0.0.1:{port}: the port is taken" in err and "--port 0" in err


# ------------------------------------------------------------------ no run yet
@pytest.mark.parametrize("command, default", [(dates_main, "runs/dates/model.npz"),
                                              (next_word_main, "runs/next-word/model.npz")])
def test_without_a_run_both_explorers_draw_an_untrained_model(command, default, tmp_path, capsys):
    """The working folder is empty: no run yet. Both say so in one line and in the title."""
    out = tmp_path / "page.html"
    extra = ["--ladder-steps", "0"] if command is next_word_main else []
    assert command(["--no-check", "--out", str(out), *extra]) == 0
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"note: no checkpoint at {default}: drawing an untrained model")
    assert "(untrained model)</title>" in out.read_text(encoding="utf-8")


def test_a_checkpoint_named_but_missing_is_refused(capsys):
    assert next_word_main(["--checkpoint", "nowhere/model.npz", "--ladder-steps", "0"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "checkpoint nowhere/model.npz does not exist" in err
