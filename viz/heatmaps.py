"""Attention-weight heatmaps for one date, and training curves, as PNG files (matplotlib).

    python examples/attention_heatmaps.py --date 1845-01-05 --checkpoint runs/dates/model.npz
    python examples/plot_training.py runs/dates/train_log.jsonl

The model translates the date greedily, then runs once more teacher-forced on
its own output (eval mode), and every MultiHeadAttention's ``last_weights``
(B, heads, Tq, Tk) is read. One figure per attention kind: rows are layers,
columns are heads; a row of a panel is a query position, a column a key
position, and each row sums to 1.

Figures are plain ``matplotlib.figure.Figure`` objects (no pyplot, so no
global state and nothing to close; PNGs are drawn by the Agg renderer). In a
notebook, evaluate the returned figure to show it.
"""
import os
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
from matplotlib.figure import Figure

from transformer.tasks.dates import decode
from transformer.decoding import inference
from transformer.files.output_file import atomic_output, check_outputs
from transformer.files.output_folder import make_output_folder
from transformer.files.run_dir import RunFolderError, log_lines

from .inputs import (UNTRAINED, attention_kinds, decoder_input_from_greedy, is_decoder_only, model_inputs,
                     source_ids, token_labels)

KINDS = ("encoder-self", "decoder-self", "cross")
TITLES = {"encoder-self": "encoder self-attention",
          "decoder-self": "decoder masked self-attention",
          "cross": "cross-attention (decoder queries, encoder keys)"}
CAPTIONS = {
    "encoder-self": "rows (queries) and columns (keys): the encoder's input, the ISO date",
    "decoder-self": ("rows and columns: the decoder's input, <sos> + the model's output shifted one place right; "
                     "a row is labelled input → what it writes; the causal mask hides keys after the query"),
    "cross": ("rows: the decoder's input, <sos> + the model's output shifted one place right, labelled "
              "input → what the row writes; columns: the encoder's input, the ISO date"),
}
DECODER_ONLY_TITLE = "masked self-attention (decoder-only)"
DECODER_ONLY_CAPTION = ("rows and columns: the model's one sequence, the ISO date, <sos>, then its output "
                        "(the row of <sos> and each later row predicts the next output character); the causal "
                        "mask hides keys after the query")
PANEL_INCHES = 2.7
DPI = 100                   # with the font sizes below every text is at least 10 px tall
TICK_POINTS = 8             # 8 pt at 100 dpi = 11 px
ROW_INCHES = 1.4 * TICK_POINTS / 72   # one row label and a little space: many rows make a taller panel
SPECIAL_TOKENS = ("<sos>", "<eos>", "<pad>")   # written vertically; single characters stay upright


class SavedFigure(NamedTuple):
    path: str
    figure: Figure


@dataclass
class AttentionMaps:
    """Every attention weight of one forward pass, with the tokens on each axis."""
    date: str
    output_text: str
    source_tokens: list          # encoder positions: <sos> 1 8 4 5 - 0 1 - 0 5 <eos>
    target_tokens: list          # decoder positions: <sos> + greedy output (without <eos>)
    weights: dict = field(default_factory=dict)   # kind -> (layers, heads, Tq, Tk)
    untrained: bool = False      # said in every title
    decoder_only: bool = False   # then target_tokens is its whole sequence: date, <sos>, output

    def axis_tokens(self, kind):
        """(query tokens, key tokens) of an attention kind."""
        queries = self.source_tokens if kind == "encoder-self" else self.target_tokens
        keys = self.target_tokens if kind == "decoder-self" else self.source_tokens
        return queries, keys

    def row_labels(self, kind) -> list:
        """The label of each row (query) of ``kind``: its token, and for the encoder-decoder's
        decoder rows also what the row writes, ``<sos> → J``: the row whose input is ``<sos>``
        predicts the first output character, and a reader looking for "the row of J" finds it."""
        queries, _ = self.axis_tokens(kind)
        if kind == "encoder-self" or self.decoder_only:
            return list(queries)
        written = list(self.target_tokens[1:]) + ["<eos>"]
        return [f"{token} → {writes}" for token, writes in zip(queries, written)]


def attention_maps(model, date: str, untrained: bool = False) -> AttentionMaps:
    src = source_ids(date)
    tgt_in = decoder_input_from_greedy(model, src)
    inputs = model_inputs(model, src, tgt_in)
    with inference(model):
        model(*inputs)
    weights = {"decoder-self": [layer.self_attn.last_weights[0] for layer in model.decoder.layers]}
    if not is_decoder_only(model):
        weights["encoder-self"] = [layer.self_attn.last_weights[0] for layer in model.encoder.layers]
        weights["cross"] = [layer.cross_attn.last_weights[0] for layer in model.decoder.layers]
    return AttentionMaps(date=date, output_text=decode(tgt_in[0]),
                         source_tokens=token_labels(src[0]), target_tokens=token_labels(inputs[-1][0]),
                         weights={kind: np.stack(w) for kind, w in weights.items()}, untrained=untrained,
                         decoder_only=is_decoder_only(model))


def plot_attention(maps: AttentionMaps, kind: str) -> Figure:
    """A grid of heatmaps (rows = layers, columns = heads) with one shared colorbar.

    Each panel's axes are labelled ``layer L head H`` (``Axes.get_label()``); the
    tokens are written on the left column (queries) and the bottom row (keys).
    """
    weights = maps.weights[kind]
    layers, heads = weights.shape[:2]
    queries, keys = maps.axis_tokens(kind)
    rows = maps.row_labels(kind)
    # the decoder-only model's 29 rows would overlap in a square panel: its height grows with the rows
    panel_height = max(PANEL_INCHES, ROW_INCHES * len(queries))
    fig = Figure(figsize=(PANEL_INCHES * heads + 1.2, panel_height * layers + 1.3), layout="constrained")
    axes = fig.subplots(layers, heads, squeeze=False)
    for layer in range(layers):
        for head in range(heads):
            ax = axes[layer, head]
            image = ax.imshow(weights[layer, head], vmin=0.0, vmax=1.0, cmap="viridis", aspect="auto")
            _label_panel(ax, layer, head, rows, keys, first_column=head == 0, last_row=layer == layers - 1,
                         query_label="query" if rows == list(queries) else "query: input → writes")
    bar = fig.colorbar(image, ax=axes.ravel().tolist(), shrink=0.8)
    bar.set_label("attention weight", fontsize=9)
    bar.ax.tick_params(labelsize=TICK_POINTS)
    note = f" ({UNTRAINED}: its output is noise)" if maps.untrained else ""
    title, caption = (DECODER_ONLY_TITLE, DECODER_ONLY_CAPTION) if maps.decoder_only else (TITLES[kind], CAPTIONS[kind])
    fig.suptitle(f"{title}: {maps.date} → {maps.output_text!r}{note}", fontsize=12)
    fig.supxlabel(caption, fontsize=TICK_POINTS, wrap=True)
    return fig


def _label_panel(ax, layer, head, queries, keys, first_column, last_row, query_label="query"):
    ax.set_label(f"layer {layer} head {head}")
    ax.set_title(f"layer {layer} · head {head}", fontsize=10)
    # every panel has the same axes: write the tokens only on the outer panels
    # (hundreds of tick labels would make saving take seconds)
    ax.set_xticks(range(len(keys)) if last_row else [], keys if last_row else [], fontsize=TICK_POINTS)
    ax.set_yticks(range(len(queries)) if first_column else [], queries if first_column else [],
                  fontsize=TICK_POINTS)
    # '-' turned on its side looks like an apostrophe: only the long special tokens are vertical
    for tick in ax.get_xticklabels():
        tick.set_rotation(90 if tick.get_text() in SPECIAL_TOKENS else 0)
    if last_row:
        ax.set_xlabel("key", fontsize=9)
    if first_column:
        ax.set_ylabel(query_label, fontsize=9)


def heatmap_paths(out_dir, prefix, kinds=KINDS, decoder_only: bool = False) -> dict:
    """kind -> the PNG ``save_attention_heatmaps`` writes for it: ``<prefix>_<kind>.png`` for the
    encoder-decoder, ``<prefix>_decoder-only.png`` for the decoder-only model's one kind, so the
    two architectures never write (or refuse over) each other's pictures in one folder."""
    if decoder_only:
        return {"decoder-self": os.path.join(out_dir, f"{prefix}_decoder-only.png")}
    return {kind: os.path.join(out_dir, f"{prefix}_{kind}.png") for kind in kinds}


def save_attention_heatmaps(model, date: str, out_dir=".", prefix="attention", dpi=DPI,
                            untrained: bool = False, force=True) -> dict:
    """Write ``<prefix>_<kind>.png`` for each kind the encoder-decoder has, or the decoder-only
    model's ``<prefix>_decoder-only.png`` (``heatmap_paths``); returns kind -> SavedFigure.

    An existing PNG is replaced only with ``force`` (``transformer.files.output_file``)."""
    paths = heatmap_paths(out_dir, prefix, attention_kinds(model), is_decoder_only(model))
    make_output_folder(out_dir, "--out-dir")
    check_outputs(paths.values(), force, "--out-dir or --prefix")
    maps = attention_maps(model, date, untrained)
    saved = {}
    for kind, path in paths.items():
        saved[kind] = _save(plot_attention(maps, kind), path, dpi)
    return saved


def _save(fig, path, dpi) -> SavedFigure:
    with atomic_output(path) as tmp:
        fig.savefig(tmp, dpi=dpi)
    return SavedFigure(os.fspath(path), fig)


# --------------------------------------------------------------- training curves
def read_training_log(log_jsonl) -> dict:
    """Steps, losses and training batches' exact match of every logged step, and steps and
    held-out exact match of the eval steps."""
    steps, losses, eval_steps, exact, batch = [], [], [], [], []
    try:
        for number, record, problem in log_lines(log_jsonl):   # FIFOs, devices, huge lines refused
            numbers = [] if record is None else [record.get(key) for key in ("loss", "exact_match")]
            if problem is None and not all(v is None or type(v) in (int, float) for v in numbers):
                problem = "its loss or exact_match is not a number"
            if problem is not None:
                raise ValueError(f"{log_jsonl}, line {number}: not a training-log record ({problem})")
            if record.get("loss") is not None:
                steps.append(record["step"])
                losses.append(record["loss"])
                batch.append(record.get("batch_exact_match"))
            if record.get("exact_match") is not None:
                eval_steps.append(record["step"])
                exact.append(record["exact_match"])
    except RunFolderError as error:
        raise ValueError(str(error)) from None
    if not steps:
        raise ValueError(f"{log_jsonl} holds no training steps")
    return {"steps": steps, "loss": losses, "eval_steps": eval_steps, "exact_match": exact,
            "batch_exact_match": batch}


def _batch_estimate(log, window=4):
    """(steps, %) of the training batches' teacher-forced exact match, averaged over the last
    ``window`` batches as the stopping rule does (``transformer.training.stopping``): every step logs
    it for free, so a default run's curve is readable though it decodes held-out dates once."""
    pairs = [(s, m) for s, m in zip(log["steps"], log["batch_exact_match"]) if m is not None]
    values = np.array([m for _, m in pairs], dtype=float)
    if len(values) < window:
        return [], []
    means = np.convolve(values, np.ones(window) / window, mode="valid")
    return [s for s, _ in pairs[window - 1:]], list(100 * means)


def plot_training_curves(log_jsonl, out_png, dpi=DPI, force=True) -> SavedFigure:
    """Two panels: training loss per step (log scale) and held-out exact match per eval.

    An existing PNG at ``out_png`` is replaced only with ``force`` (``transformer.files.output_file``);
    a path without an extension gets .png, as matplotlib would give it."""
    out_png = os.fspath(out_png)
    if not os.path.splitext(out_png)[1]:
        out_png += ".png"
    check_outputs([out_png], force)
    log = read_training_log(log_jsonl)
    fig = Figure(figsize=(10, 3.8), layout="constrained")
    loss_ax, match_ax = fig.subplots(1, 2, sharex=True)
    loss_ax.plot(log["steps"], log["loss"], linewidth=1)
    loss_ax.set(title="training loss (cross-entropy)", xlabel="step", ylabel="loss", yscale="log")
    match_ax.plot(log["eval_steps"], [100 * m for m in log["exact_match"]], marker="o", zorder=3,
                  label=f"held-out dates ({len(log['eval_steps'])} evaluation"
                        f"{'' if len(log['eval_steps']) == 1 else 's'})")
    match_ax.plot(*_batch_estimate(log), linewidth=1, color="0.55",
                  label="training batches before their update (last 4, teacher-forced)")
    match_ax.set(title="exact match", xlabel="step", ylabel="exact match (%)", ylim=(-2, 102))
    # below the panel, not in it: inside, any place hides part of some run's curves
    match_ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.18), fontsize="small", frameon=False)
    if not log["eval_steps"]:
        match_ax.text(0.5, 0.5, "no eval steps in this log", ha="center", transform=match_ax.transAxes)
    for ax in (loss_ax, match_ax):
        ax.grid(alpha=0.3)
    return _save(fig, out_png, dpi)
