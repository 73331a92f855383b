"""Pictures and tables of minigrad graphs and the date Transformer's attention.

    graph.py            draw_graph(tensor) -> graphviz.Digraph; render() writes .dot (+ .svg/.png)
    attention_graph.py  the graph of one attention step of the model (CLI: dates-attention-graph)
    heatmaps.py         attention-weight heatmaps per layer and head, training curves (matplotlib)
    walkthrough.py      the seed's step-by-step tables for one date (CLI: dates-explain)
    inputs.py           loading a checkpoint or a fresh seeded model, and one date's token ids
"""
from .graph import draw_graph, dot_missing_message, render

__all__ = ["draw_graph", "render", "dot_missing_message"]
