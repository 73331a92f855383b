"""Checkpoints: one ``.npz`` file, written atomically, read without pickle, checked on load.

Layout of the archive:
  model/<dotted parameter name>   the weights
  optim/<name>.<i>                Adam's moment buffers
  meta.json                       UTF-8 JSON as a uint8 array: model config,
                                  training config, step, learning-rate schedule,
                                  optimizer scalars, RNG states, history

Writing goes to a temporary file in the same folder, is fsynced and then renamed over the
target (``os.replace`` is atomic) and the folder is fsynced: an interrupted or failed save
never leaves a half-written checkpoint, and the previous one stays intact. The file gets the
usual permissions (0644 under the default umask), like the training log.

Loading trusts nothing: a FIFO or folder is refused before it is opened, every member's
header is read and checked against its size before any array is allocated (no pickle, no
object arrays), the weights must be finite floating-point numbers, and the stored model
config must be valid and describe exactly as many weights as the file holds. Every problem
is one ``CheckpointError`` naming the file and what is wrong.
"""
import json
import os
import stat
import zipfile

import numpy as np

from .config import ModelConfig

FORMAT_VERSION = 1


class CheckpointError(Exception):
    """A checkpoint is missing, unreadable or does not fit the model."""


# ------------------------------------------------------------------- writing
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
    tmp = os.path.join(folder, f".tmp-{os.getpid()}-{os.urandom(4).hex()}.npz")
    try:
        # os.open with 0o666 lets the umask decide (0644 usually); mkstemp would force 0600
        with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), "wb") as f:
            np.savez(f, **arrays)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:            # also Ctrl-C: the previous checkpoint stays as it was
        try:
            os.remove(tmp)
        except OSError:
            pass
        raise
    _fsync_folder(folder)


def _fsync_folder(folder):
    """Make the rename itself durable (POSIX; a no-op where folders cannot be opened)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


# ------------------------------------------------------------------- reading
def load_checkpoint(path):
    """-> (model_state, optimizer_state, meta); raises CheckpointError with the reason."""
    path = os.fspath(path)
    arrays = _read_arrays(path)
    if "meta.json" not in arrays:
        raise CheckpointError(f"checkpoint {path} has no meta.json entry: not a minigrad checkpoint")
    raw = arrays.pop("meta.json")
    try:
        if raw.dtype != np.uint8:
            raise ValueError(f"meta.json is stored as {raw.dtype}, not bytes")
        meta = json.loads(raw.tobytes().decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as error:
        raise CheckpointError(f"checkpoint {path} has unreadable metadata ({error})") from None
    if not isinstance(meta, dict):
        raise CheckpointError(f"checkpoint {path} has unreadable metadata (meta.json is not a JSON object)")
    if meta.get("format_version") != FORMAT_VERSION:
        raise CheckpointError(f"checkpoint {path} has format version {meta.get('format_version')}, "
                              f"this code reads version {FORMAT_VERSION}")
    model_state = {k[len("model/"):]: v for k, v in arrays.items() if k.startswith("model/")}
    optimizer_state = {k[len("optim/"):]: v for k, v in arrays.items() if k.startswith("optim/")}
    for name, value in [*arrays.items()]:
        if name.startswith(("model/", "optim/")):
            _check_weights(path, name, value)
    _check_model_config(path, meta, model_state)
    scalars = meta.pop("optimizer_scalars", {})
    if not isinstance(scalars, dict):
        raise CheckpointError(f"checkpoint {path} has unreadable metadata (optimizer_scalars is not an object)")
    optimizer_state.update(scalars)
    return model_state, optimizer_state, meta


def _read_arrays(path) -> dict:
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise CheckpointError(f"checkpoint {path} does not exist (train one first, or check the path)") from None
    except OSError as error:
        raise CheckpointError(f"checkpoint {path} cannot be read ({error.strerror or error})") from None
    if not stat.S_ISREG(info.st_mode):
        kind = "a folder" if stat.S_ISDIR(info.st_mode) else "not a regular file"
        raise CheckpointError(f"checkpoint {path} is corrupt or not a minigrad checkpoint ({kind}, "
                              "expected a .npz file)")
    try:
        with open(path, "rb") as f:
            magic = f.read(6)
            if magic.startswith(b"\x93NUMPY"):
                raise CheckpointError(f"checkpoint {path} is a single .npy array, not a minigrad checkpoint "
                                      "(a .npz archive written by dates-train)")
            if not magic.startswith(b"PK"):
                raise CheckpointError(f"checkpoint {path} is corrupt or not a minigrad checkpoint "
                                      "(not a .npz archive)")
            with zipfile.ZipFile(f) as archive:
                return {_array_name(path, member): _read_member(path, archive, member)
                        for member in archive.infolist()}
    except CheckpointError:
        raise
    except (OSError, EOFError, zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError,
            ValueError, RuntimeError) as error:
        raise CheckpointError(f"checkpoint {path} is corrupt or not a minigrad checkpoint ({error})") from None


def _array_name(path, member) -> str:
    if not member.filename.endswith(".npy"):
        raise CheckpointError(f"checkpoint {path} is corrupt or not a minigrad checkpoint "
                              f"(member {member.filename!r} is not a .npy array)")
    return member.filename[:-len(".npy")]


def _read_member(path, archive, member) -> np.ndarray:
    """One .npy member: its header is checked against its stored size before reading, so a
    forged header cannot make us allocate terabytes; object (pickled) arrays are refused."""
    name = member.filename
    with archive.open(member) as f:
        try:
            version = np.lib.format.read_magic(f)
            header = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                      else np.lib.format.read_array_header_2_0)
            shape, _, dtype = header(f)
        except (ValueError, EOFError, SyntaxError, TypeError) as error:
            raise CheckpointError(f"checkpoint {path} is corrupt or not a minigrad checkpoint "
                                  f"(member {name!r} is not a real .npy array: {error})") from None
        if dtype.hasobject:
            raise CheckpointError(f"checkpoint {path} is corrupt or not a minigrad checkpoint "
                                  f"(member {name!r} holds pickled objects, which are never loaded)")
        needed = int(np.prod(shape, dtype=np.float64)) * dtype.itemsize
        if needed > member.file_size:
            raise CheckpointError(f"checkpoint {path} is corrupt or not a minigrad checkpoint (member {name!r} "
                                  f"declares {needed} bytes but holds {member.file_size})")
    with archive.open(member) as f:       # the header is sound: read the data as np.load does
        return np.lib.format.read_array(f, allow_pickle=False)


def _check_weights(path, name, value):
    if value.dtype.kind != "f":
        raise CheckpointError(f"checkpoint {path}: {name} has dtype {value.dtype}, expected floating-point "
                              "weights (float32)")
    bad = int(np.size(value) - np.count_nonzero(np.isfinite(value)))
    if bad:
        raise CheckpointError(f"checkpoint {path}: {name} holds {bad} non-finite values (NaN or inf); "
                              "the run that wrote it diverged")


def _check_model_config(path, meta, model_state):
    """The stored config must be valid and describe the stored weights, before any model is built."""
    if "model_config" not in meta:
        raise CheckpointError(f"checkpoint {path} has no model config: not a minigrad checkpoint")
    try:
        config = ModelConfig.from_dict(meta["model_config"])
    except (ValueError, TypeError) as error:
        raise CheckpointError(f"checkpoint {path} has an invalid model config ({error})") from None
    stored = sum(int(v.size) for v in model_state.values())
    expected = config.num_parameters()
    if stored != expected:
        raise CheckpointError(f"checkpoint {path} does not fit the model it describes (its config "
                              f"means {expected:,} weights, the file holds {stored:,})")
