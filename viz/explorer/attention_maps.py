"""Every attention module's weights and mask for one date or sentence, head by head, for the
page's heatmaps.

The model runs once on the input (a date teacher-forced on its correct answer, as the
graph's step does; see ``subject.py``); each module's arguments are captured the way
``dates-attention-graph`` captures them, so the mask shown is the one the
module received, broadcast to (queries, keys) and in the project's
convention: True = may attend.
"""
import numpy as np

from ..attention_graph import capture_attention_call, find_attention_module, mask_kind
from ..inputs import attention_kinds
from .subject import as_subject


def attention_maps(model, subject) -> list:
    """One dict per (kind, layer): its module's name, the query and key tokens, the weights
    (heads, queries, keys) of batch element 0, and the mask (queries, keys). ``subject``: a
    date (or sentence) as text, or a ``subject.py`` object."""
    subject = as_subject(model, subject)
    inputs = subject.inputs(model)
    maps = []
    for kind in attention_kinds(model):
        count = len(model.encoder.layers if kind == "encoder-self" else model.decoder.layers)
        for layer in range(count):
            name, module = find_attention_module(model, kind, layer)
            call = capture_attention_call(model, module, inputs)        # runs the model; sets last_weights
            weights = np.asarray(module.last_weights)[0]                # (heads, Tq, Tk)
            queries, keys = subject.labels(model, inputs, kind)
            mask = np.broadcast_to(call.mask, (1, 1, len(queries), len(keys)))[0, 0]
            maps.append({"kind": kind, "layer": layer, "module": name, "queries": queries, "keys": keys,
                         "mask_kind": mask_kind(model, kind), "may_attend": mask.astype(int).tolist(),
                         "weights": np.round(weights.astype(np.float64), 6).tolist()})
    return maps
