"""The attention snapshots of the checkpoint's run, for the page's training-step grid and curves.

``dates-train --snapshot-every N`` (and ``next-word-train``) records every attention module's
weights on its probe rows while the run trains (``transformer.training.snapshots``). The page shows
them, every layer and head at once, under a slider and a play button from the first recorded
step to the last, beside the loss and accuracy curves. Each module's mask and tokens are
those of the probe row (a mask depends on the input only, never on the weights).

A date page opens on the head whose weights change most over training: for every (module, head)
the mean absolute difference between its first and last recorded weights, over the real
tokens of each probe row, averaged over the rows (``changes``). A next-word page opens on its
run's recall circuit instead (``recall_marks.py``).
"""
import base64
import math

import numpy as np

from transformer.training.snapshots import PROBE_DATE, date_probe, load_snapshots, sentence_probe

from .attention_maps import attention_maps
from .recall_marks import circuit_data
from .subject import DateSubject, SentenceSubject, is_next_word



def snapshot_probe(model):
    """The probe a run of ``model``'s task records (the task trainer's ``snapshot_probe``)."""
    if getattr(model.config, "task", "dates") == "next-word":
        from transformer.training.next_word import KINDS
        return sentence_probe(model, KINDS)
    return date_probe(model)

def encode_fractions(array: np.ndarray) -> dict:
    """Weights in [0, 1] as base64 of one byte each, round(255 w): a quarter of float32's bytes,
    and the heatmap's own resolution (a shade is one of 256)."""
    data = np.round(np.clip(np.asarray(array, dtype=np.float64), 0, 1) * 255).astype(np.uint8)
    return {"dtype": "u1", "b64": base64.b64encode(np.ascontiguousarray(data).tobytes()).decode("ascii")}


def probe_subjects(model, probe_rows) -> list:
    """The subject of each probe row: the probe date, or the row's sentence ('recall: ann is ...')."""
    if not is_next_word(model):
        return [DateSubject(PROBE_DATE)] * len(probe_rows)
    return [SentenceSubject(str(row).split(": ", 1)[1].split()) for row in probe_rows]


def changes(weights, lengths) -> np.ndarray:
    """(modules, heads): how much each head's weights moved from the first step to the last,
    mean |last - first| over each row's real (queries, keys), averaged over the probe rows."""
    result = []
    for w, sizes in zip(weights, lengths):                      # w: (S, P, heads, Tq, Tk)
        per_row = [np.abs(w[-1, p, :, :q, :k] - w[0, p, :, :q, :k]).mean(axis=(1, 2)) for p, (q, k) in enumerate(sizes)]
        result.append(np.mean(per_row, axis=0))
    return np.array(result)


def snapshot_data(model, path) -> dict:
    """The page's ``snapshots``: the steps, loss and accuracies at each (None where not logged),
    per probe row its text and per module its tokens, mask and every step's weights
    (steps, heads, queries, keys) as bytes (``encode_fractions``), the heads ranked by change, and
    for a next-word run its recall circuit (``recall_marks.circuit_data``)."""
    snapshots = load_snapshots(path, model, snapshot_probe(model))
    subjects = probe_subjects(model, snapshots["probe"])
    rows, lengths = [], [[] for _ in snapshots["modules"]]
    for p, subject in enumerate(subjects):
        maps = {m["module"]: m for m in attention_maps(model, subject)}
        modules = []
        for m, (name, weights) in enumerate(zip(snapshots["modules"], snapshots["weights"])):
            probe = maps.get(str(name))
            q, k = (len(probe["queries"]), len(probe["keys"])) if probe else (0, 0)
            if probe is None or list(snapshots["queries"][m][p][:q]) != probe["queries"] \
                    or list(snapshots["keys"][m][p][:k]) != probe["keys"]:
                raise ValueError(f"the snapshots in {path} are not of this model's attention "
                                 f"(module {name}, weights {weights.shape[3:]})")
            lengths[m].append((q, k))
            modules.append({key: probe[key] for key in ("module", "kind", "layer", "queries", "keys", "mask_kind",
                                                         "may_attend")}
                           | {"weights": encode_fractions(weights[:, p, :, :q, :k])})
        rows.append({"text": str(snapshots["probe"][p]), "subject": subject.text, "modules": modules})
    moved = changes(snapshots["weights"], lengths)
    ranked = sorted(np.ndindex(*moved.shape), key=lambda mh: -moved[mh])
    kinds = snapshots.get("held_out_kinds")
    circuit = circuit_data(snapshots) if is_next_word(model) else None
    return {"probe": rows[0]["text"], "rows": rows, "steps": snapshots["steps"].tolist(),
            "loss": _numbers(snapshots["loss"]), "accuracy": _numbers(snapshots["accuracy"]),
            "accuracy_name": str(snapshots["accuracy_name"]),
            "kinds": [] if kinds is None else [str(k) for k in kinds],
            "kind_accuracy": [] if kinds is None else [_numbers(column) for column in snapshots["held_out_accuracy"].T],
            "changes": [{"module": str(snapshots["modules"][m]), "head": int(h), "change": round(float(moved[m, h]), 5)}
                        for m, h in ranked]} | ({"circuit": circuit} if circuit else {})


def _numbers(values) -> list:
    """Floats for JSON, None for NaN (a step where it was not logged)."""
    return [None if math.isnan(v) else float(v) for v in np.asarray(values, dtype=np.float64)]
