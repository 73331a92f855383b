"""Pictures and tables of minigrad graphs and the date Transformer's attention.

    graph.py            draw_graph(tensor) -> graphviz.Digraph
    render.py           render(digraph, stem) writes .dot, then .svg/.png when Graphviz's dot is installed
    graph_text.py       escaping and short summaries for graph labels
    details.py          hover tooltips, and the mask nodes of masking ops (their True/False pattern)
    attention_graph.py  the graph of one attention step of the model (CLI: dates-attention-graph)
    backward_animation.py  the backward pass one frame per op (CLI: dates-backward-animation);
                        animation_output.py writes its frames as a GIF and an HTML slider
    explorer/           one attention step, forward and backward, in one interactive HTML page
                        (CLI: dates-explore; its graph laid out in the browser by vendor/dagre.min.js)
    heatmaps.py         attention-weight heatmaps per layer and head, training curves (matplotlib)
    walkthrough.py      tokens -> embeddings -> positions -> Q -> QKᵀ -> softmax, as tables (CLI: dates-explain)
    inputs.py           which model to draw (the newest finished run's checkpoint, one given, or an
                        untrained one) and one date's token ids

Each picture is a function of a model (and a date); its console script (options, one line for
bad input, exit codes) lives in transformer/commands/: attention_graph.py, backward_animation.py,
explain.py, explore.py, heatmaps.py, ladder.py (docs/design.md, "House rules").

Every file they write goes through transformer/files/output_file.py: atomically, and never over a
checkpoint, a log or a file of another kind (an earlier output of their own needs --force).
"""
from .graph import draw_graph
from .render import dot_missing_message, render

__all__ = ["draw_graph", "render", "dot_missing_message"]
