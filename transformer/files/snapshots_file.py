"""Reading ``attention_snapshots.npz`` as distrustfully as a checkpoint.

The file (its members: ``transformer/training/snapshots.py``) is read by a resumed run, to
continue it, and by ``dates-explore``, to put a training-step slider over it. Either may be
handed a truncated, damaged or forged file, or one of another model; ``read_snapshots`` checks,
in this order, before the data is used:

  - the archive (``npz_archive``): a regular file (a FIFO or device is refused before it is
    opened), member names unique, members stored or deflated as ``np.savez_compressed`` writes
    them, and all of them together at most ``MAX_SNAPSHOT_BYTES`` once inflated (a forged 244 kB
    file once inflated to 3.4 GB); every .npy header within its member;
  - every member's name, dtype and shape against the ``SnapshotLayout`` of the model that reads
    it (its modules, heads and the probe's rows and tokens), before any member's data is read:
    the steps S is the one free size;
  - then the values: the steps increasing from 0 or more, the modules, probe and tokens those
    of the model, the weights finite and in [0, 1] (a softmax's), loss finite or NaN (not
    logged), accuracy in [0, 1] or NaN.

Every problem is one ``SnapshotError`` naming the file and what is wrong.
"""
from dataclasses import dataclass

import numpy as np

from transformer.files.npz_archive import CORRUPT, MISSING, NOT_REGULAR, UNREADABLE, NpzArchive, NpzError

MAX_KINDS = 64        # sentence kinds a next-word run's file scores at each snapshot (it has 5)
# All members together, inflated. A default date run at --snapshot-every 10 stores 0.2 MB; a
# next-word run of 3,000 steps at --snapshot-every 1, ~80 MB.
MAX_SNAPSHOT_BYTES = 256 * 2 ** 20


class SnapshotError(Exception):
    """A snapshots file is unreadable, or does not hold what this code writes for the model."""


@dataclass
class SnapshotLayout:
    """What a model's snapshots file holds, all but the number of steps."""
    probe: list          # the probe rows, in words (P)
    modules: list        # per attention module: (name, kind, layer, heads, query tokens (P, Tq), key tokens (P, Tk))


def read_snapshots(path, layout: SnapshotLayout = None) -> dict:
    """The file's arrays, checked against ``layout`` (module docstring); ``weights``, ``queries``
    and ``keys`` as lists by module, the weights as float32. Without a ``layout`` (a reader with no
    model) the members are checked against each other instead, once read (their total size is
    bounded first). SnapshotError in one line otherwise."""
    try:
        with NpzArchive(path) as npz:
            npz.check_members(compressed=True, max_bytes=MAX_SNAPSHOT_BYTES)
            headers = npz.headers()
            if layout is not None:
                _check_headers(headers, layout)
            data = npz.read()
        if layout is None:
            layout = _own_layout(data)
            _check_headers(headers, layout)
    except NpzError as error:
        raise _unreadable(path, error) from None
    except _Mismatch as error:
        raise SnapshotError(f"{path} holds attention snapshots that do not fit this model ({error})") from None
    except (KeyError, IndexError, TypeError, ValueError) as error:
        raise SnapshotError(f"{path} is not a readable attention snapshots file ({error})") from None
    try:
        _check_values(data, layout)
    except _Mismatch as error:
        raise SnapshotError(f"{path} holds attention snapshots that do not fit this model ({error})") from None
    except ValueError as error:
        raise SnapshotError(f"{path} is not a readable attention snapshots file ({error})") from None
    count = len(layout.modules)
    data["weights"] = [data.pop(f"weights.{m}").astype(np.float32) for m in range(count)]
    data["queries"] = [data.pop(f"queries.{m}") for m in range(count)]
    data["keys"] = [data.pop(f"keys.{m}") for m in range(count)]
    return data


def _own_layout(data: dict) -> SnapshotLayout:
    """The layout a file's own members describe (its probe, modules, heads and tokens)."""
    modules = data["modules"]
    if modules.ndim != 1 or data["kinds"].shape != modules.shape or data["layers"].shape != modules.shape:
        raise ValueError("its modules, kinds and layers are not lists of one length")
    return SnapshotLayout([str(row) for row in data["probe"]],
                          [(str(name), str(kind), int(layer), data[f"weights.{m}"].shape[2],
                            data[f"queries.{m}"], data[f"keys.{m}"])
                           for m, (name, kind, layer) in enumerate(zip(modules, data["kinds"], data["layers"]))])


class _Mismatch(ValueError):
    """A sound file of another model or probe."""


def _unreadable(path, error: NpzError) -> SnapshotError:
    reason = {MISSING: "it does not exist", UNREADABLE: f"it cannot be read: {error.reason}",
              NOT_REGULAR: f"{error.reason}, not a file"}.get(error.kind, error.reason)
    return SnapshotError(f"{path} is not a readable attention snapshots file ({reason})")


# ------------------------------------------------------------ the members
_INT, _FLOAT, _TEXT = "iu", "f", "U"
_KIND_NAMES = {_INT: "integers", _FLOAT: "floating-point numbers", _TEXT: "text"}


def _expected(layout: SnapshotLayout) -> dict:
    """{member: (dtype kinds, shape)}; None in a shape is the number of steps S."""
    rows, count = len(layout.probe), len(layout.modules)
    members = {"steps": (_INT, (None,)), "loss": (_FLOAT, (None,)), "accuracy": (_FLOAT, (None,)),
               "accuracy_name": (_TEXT, ()), "every": (_INT, ()), "probe": (_TEXT, (rows,)),
               "modules": (_TEXT, (count,)), "kinds": (_TEXT, (count,)), "layers": (_INT, (count,))}
    for m, (_, _, _, heads, queries, keys) in enumerate(layout.modules):
        members[f"weights.{m}"] = (_FLOAT, (None, rows, heads, queries.shape[1], keys.shape[1]))
        members[f"queries.{m}"] = (_TEXT, queries.shape)
        members[f"keys.{m}"] = (_TEXT, keys.shape)
    return members


def _check_headers(headers: dict, layout: SnapshotLayout):
    """Every member's name, dtype and shape, before any is read; the steps S must agree across members."""
    expected = _expected(layout)
    if "held_out_kinds" in headers or "held_out_accuracy" in headers:   # a task scored by kind: both or neither
        kinds = headers.get("held_out_kinds", ((0,), None))[0]
        if len(kinds) != 1 or kinds[0] > MAX_KINDS:
            raise NpzError(CORRUPT, f"held_out_kinds has shape {kinds}, not a list of at most {MAX_KINDS} kinds")
        expected["held_out_kinds"] = (_TEXT, kinds)
        expected["held_out_accuracy"] = (_FLOAT, (None, kinds[0]))
    for name in headers:
        if name not in expected:
            raise NpzError(CORRUPT, f"it holds {name!r}, which a snapshots file does not")
    for name, (kinds, shape) in expected.items():
        if name not in headers:
            raise NpzError(CORRUPT, f"it has no {name!r}")
        stored_shape, dtype = headers[name]
        if dtype.kind not in kinds:
            raise NpzError(CORRUPT, f"{name} holds {dtype}, not {_KIND_NAMES[kinds]}")
        if len(stored_shape) != len(shape):
            raise NpzError(CORRUPT, f"{name} has shape {stored_shape}, expected a {len(shape)}-dimensional array")
    steps = headers["steps"][0][0]
    if steps < 1:
        raise NpzError(CORRUPT, "it holds no step")
    for name, (_, shape) in expected.items():
        wanted = tuple(steps if size is None else size for size in shape)
        if headers[name][0] != wanted:
            raise _Mismatch(f"{name} has shape {headers[name][0]}, this model's would be {wanted}"
                            if name.startswith(("weights.", "queries.", "keys.", "probe", "modules")) else
                            f"{name} has shape {headers[name][0]}, expected {wanted} for its {steps} steps")


def _check_values(data: dict, layout: SnapshotLayout):
    steps = data["steps"]
    if steps[0] < 0 or np.any(np.diff(steps) <= 0):
        raise ValueError("its steps are not increasing from 0 or more")
    if not np.all(np.isnan(data["loss"]) | np.isfinite(data["loss"])):
        raise ValueError("its loss holds inf")
    for name in ("accuracy", "held_out_accuracy"):
        accuracy = data.get(name, np.zeros(0))
        if not np.all(np.isnan(accuracy) | ((accuracy >= 0) & (accuracy <= 1))):
            raise ValueError(f"its {name.replace('_', ' ')} holds values outside [0, 1]")
    names = [module[0] for module in layout.modules]
    if data["modules"].tolist() != names:
        raise _Mismatch(f"its modules are {data['modules'].tolist()}, this model's {names}")
    if data["kinds"].tolist() != [module[1] for module in layout.modules] or \
            data["layers"].tolist() != [module[2] for module in layout.modules]:
        raise ValueError("its kinds or layers do not match its modules")
    if data["probe"].tolist() != list(layout.probe):
        raise _Mismatch(f"its probe is {data['probe'].tolist()}, this model's {list(layout.probe)}")
    for m, (name, _, _, _, queries, keys) in enumerate(layout.modules):
        if not (np.array_equal(data[f"queries.{m}"], queries) and np.array_equal(data[f"keys.{m}"], keys)):
            raise _Mismatch(f"the tokens of {name} are not this model's probe's")
        weights = data[f"weights.{m}"]
        if not np.all((weights >= 0) & (weights <= 1)):            # also False for NaN
            raise ValueError(f"weights.{m} holds values outside [0, 1] or NaN: not attention weights")
