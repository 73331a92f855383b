"""Checkpoints: one ``.npz`` file, written atomically, read without pickle.

Layout of the archive:
  model/<dotted parameter name>   the weights
  optim/<name>.<i>                Adam's moment buffers
  meta.json                       UTF-8 JSON as a uint8 array: model config,
                                  training config, step, learning-rate schedule,
                                  optimizer scalars, RNG states, history

Writing goes to a temporary file in the same folder and is then renamed over
the target (``os.replace`` is atomic), so an interrupted save never leaves a
half-written checkpoint. Loading uses ``allow_pickle=False``: a checkpoint can
carry no code.
"""
import json
import os
import tempfile
import zipfile

import numpy as np

FORMAT_VERSION = 1


class CheckpointError(Exception):
    """A checkpoint is missing, unreadable or does not fit the model."""


def save_checkpoint(path, model_state: dict, optimizer_state: dict, meta: dict):
    arrays = {f"model/{name}": value for name, value in model_state.items()}
    scalars = {}
    for key, value in optimizer_state.items():
        if isinstance(value, np.ndarray):
            arrays[f"optim/{key}"] = value
        else:
            scalars[key] = value
    meta = {**meta, "format_version": FORMAT_VERSION, "optimizer_scalars": scalars}
    arrays["meta.json"] = np.frombuffer(json.dumps(meta).encode("utf-8"), dtype=np.uint8)

    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=".npz")
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, **arrays)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def load_checkpoint(path):
    """-> (model_state, optimizer_state, meta); raises CheckpointError with the reason."""
    if not os.path.exists(path):
        raise CheckpointError(f"checkpoint {path} does not exist (train one first, or check the path)")
    try:
        with np.load(path, allow_pickle=False) as archive:
            arrays = {name: archive[name] for name in archive.files}
    except ValueError:
        # numpy says "contains pickled data ... allow_pickle": never the right advice here
        raise CheckpointError(f"checkpoint {path} is corrupt or not a minigrad checkpoint "
                              "(not a readable .npz archive)") from None
    except (OSError, zipfile.BadZipFile, EOFError) as error:
        raise CheckpointError(f"checkpoint {path} is corrupt or not a minigrad checkpoint ({error})") from None
    if "meta.json" not in arrays:
        raise CheckpointError(f"checkpoint {path} has no meta.json entry: not a minigrad checkpoint")
    try:
        meta = json.loads(arrays.pop("meta.json").tobytes().decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise CheckpointError(f"checkpoint {path} has unreadable metadata ({error})") from None
    if not isinstance(meta, dict):
        raise CheckpointError(f"checkpoint {path} has unreadable metadata (meta.json is not a JSON object)")
    if meta.get("format_version") != FORMAT_VERSION:
        raise CheckpointError(f"checkpoint {path} has format version {meta.get('format_version')}, "
                              f"this code reads version {FORMAT_VERSION}")
    model_state = {k[len("model/"):]: v for k, v in arrays.items() if k.startswith("model/")}
    optimizer_state = {k[len("optim/"):]: v for k, v in arrays.items() if k.startswith("optim/")}
    optimizer_state.update(meta.pop("optimizer_scalars", {}))
    return model_state, optimizer_state, meta
