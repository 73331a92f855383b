"""The recall circuit of a next-word run, for the page: which heads to mark and their curves.

``viz/recall_circuit.py`` measures the circuit from the run's snapshots (the binder's layer-0
heads, the reader's layer-1 head, and the step each part formed); the page frames those heads
in the grid, opens on the reader and on the recall probe the circuit is shown on, and draws the
binder's and the reader's weights beside the accuracy curves, on the same training-step axis.
"""
from viz.recall_circuit import measure_recall_circuit


def _step(value):
    return None if value is None else int(value)


def circuit_data(snapshots) -> dict:
    """The page's ``circuit`` for ``snapshots`` (``load_snapshots``'s dict of a next-word run), or
    None when the run cannot have one (fewer than two layers)."""
    layers = [int(layer) for layer in snapshots["layers"]]
    if 0 not in layers or 1 not in layers:
        return None
    circuit = measure_recall_circuit(snapshots)
    module = {layer: str(snapshots["modules"][layers.index(layer)]) for layer in (0, 1)}
    return {
        "binder": {"module": module[0], "heads": [int(h) for h in circuit.binder_heads],
                   "step": _step(circuit.binder_step), "curve": _rounded(circuit.binding),
                   "places": [{"place": name, "step": _step(step)}
                              for name, step in zip(circuit.place_names, circuit.place_steps)]},
        "reader": {"module": module[1], "head": int(circuit.reader_head), "step": _step(circuit.reader_step),
                   "curve": _rounded(circuit.reading)},
        "recall_step": _step(circuit.recall_step),
        "row": int(circuit.opening_row()),
        "summary": circuit.summary(),
    }


def _rounded(values) -> list:
    return [round(float(v), 4) for v in values]
