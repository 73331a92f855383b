"""viz: mask nodes, SVG tooltips, readable heatmaps, markdown escaping, and which model the tools draw."""
import re
import shutil
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from minigrad import Tensor
from transformer.models.attention import causal_mask, padding_mask
from transformer.files.checkpoint import save_checkpoint
from transformer.tasks.dates import PAD, encode
from viz import draw_graph, render
from viz.attention_graph import build_attention_graph
from transformer.commands.attention_graph import main as graph_main
from viz.details import mask_kind, pattern_text
from viz.heatmaps import DPI, attention_maps, plot_attention
from transformer.commands.heatmaps import main as heatmaps_main
from viz.inputs import choose_model, load_or_create_model, token_labels
from viz.walkthrough import compute_walkthrough, format_walkthrough
from transformer.commands.explain import main as explain_main

HAS_DOT = shutil.which("dot") is not None
TOOLTIP = re.compile(r'^\s*(n\d+|op\d+_mask) \[label=.*tooltip="((?:[^"\\]|\\.)*)"', re.M)


@pytest.fixture(scope="module")
def tiny_model():
    return load_or_create_model(seed=0, d_model=8, heads=2, layers=1)


def tooltips(source):
    return {node: text.replace("\\n", "\n") for node, text in TOOLTIP.findall(source)}


# ----------------------------------------------------------------------- masks
def test_mask_kinds_are_read_from_the_pattern():
    ids = np.array([[5, 6, 7, PAD, PAD]])
    assert mask_kind(~padding_mask(ids, PAD)) == "padding"                              # (1, 1, 1, 5)
    assert mask_kind(~causal_mask(5)) == "causal"
    assert mask_kind(~(causal_mask(5) & padding_mask(ids, PAD))) == "causal + padding"
    assert mask_kind(np.eye(4, dtype=bool)) == "custom"
    assert pattern_text(causal_mask(3)) == "■··\n■■·\n■■■"


def test_decoder_self_attention_shows_the_causal_mask_entering_maskedfill(tiny_model):
    graph, _ = build_attention_graph(tiny_model, "1845-01-05", "decoder-self", 0)
    source = graph.source
    (mask_node,) = re.findall(r"^\s*(op\d+)_mask \[", source, re.M)
    assert re.search(rf"^\s*{mask_node}_mask -> {mask_node} \[.*label=mask", source, re.M)
    assert re.search(rf"^\s*{mask_node} \[label=<MaskedFill>", source, re.M)
    label = re.search(rf"^\s*{mask_node}_mask \[label=<(.*)>", source, re.M).group(1)
    assert "mask: causal + padding" in label and "(1, 1, 16, 16) bool" in label   # '<sos>January 5, 1845'
    cells = re.findall(r'BGCOLOR="(#[0-9a-f]+)"', label)
    assert len(cells) == 16 * 16
    dark = np.array([c == "#343a40" for c in cells]).reshape(16, 16)
    np.testing.assert_array_equal(dark, causal_mask(16))      # the convention: dark = True = may attend
    assert "dark = True = may attend" in label and "filled (masked out)" not in source
    tip = tooltips(source)[f"{mask_node}_mask"]
    assert tip.splitlines()[-16] == "■" + "·" * 15 and tip.splitlines()[-1] == "■" * 16
    assert f"{16 * 17 // 2} of 256 entries True = may attend" in tip
    assert "attention mask (dark = True = may attend)" in source                 # the legend


@pytest.mark.parametrize("kind, shape", [("encoder-self", "(1, 1, 1, 12)"), ("cross", "(1, 1, 1, 12)")])
def test_padding_masks_are_labelled_with_their_kind(tiny_model, kind, shape):
    graph, _ = build_attention_graph(tiny_model, "1845-01-05", kind, 0)
    assert "mask: padding</B>" in graph.source and f"{shape} bool" in graph.source


# -------------------------------------------------------------------- tooltips
def test_tooltips_say_why_a_gradient_is_missing():
    a = Tensor(np.array([3.0, 4.0]), requires_grad=True).named("a")
    hidden = (a * a).named("hidden")
    loss = hidden.sum().named("loss")
    before = tooltips(draw_graph(loss).source)                    # drawn without backward
    assert all("backward was not run" in tip for tip in before.values())
    assert not any("retain_grad" in tip for tip in before.values())
    loss.backward(retain_graph=True)
    after = {tip.splitlines()[0]: tip for tip in tooltips(draw_graph(loss, show_grad=True).source).values()}
    assert "‖grad‖" in after["a"]
    assert "not kept" in after["hidden"] and ".retain_grad()" in after["hidden"]   # true: it did not retain


def test_every_tensor_node_has_a_tooltip_with_shape_dtype_values_and_norms():
    a = Tensor(np.array([3.0, 4.0]), requires_grad=True).named("a")
    b = Tensor(np.array([1.0, 2.0, 2.0]).reshape(3, 1)).named('b "quoted" \\N')
    loss = (a * b).sum().named("loss")
    a_times_b = loss.grad_fn.inputs[0].retain_grad()
    loss.backward(retain_graph=True)
    source = draw_graph(loss, show_grad=True).source
    tips = tooltips(source)
    assert len(tips) == 4 == len(re.findall(r"^\s*n\d+ \[", source, re.M))
    by_name = {text.splitlines()[0]: text for text in tips.values()}
    assert "shape (2,), dtype float64" in by_name["a"] and "values [3, 4]" in by_name["a"]
    assert "‖value‖ 5" in by_name["a"] and f"‖grad‖ {np.linalg.norm(a.grad):.4g}" in by_name["a"]
    assert "no grad (constant)" in by_name['b \\"quoted\\" ∖N']           # backslash can't become \N
    assert f"‖grad‖ {np.linalg.norm(a_times_b.grad):.4g}" in by_name["(unnamed tensor)"]


@pytest.mark.skipif(not HAS_DOT, reason="Graphviz's dot is not installed")
def test_tooltips_and_mask_survive_rendering_to_svg(tmp_path, tiny_model):
    graph, _ = build_attention_graph(tiny_model, "1845-01-05", "decoder-self", 0, backward=True)
    svg = render(graph, tmp_path / "step")[1]
    titles = [a.get("{http://www.w3.org/1999/xlink}title") for a in ET.parse(svg).iter("{http://www.w3.org/2000/svg}a")]
    weights = [t for t in titles if t and t.startswith("weights\n")]
    assert len(weights) == 1 and "shape (1, 2, 16, 16), dtype float32" in weights[0] and "‖grad‖" in weights[0]
    assert any(t.startswith("attention mask of the op") and "causal + padding" in t.splitlines()[0] for t in titles if t)


# -------------------------------------------------------------------- heatmaps
def test_heatmap_text_is_at_least_10_px_and_tokens_read_unambiguously(tiny_model):
    maps = attention_maps(tiny_model, "1845-01-05", untrained=True)
    fig = plot_attention(maps, "cross")
    fig.canvas.draw()                 # lays out, so every text artist exists with its final size
    texts = [t for t in fig.findobj(lambda a: hasattr(a, "get_fontsize") and hasattr(a, "get_text"))
             if t.get_text() and t.get_visible()]
    assert min(t.get_fontsize() * DPI / 72 for t in texts) >= 10
    bottom = fig.axes[len(fig.axes) - 2]              # last panel before the colorbar
    rotations = {t.get_text(): t.get_rotation() for t in bottom.get_xticklabels()}
    assert rotations["-"] == 0 and rotations["<sos>"] == 90
    assert token_labels(encode("May 5, 1845")[:5]) == ["<sos>", "M", "a", "y", "␣"]      # a visible space
    assert "untrained model" in fig._suptitle.get_text()
    assert "decoder's input" in fig._supxlabel.get_text() and "shifted" in fig._supxlabel.get_text()


# -------------------------------------------------------------------- markdown
def test_markdown_tables_have_no_raw_special_tokens(tiny_model):
    text = format_walkthrough(compute_walkthrough(tiny_model, "1676-11-30"), markdown=True)
    table_lines = [line for line in text.splitlines() if line.startswith("|")]
    assert table_lines and not any(re.search(r"(?<!`)<(sos|eos|pad)>", line) for line in table_lines)
    assert "`<sos>`" in text and "11:`<eos>`" in text
    assert not re.search(r"(?<!`)<pad>", text)


# ------------------------------------------------------------- which model
def _checkpoint(model, path):
    save_checkpoint(str(path), model.state_dict(), {}, {"model_config": model.config.to_dict()})


def test_the_default_checkpoint_is_used_when_it_exists(tmp_path, tiny_model):
    said = []
    missing = choose_model(default_checkpoint=str(tmp_path / "none.npz"), say=said.append)
    assert not missing.trained and missing.title_note == " (untrained model)"
    assert len(said) == 1 and "drawing an untrained model" in said[0] and "dates-train" in said[0]
    _checkpoint(tiny_model, tmp_path / "model.npz")
    said.clear()
    found = choose_model(default_checkpoint=str(tmp_path / "model.npz"), say=said.append)
    assert found.trained and found.model.config.d_model == 8 and not said and found.title_note == ""
    fresh = choose_model(untrained=True, default_checkpoint=str(tmp_path / "model.npz"), say=said.append)
    assert not fresh.trained and fresh.model.config.d_model == 64 and "--untrained" in said[0]


def test_tools_pick_up_runs_dates_model_and_say_when_they_draw_an_untrained_one(tmp_path, monkeypatch,
                                                                               capsys, tiny_model):
    monkeypatch.chdir(tmp_path)
    assert explain_main(["1676-11-30"]) == 0
    captured = capsys.readouterr()
    assert captured.err.count("\n") == 1 and "untrained model" in captured.err
    assert "(untrained model)" in captured.out.splitlines()[0]
    _checkpoint(tiny_model, tmp_path / "runs" / "dates" / "model.npz")
    assert explain_main(["1676-11-30"]) == 0
    captured = capsys.readouterr()
    assert "d_model 8" in captured.out and "untrained" not in captured.out + captured.err
    assert heatmaps_main([]) == 0 and graph_main(["--kind", "cross"]) == (0 if HAS_DOT else 3)   # 3: .dot only
    written = sorted(str(p.relative_to(tmp_path)) for p in (tmp_path / "runs" / "viz").rglob("*") if p.is_file())
    assert "runs/viz/attention_step_1845-01-05_cross_layer0.dot" in written and "runs/viz/heatmaps/attention_cross.png" in written
    assert "untrained" not in capsys.readouterr().err


@pytest.mark.parametrize("tool", [explain_main, heatmaps_main, graph_main])
def test_a_bad_checkpoint_is_one_line_and_exit_2(tmp_path, capsys, tool):
    bad = tmp_path / "model.npz"
    bad.write_bytes(b"not a zip file at all")
    for args in (["--checkpoint", str(bad)], ["--checkpoint", str(tmp_path / "missing.npz")],
                 ["--checkpoint", str(bad), "--untrained"]):
        assert tool(args + (["--out-dir", str(tmp_path)] if tool is heatmaps_main else [])) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err


def test_max_depth_makes_a_small_graph_that_still_shows_the_mask(tiny_model, tmp_path, capsys):
    full, _ = build_attention_graph(tiny_model, "1845-01-05", "decoder-self", 0, backward=True)
    top, _ = build_attention_graph(tiny_model, "1845-01-05", "decoder-self", 0, backward=True, max_depth=7)
    count = lambda g: len(re.findall(r"^\s*(?:n|op)\d+ \[", g.source, re.M))  # noqa: E731
    assert count(top) < count(full) / 2
    assert "mask: causal + padding" in top.source and "graph cut" in top.source
    assert "Linear" in top.source and re.search(r"\[label=<Softmax>", top.source)
    assert graph_main(["--max-depth", "0", "--out", str(tmp_path / "x")]) == 2
    assert capsys.readouterr().err == "error: --max-depth must be at least 1, got 0\n"


def test_output_of_draws_the_graph_up_to_a_named_tensor(tiny_model, capsys):
    graph, _ = build_attention_graph(tiny_model, "1845-01-05", "decoder-self", 0, backward=True,
                                     output_of="weights", max_depth=3)
    source = graph.source
    assert "mask: causal + padding" in source and "<B>weights</B>" in source and "<B>scores</B>" in source
    assert "Linear" not in source and "legend" not in source
    assert graph_main(["--output-of", "nothing", "--d-model", "8", "--heads", "2", "--layers", "1"]) == 2
    note, error = capsys.readouterr().err.splitlines()           # the untrained-model note, then one error
    assert "untrained model" in note and error.startswith("error: no tensor named 'nothing'") and "weights" in error


@pytest.mark.parametrize("tool, args, message", [
    (explain_main, ["--max-dims", "0"], "--max-dims must be at least 1, got 0"),
    (explain_main, ["1676-13-30"], "not a valid date"),
    (graph_main, ["--d-model", "0"], "--d-model must be at least 1, got 0"),
    (heatmaps_main, ["--layers", "0"], "--layers must be at least 1, got 0"),
    (heatmaps_main, ["--seed", "-1"], "--seed must be at least 0, got -1"),
    (graph_main, ["--date", "2023-02-30"], "not a valid date"),
])
def test_bad_input_is_one_line_and_exit_2_before_any_model_note(tool, args, message, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert tool(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: ") and message in err
