"""Every command that writes a file: it never replaces a checkpoint, a log or anything that is not
a file of its own kind; an existing output needs --force; files appear whole (atomic) and 0644."""
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

import minigrad
from transformer.files.checkpoint import save_checkpoint
from transformer.models.config import ModelConfig
from transformer.commands.export import main as export_main
from transformer.models.encoder_decoder import Transformer
from transformer.commands.attention_graph import main as graph_main
from transformer.commands.backward_animation import main as animation_main
from transformer.commands.explore import dates_main as explore_main
from viz.explorer.build import write_explorer
from transformer.commands.heatmaps import curves_main, main as heatmaps_main

REPO = Path(__file__).resolve().parents[1]


def small_model():
    minigrad.manual_seed(3)
    return Transformer(ModelConfig(d_model=16, num_heads=4, num_encoder_layers=1, num_decoder_layers=1,
                                   d_ff=24)).eval()


@pytest.fixture
def run(tmp_path):
    """A finished run's folder: its checkpoint and its training log."""
    folder = tmp_path / "run"
    folder.mkdir()
    model = small_model()
    save_checkpoint(str(folder / "model.npz"), model.state_dict(), {}, {"model_config": model.config.to_dict()})
    (folder / "train_log.jsonl").write_text(json.dumps({"step": 1, "loss": 4.0}) + "\n")
    return folder


def _snapshot(folder):
    return {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file() and not p.is_symlink()}


def _one_error_line(capsys, *words):
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: "), err
    assert all(word in err for word in words), err
    assert ".tmp-" not in err
    return err


@pytest.mark.parametrize("target", ["model.npz", "train_log.jsonl"])
@pytest.mark.parametrize("force", [[], ["--force"]])
def test_export_never_replaces_a_checkpoint_or_a_log(run, tmp_path, capsys, target, force):
    other = tmp_path / "other"
    other.mkdir()
    (other / target).write_bytes((run / target).read_bytes())      # another run's file
    before = _snapshot(other)
    assert export_main(["--checkpoint", str(run / "model.npz"), "--out", str(other / target)] + force) == 2
    _one_error_line(capsys, str(other / target), "never replaced")
    assert _snapshot(other) == before


def test_export_does_not_reach_the_checkpoint_through_a_symlinked_folder(run, tmp_path, capsys):
    link = tmp_path / "link"
    link.symlink_to(run, target_is_directory=True)
    before = _snapshot(run)
    for force in ([], ["--force"]):
        assert export_main(["--checkpoint", str(run / "model.npz"), "--out", str(link / "model.npz"),
                            "--format", "npz"] + force) == 2
        _one_error_line(capsys, "checkpoint")
    assert _snapshot(run) == before


@pytest.mark.parametrize("special", ["fifo", "symlink", "device"])
def test_export_leaves_what_is_not_a_regular_file_alone(run, tmp_path, capsys, special):
    out = tmp_path / "weights.safetensors"
    if special == "fifo":
        os.mkfifo(out)
    elif special == "symlink":
        out.symlink_to(tmp_path / "elsewhere.safetensors")
    else:
        try:                                   # a null device node of its own (making one needs root)
            os.mknod(out, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        except PermissionError:
            pytest.skip("making a device node needs root")
    assert export_main(["--checkpoint", str(run / "model.npz"), "--out", str(out), "--force"]) == 2
    _one_error_line(capsys, "never replaced")
    kept = {"fifo": out.is_fifo, "symlink": out.is_symlink, "device": out.is_char_device}[special]
    assert kept()
    assert not (tmp_path / "elsewhere.safetensors").exists()


def test_an_existing_export_needs_force_and_is_written_0644(run, capsys):
    out = run / "model.safetensors"
    old_mask = os.umask(0o022)
    try:
        assert export_main(["--checkpoint", str(run / "model.npz")]) == 0
        assert oct(out.stat().st_mode & 0o777) == oct(os.stat(run / "model.npz").st_mode & 0o777) == "0o644"
        capsys.readouterr()
        assert export_main(["--checkpoint", str(run / "model.npz")]) == 2
        _one_error_line(capsys, "already exists", "--force")
        assert export_main(["--checkpoint", str(run / "model.npz"), "--force"]) == 0
    finally:
        os.umask(old_mask)
    assert not [p for p in run.iterdir() if p.name.startswith(".tmp-")]


def test_export_into_a_folder_names_the_folder_not_a_temporary_file(run, capsys):
    assert export_main(["--checkpoint", str(run / "model.npz"), "--out", str(run)]) == 2
    _one_error_line(capsys, f"{run} is a folder")
    assert not [p for p in run.iterdir() if p.name.startswith(".tmp-")]


def test_explore_never_overwrites_the_checkpoint_with_html(run, capsys):
    before = _snapshot(run)
    for force in ([], ["--force"]):
        assert explore_main(["--checkpoint", str(run / "model.npz"), "--out", str(run / "model.npz"),
                             "--no-check"] + force) == 2
        _one_error_line(capsys, "checkpoint", "never replaced")
    assert _snapshot(run) == before


def _animation_out(tmp_path):
    from viz.render import have_dot
    return tmp_path / "anim", ("html" if have_dot() else "dot")


@pytest.mark.parametrize("command", ["graph", "heatmaps", "curves", "animation", "explore"])
def test_every_command_refuses_an_existing_output_without_force(run, tmp_path, capsys, command):
    """The output exists and is of the command's kind: one line asks for --force, nothing changes;
    a PNG where a page goes (another kind) is refused even with --force."""
    png = b"\x89PNG\r\n\x1a\n" + b"x" * 20
    page = b"<!DOCTYPE html><html>an earlier page</html>"
    model = ["--untrained", "--d-model", "16", "--layers", "1"]
    stem = tmp_path / "out"
    if command == "graph":
        argv, existing = [graph_main, "--out", str(stem)] + model, stem.with_suffix(".svg")
        content = b"<?xml version='1.0'?><svg></svg>"
    elif command == "heatmaps":
        argv, existing = [heatmaps_main, "--out-dir", str(tmp_path), "--prefix", "att"] + model, \
            tmp_path / "att_cross.png"
        content = png
    elif command == "curves":
        argv, existing = [curves_main, str(run / "train_log.jsonl"), "--out", str(tmp_path / "c.png")], \
            tmp_path / "c.png"
        content = png
    elif command == "animation":
        out, fmt = _animation_out(tmp_path)
        argv, existing = [animation_main, "--out", str(out), "--format", "html"], out.with_suffix("." + fmt)
        content = page if fmt == "html" else b"// frame 1\ndigraph {}"
    else:
        argv, existing = [explore_main, "--out", str(tmp_path / "e.html"), "--no-check"] + model, \
            tmp_path / "e.html"
        content = page
    existing.write_bytes(content)
    main, *args = argv
    assert main(args) == 2
    _one_error_line(capsys, str(existing), "already exists", "--force")
    assert existing.read_bytes() == content
    foreign = b"PK\x03\x04 not ours" if content != png else page
    existing.write_bytes(foreign)
    assert main(args + ["--force"]) == 2
    _one_error_line(capsys, str(existing), "never replaced")
    assert existing.read_bytes() == foreign


@pytest.mark.parametrize("command", ["graph", "heatmaps", "curves", "animation", "explore"])
def test_a_default_output_that_is_taken_is_numbered_and_force_replaces_it(run, capsys, command):
    """Without --out a second run writes beside the first (-2, -3 ...) and says so in one line,
    as dates-train trains into runs/dates-2; with --force it replaces the first."""
    model = ["--untrained", "--d-model", "16", "--layers", "1"]
    viz = Path("runs", "viz")
    main, args, first = {
        "graph": (graph_main, ["--kind", "cross"] + model, "attention_step_1845-01-05_cross_layer0.dot"),
        "heatmaps": (heatmaps_main, model, "heatmaps"),
        "curves": (curves_main, [str(run / "train_log.jsonl")], "training_curves.png"),
        "animation": (animation_main, ["--format", "html"],
                      "backward_a_mul_b_add_a_tanh_sum." + _animation_out(run)[1]),
        "explore": (explore_main, ["--no-check"] + model, "explorer.html"),
    }[command]
    stem, extension = os.path.splitext(first)
    assert main(args) in (0, 3)                                  # 3: the .dot written, no Graphviz to render
    capsys.readouterr()
    before = _snapshot(viz / first) if command == "heatmaps" else (viz / first).read_bytes()
    for number in (2, 3):
        assert main(args) in (0, 3)
        out = capsys.readouterr().out
        assert out.count("holds an earlier output") == 1 and f"{viz / stem}-{number}{extension}" in out, out
        assert (viz / f"{stem}-{number}{extension}").exists()
    assert (_snapshot(viz / first) if command == "heatmaps" else (viz / first).read_bytes()) == before
    assert main(args + ["--force"]) in (0, 3)
    assert "earlier output" not in capsys.readouterr().out and not (viz / f"{stem}-4{extension}").exists()


def test_explore_replaces_its_page_atomically(tmp_path, monkeypatch):
    """Interrupted while the new page is written: the previous page is still there, whole."""
    out = tmp_path / "explorer.html"
    previous = "<!DOCTYPE html><html>the previous page</html>"
    out.write_text(previous)
    real_open = open

    class Interrupted:
        def __init__(self, file):
            self.file = file

        def write(self, data):
            self.file.write(data[:len(data) // 2])
            raise KeyboardInterrupt

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.file.close()

        def __getattr__(self, name):
            return getattr(self.file, name)

    def interrupted_open(path, mode="r", *args, **kwargs):
        file = real_open(path, mode, *args, **kwargs)
        return Interrupted(file) if str(tmp_path) in str(path) and "w" in mode else file

    monkeypatch.setattr("builtins.open", interrupted_open)
    with pytest.raises(KeyboardInterrupt):
        write_explorer(small_model(), str(out), "1845-01-05", "decoder-self", 0, trained=False, check=False)
    monkeypatch.undo()
    assert out.read_text() == previous
    assert [p.name for p in tmp_path.iterdir()] == ["explorer.html"]


SIGTERM_DURING_EXPORT = """
import os, signal, sys, time
import safetensors.numpy
real_save = safetensors.numpy.save_file
def save_then_terminated(tensors, filename, metadata=None):
    real_save(tensors, filename, metadata=metadata)
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(10)
safetensors.numpy.save_file = save_then_terminated
from transformer.commands.export import main
sys.exit(main(sys.argv[1:]))
"""


def test_sigterm_during_export_leaves_no_temporary_file(run):
    out = run / "weights.safetensors"
    done = subprocess.run([sys.executable, "-c", SIGTERM_DURING_EXPORT, "--checkpoint", str(run / "model.npz"),
                           "--out", str(out)], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and not out.exists()
    assert not [p.name for p in run.iterdir() if p.name.startswith(".tmp-")]
    assert "Traceback" not in done.stderr


def test_an_output_of_a_kind_no_command_recognises_is_written_once_and_never_replaced(run, tmp_path, capsys):
    out = tmp_path / "curves.tiff"
    assert curves_main([str(run / "train_log.jsonl"), "--out", str(out)]) == 0
    written = out.read_bytes()
    capsys.readouterr()
    assert curves_main([str(run / "train_log.jsonl"), "--out", str(out), "--force"]) == 2
    _one_error_line(capsys, "never replaced")
    assert out.read_bytes() == written
    assert curves_main([str(run / "train_log.jsonl"), "--out", str(tmp_path / "plain")]) == 0
    assert (tmp_path / "plain.png").read_bytes().startswith(b"\x89PNG")      # as matplotlib names it
