"""The heads specialise: each head of the heads rung on a blend sentence, one heatmap per head.

A blend sentence needs three parts from three things (the first thing's colour, the second's
kind, the third's rank). One head moves every word with one W_v and can only weigh the three
things against each other; four heads can each take one role. The picture shows the heads
rung (seed 0, the ladder's training) on the ladder's blend probe sentence: row t is what
position t takes from each earlier word, later words greyed, and each panel's title names the
role its head reads from the last row (``transformer.ladder.head_roles``) with its weight on
this sentence and its mean over the seed's held-out blend sentences.

    python examples/ladder_sources.py --picture docs/images/blend_heads.png --force

The titles are also written into the PNG's text (key ``Labels``, JSON; ``Arithmetic``: the BLAS
kernels and vector width that trained it), so a test can compare
the committed picture with what today's code draws.
"""
import json

import numpy as np
from matplotlib.figure import Figure

from viz.ladder import MASKED

LABELS_KEY = "Labels"
ARITHMETIC_KEY = "Arithmetic"      # what rounded the training's floats (another machine may train other heads)


def head_titles(roles: dict, weights: np.ndarray, example) -> list:
    """One title per head: the role it reads, and its weight on that role's thing here and on
    average. ``weights``: (heads, T, T) on ``example``; ``roles``: ``head_roles``'s result."""
    from transformer.ladder.head_roles import BLEND_ROLES, role_of, role_positions
    positions = role_positions(example)
    last = example.answer_index
    titles = []
    for head in range(weights.shape[0]):
        role = role_of(roles, head)
        if role is None:         # on this sentence it may still read one thing: say both
            best = max(BLEND_ROLES, key=lambda r: roles[r][head])
            at = positions[BLEND_ROLES.index(best)]
            titles.append(f"head {head}: no one role (mean {roles[best][head]:.2f} on the {best}'s thing; "
                          f"here '{example.words[at - 1]}' {weights[head, last, at]:.2f})")
            continue
        at = positions[BLEND_ROLES.index(role)]
        titles.append(f"head {head} reads the {role}'s thing: '{example.words[at - 1]}' {weights[head, last, at]:.2f}"
                      f" (mean {roles[role][head]:.2f})")
    return titles


def blend_heads_figure(model, language):
    """(the Figure, its labels): the heads of ``model`` (a heads rung) on ``language``'s blend probe."""
    from transformer.ladder.experiment import predict, probe_examples
    from transformer.ladder.head_roles import head_roles, head_weights
    from transformer.tasks.language import VOCAB
    example = probe_examples(language)["blend"]
    length = example.answer_index + 1
    weights = head_weights(model, [example])[0, :, :length, :length]            # (heads, T, T)
    roles = head_roles(model, language, per_kind=200)
    titles = head_titles(roles, weights, example)
    words = ("<bos>",) + example.context
    predicted = VOCAB[predict(model, [example])[0]]
    fig = Figure(figsize=(15, 14), layout="constrained")
    future = np.triu(np.ones((length, length), dtype=bool), k=1)
    for head, ax in enumerate(fig.subplots(2, 2).flat):
        ax.set_facecolor(MASKED)
        image = ax.imshow(np.where(future, np.nan, weights[head]), cmap="Blues", vmin=0, vmax=1)
        ax.set_xticks(range(length), words, rotation=90, fontsize=8)
        ax.set_yticks(range(length), words, fontsize=8)
        ax.set_title(titles[head], fontsize=10)
        ax.set_xlabel("word looked at", fontsize=9)
        ax.set_ylabel("position (its row: what it takes)", fontsize=9)
    fig.colorbar(image, ax=fig.axes, shrink=0.5, label="weight")
    fig.suptitle(f"the heads rung (seed 0) on: {' '.join(example.context)} -> '{predicted}' "
                 f"(answer '{example.answer}'); means over 200 held-out blend sentences", fontsize=11)
    return fig, titles + [f"predicts {predicted}, answer {example.answer}"]


def save_blend_heads(path, config):
    """Train the heads rung on ``config.seeds[0]`` as the ladder does and write its picture to ``path``."""
    from threadpoolctl import threadpool_limits

    from transformer.files.output_file import atomic_output
    from transformer.ladder.experiment import train_rung
    from transformer.ladder.rungs import Heads
    from transformer.parallel.threads import arithmetic
    from transformer.tasks.language import Language
    seed = config.seeds[0]
    language = Language(seed=seed, kinds=config.kinds)
    with threadpool_limits(limits=1, user_api="blas"):        # one BLAS thread, as the ladder trains: the same bits
        fig, labels = blend_heads_figure(train_rung(Heads, config, language, seed), language)
    with atomic_output(path) as tmp:
        fig.savefig(tmp, format="png", dpi=80, metadata={LABELS_KEY: json.dumps(labels), ARITHMETIC_KEY: arithmetic()})
    return labels


def picture_labels(path) -> tuple:
    """(the labels, the arithmetic) a picture written by ``save_blend_heads`` carries."""
    from PIL import Image
    with Image.open(path) as image:
        return json.loads(image.text[LABELS_KEY]), image.text[ARITHMETIC_KEY]
