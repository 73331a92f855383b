"""viz.heatmaps: attention heatmaps per layer and head, and training curves."""
import json

import numpy as np
import pytest

from transformer.commands.heatmaps import curves_main, main as main
from viz.heatmaps import attention_maps, plot_training_curves, read_training_log, save_attention_heatmaps
from transformer.decoding import greedy_decode
from viz.inputs import load_or_create_model, source_ids, token_labels

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
SOURCE_TOKENS = ["<sos>", "1", "8", "4", "5", "-", "0", "1", "-", "0", "5", "<eos>"]
LAYERS, HEADS = 2, 2


@pytest.fixture(scope="module")
def model():
    return load_or_create_model(seed=0, d_model=16, heads=HEADS, layers=LAYERS)


@pytest.fixture(scope="module")
def saved(model, tmp_path_factory):
    return save_attention_heatmaps(model, "1845-01-05", tmp_path_factory.mktemp("maps"), prefix="att")


def panels(fig):
    return {ax.get_label(): ax for ax in fig.axes if ax.get_label().startswith("layer")}


def test_one_png_per_kind_with_one_panel_per_head(saved):
    assert set(saved) == {"encoder-self", "decoder-self", "cross"}
    for kind, (path, fig) in saved.items():
        assert path.endswith(f"att_{kind}.png") and open(path, "rb").read(8) == PNG_MAGIC
        assert sorted(panels(fig)) == [f"layer {l} head {h}" for l in range(LAYERS) for h in range(HEADS)]
        assert sum(ax.get_label() == "<colorbar>" for ax in fig.axes) == 1
        assert "1845-01-05" in fig._suptitle.get_text()


def test_axes_are_labelled_with_the_characters(saved, model):
    maps = attention_maps(model, "1845-01-05")
    bottom_left = lambda kind: panels(saved[kind].figure)[f"layer {LAYERS - 1} head 0"]  # noqa: E731
    ticks = lambda labels: [t.get_text() for t in labels]  # noqa: E731

    encoder = bottom_left("encoder-self")
    assert ticks(encoder.get_xticklabels()) == SOURCE_TOKENS == ticks(encoder.get_yticklabels())
    cross = bottom_left("cross")
    assert ticks(cross.get_xticklabels()) == SOURCE_TOKENS
    # a decoder row is labelled by its input and by what it writes: the row of <sos> writes the first character
    written = maps.target_tokens[1:] + ["<eos>"]
    labels = [f"{token} → {writes}" for token, writes in zip(maps.target_tokens, written)]
    assert ticks(cross.get_yticklabels()) == labels and labels[0] == f"<sos> → {maps.output_text[0]}"
    assert cross.get_ylabel() == "query: input → writes"
    decoder = bottom_left("decoder-self")
    assert ticks(decoder.get_xticklabels()) == maps.target_tokens and ticks(decoder.get_yticklabels()) == labels
    # the decoder side is the greedy output fed back: its characters, not the reference answer
    greedy = greedy_decode(model, source_ids("1845-01-05"))[0]
    assert maps.target_tokens[1:] == token_labels(greedy[: len(maps.target_tokens) - 1])


def test_panels_show_the_models_weights(saved, model):
    maps = attention_maps(model, "1845-01-05")
    for kind, (_, fig) in saved.items():
        for layer in range(LAYERS):
            for head in range(HEADS):
                shown = panels(fig)[f"layer {layer} head {head}"].images[0].get_array()
                np.testing.assert_allclose(shown, maps.weights[kind][layer, head])
        np.testing.assert_allclose(maps.weights[kind].sum(axis=-1), 1.0, atol=1e-5)
    queries, keys = len(maps.target_tokens), len(SOURCE_TOKENS)
    assert maps.weights["cross"].shape == (LAYERS, HEADS, queries, keys)
    assert maps.weights["decoder-self"].shape == (LAYERS, HEADS, queries, queries)
    # masked self-attention: nothing above the diagonal
    decoder = maps.weights["decoder-self"]
    assert np.all(np.triu(decoder, k=1) == 0) and not np.all(np.tril(decoder, k=-1) == 0)


def _write_log(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_training_curves_plot_loss_and_exact_match(tmp_path):
    records = [{"step": s, "loss": 4.0 / s, "lr": 1e-3} for s in range(1, 11)]
    records[4]["exact_match"], records[9]["exact_match"] = 0.25, 0.75
    saved = plot_training_curves(_write_log(tmp_path / "log.jsonl", records), tmp_path / "out" / "curves.png")
    assert open(saved.path, "rb").read(8) == PNG_MAGIC
    loss_ax, match_ax = saved.figure.axes
    assert list(loss_ax.lines[0].get_xdata()) == list(range(1, 11))
    np.testing.assert_allclose(loss_ax.lines[0].get_ydata(), [4.0 / s for s in range(1, 11)])
    assert list(match_ax.lines[0].get_xdata()) == [5, 10]
    np.testing.assert_allclose(match_ax.lines[0].get_ydata(), [25.0, 75.0])
    assert "exact match" in match_ax.get_title() and loss_ax.get_yscale() == "log"


def test_training_log_errors_name_the_line(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"step": 1, "loss": 2.0}\nnot json\n')
    with pytest.raises(ValueError, match="line 2"):
        read_training_log(bad)
    assert curves_main([str(bad), "--out", str(tmp_path / "x.png")]) == 2
    assert curves_main([str(tmp_path / "missing.jsonl")]) == 2


def test_heatmap_cli(tmp_path, capsys):
    args = ["--d-model", "8", "--heads", "2", "--layers", "1", "--out-dir", str(tmp_path)]
    assert main(args) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "attention_cross.png", "attention_decoder-self.png", "attention_encoder-self.png"]
    assert main(args + ["--date", "1845-13-05"]) == 2
    assert "error:" in capsys.readouterr().err


def test_checkpoint_models_are_loaded_not_recreated(tmp_path, model):
    from transformer.files.checkpoint import save_checkpoint
    path = str(tmp_path / "model.npz")
    save_checkpoint(path, model.state_dict(), {}, {"model_config": model.config.to_dict()})
    loaded = load_or_create_model(checkpoint=path, seed=123)
    for (name, p), (_, q) in zip(model.named_parameters(), loaded.named_parameters()):
        np.testing.assert_array_equal(p.data, q.data, err_msg=name)
    assert main(["--checkpoint", path, "--out-dir", str(tmp_path), "--prefix", "ckpt"]) == 0
    assert (tmp_path / "ckpt_cross.png").exists()


def test_training_curves_show_the_free_batch_estimate_beside_a_single_evaluation(tmp_path):
    """A default run evaluates held-out dates once; every step logs its batch's exact match,
    so the panel still shows a curve, averaged over 4 batches as the stopping rule does."""
    records = [{"step": s, "loss": 1.0 / s, "batch_exact_match": s / 10} for s in range(1, 11)]
    records[9]["exact_match"] = 0.995
    saved = plot_training_curves(_write_log(tmp_path / "log.jsonl", records), tmp_path / "curves.png")
    loss_ax, match_ax = saved.figure.axes
    held_out, batches = match_ax.lines
    assert list(held_out.get_xdata()) == [10] and list(batches.get_xdata()) == list(range(4, 11))
    np.testing.assert_allclose(batches.get_ydata(), [100 * (s - 1.5) / 10 for s in range(4, 11)])
    labels = [text.get_text() for text in match_ax.get_legend().get_texts()]
    assert labels[0] == "held-out dates (1 evaluation)" and labels[1].startswith("training batches")
    assert match_ax.get_xlim() == loss_ax.get_xlim()         # one step axis for both panels


@pytest.mark.parametrize("layers", [1, 2])
def test_the_decoder_only_maps_many_row_labels_do_not_overlap(layers):
    """The decoder-only model's one sequence (date, <sos>, output) gives 29 rows or more; in a square
    panel their labels overlapped, so the panel grows with the rows."""
    import minigrad
    from transformer.models.config import DecoderOnlyConfig
    from transformer.models.decoder_only import DecoderOnlyTransformer
    from viz.heatmaps import plot_attention
    minigrad.manual_seed(0)
    decoder_only = DecoderOnlyTransformer(DecoderOnlyConfig(d_model=16, num_heads=2, d_ff=32, num_layers=layers)).eval()
    maps = attention_maps(decoder_only, "1845-01-05")
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    fig = plot_attention(maps, "decoder-self")
    FigureCanvasAgg(fig).draw()   # places the labels where the saved picture has them
    renderer = fig.canvas.get_renderer()
    first_column = [ax for label, ax in panels(fig).items() if label.endswith("head 0")]
    assert len(first_column) == layers
    for ax in first_column:
        boxes = [tick.get_window_extent(renderer) for tick in ax.get_yticklabels() if tick.get_text()]
        assert len(boxes) == len(maps.axis_tokens("decoder-self")[0]) >= 29
        boxes.sort(key=lambda box: box.y0)
        for lower, upper in zip(boxes, boxes[1:]):
            assert lower.y1 <= upper.y0, f"{ax.get_label()}: row labels overlap ({lower.y1:.1f} > {upper.y0:.1f} px)"


def test_the_training_curves_legend_hides_no_point_of_either_curve(tmp_path):
    """A run like the README's: flat, a steep rise through the middle, flat at the top. Inside the
    panel, at "center right", the legend hid the batch curve's rise."""
    steps = range(1, 193)
    records = [{"step": s, "loss": 4.0 / s, "batch_exact_match": float(1 / (1 + np.exp(-(s - 100) / 8)))}
               for s in steps]
    for record in records[24::25] + records[-1:]:
        record["exact_match"] = record["batch_exact_match"]
    saved = plot_training_curves(_write_log(tmp_path / "log.jsonl", records), tmp_path / "curves.png")
    match_ax = saved.figure.axes[1]
    legend_box = match_ax.get_legend().get_window_extent()
    for line in match_ax.lines:
        points = match_ax.transData.transform(line.get_xydata())
        hidden = [i for i, (x, y) in enumerate(points) if legend_box.contains(x, y)]
        assert not hidden, f"the legend hides {len(hidden)} points of {line.get_label()!r}"
        segments = np.linspace(points[:-1], points[1:], 20).reshape(-1, 2)   # and the lines between them
        assert not any(legend_box.contains(x, y) for x, y in segments), line.get_label()
