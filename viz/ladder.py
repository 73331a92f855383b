"""The attention ladder as one picture (matplotlib, no pyplot): the table of held-out accuracy
per rung and sentence kind, beside the score matrices of the shared-map and separate-maps rungs
on one swap sentence (the first equals its transpose, the second does not).

    attention-ladder --plot docs/images/attention_ladder.png
"""
import numpy as np
from matplotlib.figure import Figure


def plot_ladder(result, kind: str = "swap") -> Figure:
    """The figure of ``result`` (a ``transformer.ladder.LadderResult``); ``.savefig`` writes it."""
    fig = Figure(figsize=(15, 4.6), layout="constrained")
    table_ax, *score_axes = fig.subplots(1, 3, width_ratios=[1.15, 1, 1])
    kinds = list(result.kinds)
    table = np.array([[r.accuracy[k] for k in kinds] for r in result.rungs])
    table_ax.imshow(table, cmap="Greens", vmin=0, vmax=1)
    for (i, j), value in np.ndenumerate(table):
        table_ax.text(j, i, f"{100 * value:.0f}%", ha="center", va="center", fontsize=10,
                      color="white" if value > 0.7 else "black")
    table_ax.set_xticks(range(len(kinds)), kinds)
    table_ax.set_yticks(range(len(result.rungs)), [r.name for r in result.rungs])
    table_ax.set_title(f"held-out next-word accuracy ({result.config.steps} steps per rung)")
    words = result.probes[kind]
    rungs = {r.name: r for r in result.rungs}
    for ax, name in zip(score_axes, ("shared map", "separate maps")):
        scores = rungs[name].scores[kind]
        limit = np.abs(scores).max()
        ax.imshow(scores, cmap="RdBu_r", vmin=-limit, vmax=limit)
        ax.set_xticks(range(len(words)), words, rotation=90, fontsize=8)
        ax.set_yticks(range(len(words)), words, fontsize=8)
        ax.set_title(f"{name}: scores, max |S - Sᵀ| = {np.abs(scores - scores.T).max():.2g}\n"
                     f"(row: the word pulled, column: the word pulling)", fontsize=10)
    return fig
