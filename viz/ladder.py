"""The attention ladder as one picture (matplotlib, no pyplot).

Top: one panel per sentence kind, the rungs down the side, one dot per seed for the held-out
accuracy and a bar at their mean. Bottom left: the pull statistic on the swap kind (how often
the other animal out-pulls the asked one, and the share right in each case). Bottom right:
the separate-maps rung's weights on a swap sentence it gets right, the cells a word may not
look at (later words) greyed.

    attention-ladder --plot docs/images/attention_ladder.png
"""
import numpy as np
from matplotlib.figure import Figure

MASKED = "#d9d9d9"          # the cells above the diagonal: a word never sees a later one


def plot_ladder(result) -> Figure:
    """The figure of ``result`` (a ``transformer.ladder.LadderResult``); ``.savefig`` writes it."""
    kinds = list(result.kinds)
    fig = Figure(figsize=(15, 9), layout="constrained")
    grid = fig.add_gridspec(2, len(kinds), height_ratios=[1.1, 1])
    names = [r.name for r in result.rungs]
    rows = np.arange(len(names))
    for j, kind in enumerate(kinds):
        ax = fig.add_subplot(grid[0, j])
        for i, rung in enumerate(result.rungs):
            values = 100 * np.asarray(rung.accuracy[kind])
            spread = np.linspace(-0.18, 0.18, len(values)) if len(values) > 1 else [0.0]
            ax.scatter(values, i + np.asarray(spread), s=14, color="tab:green", alpha=0.8, zorder=3)
            ax.plot([values.mean()] * 2, [i - 0.32, i + 0.32], color="black", linewidth=1.5, zorder=4)
        ax.set_xlim(-5, 105)
        ax.set_xticks([0, 50, 100])
        ax.set_ylim(len(names) - 0.5, -0.5)
        ax.set_yticks(rows, names if j == 0 else [""] * len(names), fontsize=10)
        ax.grid(axis="x", alpha=0.3)
        ax.set_title(kind, fontsize=11)
        ax.set_xlabel("held-out %", fontsize=9)
    seeds = ", ".join(map(str, result.seeds))
    fig.suptitle(f"held-out next-word accuracy per rung and sentence kind: one dot per seed ({seeds}), "
                 f"a bar at the mean; {result.config.steps} Adam steps per rung", fontsize=12)
    pull_ax = fig.add_subplot(grid[1, :4])
    draw_pull(pull_ax, result)
    weights_ax = fig.add_subplot(grid[1, 4:])
    rungs = {r.name: r for r in result.rungs}
    draw_weights(weights_ax, rungs.get("separate maps") or result.rungs[-1])
    return fig


def draw_pull(ax, result):
    """Bars per rung with scores: the share of swap sentences in which the other animal
    out-pulls the asked one, and the accuracy in each case; one dot per seed."""
    pulled = [r for r in result.rungs if r.pull]
    keys = [("out_pulls", "other animal out-pulls the asked one", "tab:blue"),
            ("right_when_out_pulls", "right, when it does", "tab:green"),
            ("right_when_not", "right, when it does not", "tab:red")]
    width = 0.26
    for k, (key, label, colour) in enumerate(keys):
        for i, rung in enumerate(pulled):
            values = [100 * v for v in rung.pull[key] if v is not None]
            x = i + (k - 1) * width
            if values:
                ax.bar(x, np.mean(values), width, color=colour, alpha=0.35, label=label)
                ax.scatter([x] * len(values), values, s=10, color=colour, zorder=3)
                label = None            # one legend entry per kind of bar
    ax.set_xticks(range(len(pulled)), [r.name for r in pulled], fontsize=10)
    ax.set_ylim(0, 105)
    ax.set_ylabel("% of held-out swap sentences", fontsize=10)
    ax.set_title("the pull statistic: 'the hen and the dog swap voices . now the hen' -> barks needs the dog "
                 "to pull the hen\nharder than the hen pulls itself (bar: mean over seeds, dots: seeds)", fontsize=10)
    ax.legend(fontsize=9, loc="upper left")


def draw_weights(ax, rung):
    """The rung's (T, T) weights on a swap sentence it gets right; later words greyed."""
    example = rung.right_swap
    if not example:
        ax.set_axis_off()
        ax.set_title(f"{rung.name}: no held-out swap sentence right", fontsize=10)
        return
    weights, words = example["weights"], example["words"]
    future = np.triu(np.ones_like(weights, dtype=bool), k=1)
    ax.imshow(np.where(future, np.nan, weights), cmap="Blues", vmin=0, vmax=1)
    ax.imshow(np.where(future, 1.0, np.nan), cmap="Greys", vmin=0, vmax=4)      # a flat light grey
    ax.set_xticks(range(len(words)), words, rotation=90, fontsize=9)
    ax.set_yticks(range(len(words)), words, fontsize=9)
    ax.set_title(f"{rung.name}: weights on a sentence it gets right (-> {example['answer']});\n"
                 "row: the word pulled, column: the word pulling, grey: later words, never seen", fontsize=10)
