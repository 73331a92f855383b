"""Running the README's first command twice: the second plain dates-train trains into the next free
folder and says so, an explicit --out holding a checkpoint still refuses, and the commands that read
"the trained model" by default use the newest finished run, naming it when there are several."""
import os
import time

import pytest

from transformer.commands import dates as cli
from transformer.commands.export import main as export_main
from transformer.files.run_dir import LOCK_NAME, default_checkpoint, next_free_run_folder
from transformer.commands.heatmaps import curves_main

TINY = ["--d-model", "16", "--heads", "2", "--layers", "1", "--d-ff", "32", "--batch-size", "8",
        "--schedule", "constant", "--warmup", "4", "--target-accuracy", "0", "--no-progress", "--max-steps", "2"]


def train(capsys, *argv):
    code = cli.train_main([*map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.slow
def test_a_second_plain_run_trains_into_the_next_free_folder(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    code, out, err = train(capsys, *TINY)
    assert code == 0, err
    assert os.path.isfile("runs/dates/model.npz") and "runs/dates-2" not in out
    first = os.path.getmtime("runs/dates/model.npz")
    code, out, err = train(capsys, *TINY)
    assert code == 0, err
    assert "runs/dates holds an earlier run, so this one trains in runs/dates-2" in out
    assert "checkpoint: runs/dates-2/model.npz" in out
    assert os.path.getmtime("runs/dates/model.npz") == first          # the first run is untouched
    code, out, err = train(capsys, "--out", "runs/dates", *TINY)       # named explicitly: refused
    assert code == 2 and "already holds a checkpoint" in err and err.count("\n") == 1

    code, out, err = cli.evaluate_main(["--show", "0", "--json"]), *capsys.readouterr()
    assert code == 0, err
    assert err.strip() == ("note: using runs/dates-2/model.npz, the newest of 2 trained runs (runs/dates older); "
                           "--checkpoint to choose")
    assert cli.translate_main(["1845-01-05"]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("1845-01-05 -> ") and "runs/dates-2/model.npz" in err


def _fake_run(folder, mtime=None, log=True):
    os.makedirs(folder, exist_ok=True)
    checkpoint = os.path.join(folder, "model.npz")
    with open(checkpoint, "wb") as f:
        f.write(b"PK")
    if log:
        with open(os.path.join(folder, "train_log.jsonl"), "w") as f:
            f.write('{"step": 1}\n')
    if mtime is not None:
        os.utime(checkpoint, (mtime, mtime))
    return checkpoint


def test_the_next_free_folder_skips_runs_logs_and_live_locks(tmp_path):
    base = str(tmp_path / "runs" / "dates")
    assert next_free_run_folder(base) == base
    os.makedirs(base)
    assert next_free_run_folder(base) == base                        # an empty folder is free
    _fake_run(base)
    assert next_free_run_folder(base) == base + "-2"
    os.makedirs(base + "-2")
    with open(os.path.join(base + "-2", "train_log.jsonl"), "w") as f:   # a log without its checkpoint
        f.write('{"step": 1}\n')
    os.makedirs(base + "-3")
    with open(os.path.join(base + "-3", LOCK_NAME), "w") as f:           # a run that is training now
        f.write(f"{os.getpid()}\n")
    with open(base + "-4", "w") as f:                                    # a file, not a folder
        f.write("x")
    assert next_free_run_folder(base) == base + "-5"


def test_the_default_checkpoint_is_the_newest_finished_run(tmp_path, capsys):
    base = str(tmp_path / "runs" / "dates")
    said = []
    assert default_checkpoint(base, said.append) == os.path.join(base, "model.npz") and said == []
    now = time.time()
    only = _fake_run(base, now - 100)
    assert default_checkpoint(base, said.append) == only and said == []      # one run: nothing to say
    newest = _fake_run(base + "-10", now - 10)
    _fake_run(base + "-2", now - 50)
    running = _fake_run(base + "-11", now)
    with open(os.path.join(base + "-11", LOCK_NAME), "w") as f:              # still training: not finished
        f.write(f"{os.getpid()}\n")
    assert default_checkpoint(base, said.append) == newest
    assert said == [f"note: using {newest}, the newest of 3 trained runs ({base}-2, {base} older); "
                    "--checkpoint to choose"]
    assert running not in said[0]


def test_export_and_plot_training_follow_the_newest_run(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    _fake_run("runs/dates", time.time() - 100)
    _fake_run("runs/dates-2", time.time())
    assert export_main([]) == 2               # the fake checkpoint is not a real one: its name is in the error
    assert "runs/dates-2/model.npz" in capsys.readouterr().err
    assert curves_main(["--out", "c.png"]) == 2
    assert "runs/dates-2/train_log.jsonl" in capsys.readouterr().err
