"""The attention snapshots of the checkpoint's run, for the page's training-step slider.

``dates-train --snapshot-every N`` records every attention module's weights on a probe date
while the run trains (``transformer.training.snapshots``). The page shows them under a slider from the
first recorded step to the last, each module's mask and tokens those of the probe date (a mask
depends on the input only, never on the weights).
"""
import math

import numpy as np

from transformer.training.snapshots import PROBE_DATE, load_snapshots

from .attention_maps import attention_maps
from .step import encode


def snapshot_data(model, path) -> dict:
    """The page's ``snapshots``: the steps, loss and accuracy at each (None where not logged),
    and per module the probe's tokens and mask with every step's weights of probe row 0,
    (steps, heads, queries, keys) as float32 (``encode``: the recorded float16 values exactly)."""
    snapshots = load_snapshots(path, model)
    probe_maps = {m["module"]: m for m in attention_maps(model, PROBE_DATE)}
    modules = []
    for name, weights in zip(snapshots["modules"], snapshots["weights"]):
        probe = probe_maps.get(str(name))
        if probe is None or weights.shape[3:] != (len(probe["queries"]), len(probe["keys"])):
            raise ValueError(f"the snapshots in {path} are not of this model's attention "
                             f"(module {name}, weights {weights.shape[3:]})")
        modules.append({key: probe[key] for key in ("module", "kind", "layer", "queries", "keys", "mask_kind",
                                                     "may_attend")} | {"weights": encode(weights[:, 0])})
    return {"probe": str(snapshots["probe"][0]), "steps": snapshots["steps"].tolist(),
            "loss": _numbers(snapshots["loss"]), "accuracy": _numbers(snapshots["accuracy"]),
            "accuracy_name": str(snapshots["accuracy_name"]), "modules": modules}


def _numbers(values) -> list:
    """Floats for JSON, None for NaN (a step where it was not logged)."""
    return [None if math.isnan(v) else float(v) for v in np.asarray(values, dtype=np.float64)]
