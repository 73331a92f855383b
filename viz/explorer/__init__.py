"""``dates-explore``: one attention step of the date model, forward and backward, in one HTML page.

    dates-explore --date 1845-01-05 --kind decoder-self --layer 0     # -> runs/viz/explorer.html

The page (one file: data, styles and scripts inline; no server, no network)
shows the graph of the step laid out in the browser (pan, zoom, fit); a click
on a tensor shows its values, its gradient, the op that made it with its source
line and what that op saved for backward; ← / → step through backward one op at
a time in the engine's order; the attention weights of every layer, kind and
head sit beside it; a switch colours each parameter by a finite-difference check
of its gradient.

    step.py            the step run once, and its backward recorded op by op
    attention_maps.py  every attention module's weights and mask for the date
    check.py           the gradients against central finite differences (float64)
    page.py            the HTML page: page.html, explorer.css, explorer.js, ../vendor/dagre.min.js
    cli.py             the command line
"""
from .page import page_html
from .step import StepRecord, explore_step

__all__ = ["explore_step", "StepRecord", "page_html"]
