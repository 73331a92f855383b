"""Every viz command behaves one way without Graphviz's `dot`, and output folders fail in one line.

Without `dot`: the .dot source is written, one line on stderr says how to install
Graphviz, and the exit status is 3 (``viz.render.EXIT_DOT_MISSING``), never 0 (nothing
was rendered) and never 2 (that is bad input). In a notebook, ``draw_graph``'s result
shows its DOT source and the hint instead of raising.
"""
import pytest

from minigrad import Tensor
from transformer.files.output_folder import make_output_folder
from viz import draw_graph
from transformer.commands.attention_graph import main as attention_graph_main
from transformer.commands.backward_animation import main as animation_main
from transformer.commands.heatmaps import curves_main, main as heatmaps_main
from viz.render import EXIT_DOT_MISSING, INSTALL_HINT

TINY = ["--d-model", "8", "--heads", "2", "--layers", "1"]


@pytest.fixture
def no_dot(monkeypatch, path_without_dot):
    monkeypatch.setenv("PATH", path_without_dot)


def assert_one_install_line(capsys, dot_path):
    err = capsys.readouterr().err.splitlines()
    hint = [line for line in err if "not on PATH" in line]
    assert len(hint) == 1 and INSTALL_HINT in hint[0] and dot_path in hint[0]
    assert not [line for line in err if "Traceback" in line]


def test_attention_graph_writes_the_dot_says_how_to_install_and_exits_3(no_dot, tmp_path, capsys):
    out = tmp_path / "step"
    assert attention_graph_main(TINY + ["--kind", "cross", "--format", "png", "--out", str(out)]) == EXIT_DOT_MISSING
    assert (tmp_path / "step.dot").read_text().startswith("digraph")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step.dot"]
    assert_one_install_line(capsys, str(tmp_path / "step.dot"))


def test_backward_animation_writes_every_frame_as_dot_says_how_to_install_and_exits_3(no_dot, tmp_path, capsys):
    assert animation_main(["--expr", "(a * a + a).sum()", "--var", "a=1,2", "--out", str(tmp_path / "anim")]) == 3
    source = (tmp_path / "anim.dot").read_text()
    assert source.count("digraph") == 3 and source.startswith("// frame 1: backward step 1/3")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["anim.dot"]
    assert_one_install_line(capsys, str(tmp_path / "anim.dot"))


def test_draw_graph_in_a_notebook_shows_dot_source_and_the_hint(no_dot):
    a = Tensor([1.0, 2.0], requires_grad=True).named("a")
    bundle = draw_graph((a * a).sum())._repr_mimebundle_()
    assert "image/svg+xml" not in bundle
    assert "digraph" in bundle["text/html"] and INSTALL_HINT in bundle["text/plain"]
    assert "&lt;" in bundle["text/html"] and "<TABLE" not in bundle["text/html"]    # the source is escaped


@pytest.mark.needs_dot
def test_draw_graph_in_a_notebook_is_an_svg_with_dot():
    a = Tensor([1.0, 2.0], requires_grad=True).named("a")
    assert draw_graph((a * a).sum())._repr_mimebundle_()["image/svg+xml"].lstrip().startswith("<?xml")


@pytest.mark.parametrize("command, option", [
    (lambda out: attention_graph_main(TINY + ["--out", f"{out}/x"]), "--out"),
    (lambda out: animation_main(["--out", f"{out}/x"]), "--out"),
    (lambda out: heatmaps_main(TINY + ["--untrained", "--out-dir", f"{out}/x"]), "--out-dir"),
])
def test_an_output_under_a_file_is_one_line_naming_the_file(command, option, tmp_path, capsys):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    assert command(blocker) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == (f"error: cannot write the output under {blocker}{'/x' * (option == '--out-dir')}: "
                       f"{blocker} is a file, not a folder; choose another {option}")


def test_plot_training_output_under_a_file(tmp_path, capsys):
    log = tmp_path / "log.jsonl"
    log.write_text('{"step": 1, "loss": 2.0}\n')
    (tmp_path / "a_file").write_text("")
    assert curves_main([str(log), "--out", str(tmp_path / "a_file" / "curves.png")]) == 2
    assert "a_file is a file, not a folder; choose another --out" in capsys.readouterr().err


def test_make_output_folder_creates_parents_and_accepts_an_empty_name(tmp_path):
    make_output_folder(tmp_path / "a" / "b")
    make_output_folder("")
    assert (tmp_path / "a" / "b").is_dir()
