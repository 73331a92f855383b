"""``dates-explore`` and ``next-word-explore``: one attention step, forward and backward, in one
HTML page, beside every layer and head watched over the run's training steps.

    dates-explore --date 1845-01-05 --kind decoder-self --layer 0     # -> runs/viz/explorer.html
    next-word-explore                                                 # -> runs/viz/next-word.html
    next-word-explore --serve                                         # type your own sentence

The page (one file: data, styles and scripts inline; no server, no network)
shows the graph of the step laid out in the browser (pan, zoom, fit); a click
on a tensor shows its values, its gradient, the op that made it with its source
line and what that op saved for backward; ← / → step through backward one op at
a time in the engine's order; the attention weights of every layer, kind and
head sit beside it; a switch colours each parameter by a finite-difference check
of its gradient.

    subject.py         what the page runs on: a date or a sentence, checked, and the prediction
    step.py            the step run once, and its backward recorded op by op
    attention_maps.py  every attention module's weights and mask for the input
    check.py           the gradients against central finite differences (float64)
    training_steps.py  the run's attention snapshots, and the head that changed most
    recall_marks.py    a next-word run's recall circuit: the heads to mark, their curves
    ladder_rungs.py    the attention ladder's rungs trained and run on the same sentence
    page.py            the HTML page: page.html, explorer.css, explorer.js, ../vendor/dagre.min.js
    server.py          --serve: the page on 127.0.0.1, a typed input's step on request
    build.py           the page's data, written as a file or served; next_word.py the next-word model's
                       defaults (the two command lines: transformer/commands/explore.py)
"""
from .page import page_html
from .step import StepRecord, explore_step

__all__ = ["explore_step", "StepRecord", "page_html"]
