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

Checkpoints written before attention packed its projections (``w_q``, ``w_k``, ``w_v`` in
every attention module) load too: ``convert_legacy_attention`` joins the matrices into
today's ``w_qkv`` / ``w_kv`` as the file is read, with Adam's moment buffers.
"""
import json
import os
import re
import stat
import zipfile

import numpy as np

from .attention import PACKED_PROJECTIONS
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
    model_state, optimizer_state = convert_legacy_attention(path, model_state, optimizer_state)
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


# --------------------------------------------- checkpoints from before packed attention
# which packed projection each attention module of the model has today
PACKED_IN_MODULE = {"self_attn": "w_qkv", "cross_attn": "w_kv"}
_BUFFER_KEY = re.compile(r"^(\w+)\.(\d+)$")       # optimizer buffers: 'm.12' = Adam's m of parameter 12


def convert_legacy_attention(path, model_state: dict, optimizer_state: dict):
    """Old layout -> packed layout: every '<module>.self_attn.w_q|w_k|w_v.<weight|bias>' becomes
    one '<module>.self_attn.w_qkv.<...>' (the three side by side, in that order) and
    'cross_attn.w_k|w_v' becomes 'cross_attn.w_kv'. The optimizer's buffers ('m.<i>', indexed in
    parameter order, which is the order the weights are stored in) are joined and renumbered
    the same way. A checkpoint already in the packed layout is returned as it is."""
    names = list(model_state)
    if not any(_packed_home(name) for name in names):
        return model_state, optimizer_state
    new_order, sources = [], {}                 # packed (or unchanged) name -> the stored names it joins
    for name in names:
        home = _packed_home(name)
        if home is None:
            new_order.append(name)
            sources[name] = [name]
        elif home not in sources:
            if home in model_state:
                raise CheckpointError(f"checkpoint {path} holds both {home} and the old-layout {name}")
            parts = [_legacy_name(home, part) for part in PACKED_PROJECTIONS[home.split(".")[-2]]]
            missing = [part for part in parts if part not in model_state]
            if missing:
                raise CheckpointError(f"checkpoint {path} has an old-layout attention without {', '.join(missing)}")
            new_order.append(home)
            sources[home] = parts
    converted = {}
    for name in new_order:
        arrays = [model_state[part] for part in sources[name]]
        if len(arrays) > 1 and (len({a.shape for a in arrays}) != 1 or arrays[0].ndim not in (1, 2)):
            raise CheckpointError(f"checkpoint {path}: cannot join {', '.join(sources[name])} into {name}: shapes "
                                  f"{', '.join(str(a.shape) for a in arrays)} (expected equal (d, d) or (d,))")
        converted[name] = arrays[0] if len(arrays) == 1 else np.concatenate(arrays, axis=-1)
    return converted, _renumber_buffers(path, optimizer_state, names, new_order, sources, model_state)


def _packed_home(name):
    """'decoder.layers.0.self_attn.w_k.bias' -> 'decoder.layers.0.self_attn.w_qkv.bias': the packed
    parameter an old-layout name belongs in; None for any other name."""
    if name.count(".") < 2:
        return None
    *prefix, module, linear, kind = name.split(".")
    packed = PACKED_IN_MODULE.get(module)
    if packed is None or linear not in PACKED_PROJECTIONS[packed]:
        return None
    return ".".join([*prefix, module, packed, kind])


def _legacy_name(packed_name, linear):
    *prefix, _, kind = packed_name.split(".")
    return ".".join([*prefix, linear, kind])


def _renumber_buffers(path, optimizer_state, old_order, new_order, sources, model_state):
    old_index = {name: i for i, name in enumerate(old_order)}
    buffers, converted = {}, {}
    for key, value in optimizer_state.items():
        match = _BUFFER_KEY.match(key)
        if match and isinstance(value, np.ndarray):
            buffers.setdefault(match.group(1), {})[int(match.group(2))] = value
        else:
            converted[key] = value
    for buffer, by_index in buffers.items():
        for new_index, name in enumerate(new_order):
            parts = [by_index.get(old_index[part]) for part in sources[name]]
            if all(part is None for part in parts):
                continue                        # no update yet: the optimizer starts this one afresh
            parts = [np.zeros_like(model_state[n]) if part is None else part for n, part in zip(sources[name], parts)]
            if len({part.shape for part in parts}) != 1:
                raise CheckpointError(f"checkpoint {path}: the optimizer's {buffer} buffers of "
                                      f"{', '.join(sources[name])} have shapes "
                                      f"{', '.join(str(part.shape) for part in parts)}, expected equal")
            converted[f"{buffer}.{new_index}"] = parts[0] if len(parts) == 1 else np.concatenate(parts, axis=-1)
    return converted
