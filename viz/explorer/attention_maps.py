"""Every attention module's weights and mask for one date, head by head, for the page's heatmaps.

The model runs once on the date (teacher-forced on the correct answer, as the
graph's step does); each module's arguments are captured the way
``dates-attention-graph`` captures them, so the mask shown is the one the
module received, broadcast to (queries, keys) and in the project's
convention: True = may attend.
"""
import numpy as np

from ..attention_graph import KINDS, MASK_KINDS, capture_attention_call, find_attention_module
from ..inputs import decoder_input_from_reference, source_ids, token_labels


def attention_maps(model, date) -> list:
    """One dict per (kind, layer): its module's name, the query and key characters, the
    weights (heads, queries, keys) of batch element 0, and the mask (queries, keys)."""
    src, tgt_in = source_ids(date), decoder_input_from_reference(date)
    labels = {"source": token_labels(src), "target": token_labels(tgt_in)}
    maps = []
    for kind in KINDS:
        count = len(model.encoder.layers if kind == "encoder-self" else model.decoder.layers)
        for layer in range(count):
            name, module = find_attention_module(model, kind, layer)
            call = capture_attention_call(model, module, src, tgt_in)   # runs the model; sets last_weights
            weights = np.asarray(module.last_weights)[0]                # (heads, Tq, Tk)
            queries = labels["source" if kind == "encoder-self" else "target"]
            keys = labels["target" if kind == "decoder-self" else "source"]
            mask = np.broadcast_to(call.mask, (1, 1, len(queries), len(keys)))[0, 0]
            maps.append({"kind": kind, "layer": layer, "module": name, "queries": queries, "keys": keys,
                         "mask_kind": MASK_KINDS[kind], "may_attend": mask.astype(int).tolist(),
                         "weights": np.round(weights.astype(np.float64), 6).tolist()})
    return maps
