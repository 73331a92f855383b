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

Loading trusts nothing (the archive's checks are ``npz_archive``'s, shared with the attention
snapshots): a FIFO or folder is refused before it is read; member names must
be unique and every member stored uncompressed (``np.savez`` never compresses, so a deflated
member, which could inflate to gigabytes from a small file, is refused before it is read) and
no larger than the file itself; ``meta.json`` is at most ``MAX_META_BYTES`` and at most
``MAX_META_DEPTH`` levels deep; every member's header is checked against its size before any
array is allocated (no pickle, no object arrays) and the headers must declare as many weights as
the stored config describes before any weight is read; the weights and Adam's moment buffers must
be finite floating-point numbers within float32's range (the model's dtype: a float64 1e300
would load as inf); the stored model config must be valid and describe exactly as many
weights as the file holds (and a next-word model's vocabulary be the language's); and every
stored training value a resumed run uses (the step, Adam's step count, betas, eps, weight
decay and moment buffers, the learning-rate schedule, the stopping rule's state and both
random generators' states) is checked for type and range (``_check_training_state``). Every problem is one ``CheckpointError`` naming the file and what
is wrong. ``check_savable`` refuses to write weights that are not finite, so a run that
diverged never replaces the last good checkpoint.
"""
import json
import math
import os
import re

import numpy as np

from transformer.files.npz_archive import (MISSING, NOT_REGULAR, SINGLE_NPY, TOO_LARGE, UNREADABLE, NpzArchive,
                                         NpzError)
from transformer.models.config import model_config_from_dict
from transformer.tasks.dates import check_model_config

FORMAT_VERSION = 1
TASKS = ("dates", "next-word")   # what a model can be trained on (its config's ``task``; an encoder-decoder: dates)
MAX_META_BYTES = 64 * 2 ** 20     # meta.json: configs, schedule, RNG states and the evaluation history
                                  # (~100 bytes per evaluation: 600,000 evaluations fit)
MAX_META_DEPTH = 32               # nesting of meta.json (ours is 4 deep): refused before json parses it
FLOAT32_MAX = float(np.finfo(np.float32).max)


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
    write_npz_atomically(path, arrays)


def write_npz_atomically(path, arrays: dict, compressed: bool = False):
    """``np.savez`` (or ``savez_compressed``) to a temporary file, fsynced, then renamed onto
    ``path``: a reader sees the old file or the new one, never half of one."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    tmp = os.path.join(folder, f".tmp-{os.getpid()}-{os.urandom(4).hex()}.npz")
    try:
        # os.open with 0o666 lets the umask decide (0644 usually); mkstemp would force 0600
        with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), "wb") as f:
            (np.savez_compressed if compressed else np.savez)(f, **arrays)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:            # also Ctrl-C: the previous checkpoint stays as it was
        try:
            os.remove(tmp)
        except OSError:
            pass
        raise
    fsync_folder(folder)


def fsync_folder(folder):
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
    meta = _read_meta(path, arrays.pop("meta.json"))
    version = meta.get("format_version")
    if type(version) is not int or version != FORMAT_VERSION:
        stored = (f"{version!r} (a JSON {_json_kind(version)}, not the number {FORMAT_VERSION})"
                  if type(version) is not int else str(version))
        raise CheckpointError(f"checkpoint {path} has format version {stored}; "
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
    _check_training_state(path, meta, scalars, optimizer_state, model_state)
    optimizer_state.update(scalars)
    return model_state, optimizer_state, meta


def _read_meta(path, raw) -> dict:
    """meta.json's bytes -> a dict (``parse_meta_json``), or CheckpointError."""
    try:
        return parse_meta_json(raw)
    except ValueError as error:
        raise CheckpointError(f"checkpoint {path} has unreadable metadata ({error})") from None


def parse_meta_json(raw) -> dict:
    """A ``meta.json`` member's bytes (a uint8 array, its size bounded by the caller before it was
    read) -> a dict, bounded in depth (checked before parsing: Python's json recurses once per
    level). ValueError, saying what is wrong, otherwise. Shared by every .npz file we write."""
    try:
        if raw.dtype != np.uint8 or raw.ndim != 1:
            raise ValueError(f"meta.json is stored as {raw.dtype} {raw.shape}, not bytes")
        text = raw.tobytes().decode("utf-8")
        depth = _json_depth(text)
        if depth > MAX_META_DEPTH:
            raise ValueError(f"nested {depth} levels deep, more than the {MAX_META_DEPTH} a checkpoint uses")
        meta = json.loads(text)
    except (UnicodeDecodeError, ValueError, RecursionError) as error:
        raise ValueError(str(error)) from None
    if not isinstance(meta, dict):
        raise ValueError("meta.json is not a JSON object")
    return meta


_JSON_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')


def _json_depth(text: str) -> int:
    """The deepest nesting of brackets in a JSON text (brackets inside strings do not count)."""
    depth = deepest = 0
    for token in _JSON_TOKENS.findall(text):
        if token in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif token in "]}":
            depth -= 1
    return deepest


def _json_kind(value) -> str:
    return {str: "string", float: "number", bool: "boolean", list: "array", dict: "object",
            type(None): "null"}.get(type(value), type(value).__name__)


def _read_arrays(path) -> dict:
    """Every array of the archive, read only after the checks of ``npz_archive`` (a regular file,
    members unique, stored, no larger than the file, headers that fit their members) and the
    checkpoint's own (meta.json's size; as many weights as the stored config describes)."""
    try:
        with NpzArchive(path) as npz:
            npz.check_members(compressed=False, limits={"meta.json": MAX_META_BYTES})
            sizes = {name: int(np.prod(shape, dtype=np.float64)) for name, (shape, _) in npz.headers().items()}
            _check_declared_sizes(path, npz, sizes)
            return npz.read()
    except NpzError as error:
        raise _checkpoint_error(path, error) from None


def _checkpoint_error(path, error: NpzError) -> CheckpointError:
    """An archive's problem, in the words of a checkpoint."""
    if error.kind == MISSING:
        return CheckpointError(f"checkpoint {path} does not exist (train one first, or check the path)")
    if error.kind == UNREADABLE:
        return CheckpointError(f"checkpoint {path} cannot be read ({error.reason})")
    if error.kind == TOO_LARGE:
        return CheckpointError(f"checkpoint {path} has unreadable metadata ({error.reason})")
    if error.kind == SINGLE_NPY:
        return CheckpointError(f"checkpoint {path} is a single .npy array, not a minigrad checkpoint "
                               "(a .npz archive written by dates-train)")
    if error.kind == NOT_REGULAR:
        return CheckpointError(f"checkpoint {path} is corrupt or not a minigrad checkpoint ({error.reason}, "
                               "expected a .npz file)")
    reason = error.reason + ("; dates-train writes uncompressed members only" if "is compressed" in error.reason
                             else "")
    return CheckpointError(f"checkpoint {path} is corrupt or not a minigrad checkpoint ({reason})")


def _check_declared_sizes(path, npz, sizes):
    """Before any weight is read: the headers must declare as many weights as the stored
    config describes (and at most two Adam moments per weight), so a file cannot make us
    read more than its model needs. Left to the later checks, which name the problem, when
    meta.json or its config is not sound."""
    if "meta.json" not in sizes:
        return
    try:
        meta = _read_meta(path, npz.read(["meta.json"])["meta.json"])
        expected = _stored_model_config(meta.get("model_config")).num_parameters()
    except (CheckpointError, NpzError, ValueError, TypeError):
        return
    stored = sum(count for name, count in sizes.items() if name.startswith("model/"))
    if stored != expected:
        raise CheckpointError(f"checkpoint {path} does not fit the model it describes (its config "
                              f"means {expected:,} weights, the file holds {stored:,})")
    moments = sum(count for name, count in sizes.items() if name.startswith("optim/"))
    if moments > 2 * expected:
        raise CheckpointError(f"checkpoint {path} has an invalid training state (its optimizer buffers hold "
                              f"{moments:,} values, more than two per weight)")


def _check_weights(path, name, value):
    if value.dtype.kind != "f":
        raise CheckpointError(f"checkpoint {path}: {name} has dtype {value.dtype}, expected floating-point "
                              "weights (float32)")
    bad = int(np.size(value) - np.count_nonzero(np.isfinite(value)))
    if bad:
        raise CheckpointError(f"checkpoint {path}: {name} holds {bad} non-finite values (NaN or inf); "
                              "the run that wrote it diverged")
    if value.dtype.itemsize > 4 and value.size:
        too_big = int(np.count_nonzero(np.abs(value) > FLOAT32_MAX))
        if too_big:
            raise CheckpointError(f"checkpoint {path}: {name} holds {too_big} values beyond float32's range "
                                  f"(|x| > {FLOAT32_MAX:.4g}), which would load as inf")


def check_savable(path, model_state: dict, optimizer_state: dict):
    """Before a save: the weights and moment buffers must be finite. A run that diverged
    (NaN loss) stops here, and ``path`` keeps its last good checkpoint."""
    arrays = [*(("model/" + k, v) for k, v in model_state.items()),
              *(("optim/" + k, v) for k, v in optimizer_state.items() if isinstance(v, np.ndarray))]
    for name, value in arrays:
        bad = int(np.size(value) - np.count_nonzero(np.isfinite(value)))
        if bad:
            raise CheckpointError(f"training diverged: {name} holds {bad} non-finite values (NaN or inf), so "
                                  f"this step was not saved; {path} keeps the last good checkpoint, if any "
                                  "(try a lower --lr or --clip)")


# ----------------------------------------------------- the state a resumed run uses
_MOMENT_KEY = re.compile(r"^(m|v)\.(\d+)$")
_UINT64, _UINT128 = 2 ** 64, 2 ** 128


def _is_int(value) -> bool:
    return type(value) is int


def _is_number(value) -> bool:
    return type(value) in (int, float) and math.isfinite(value)


def _check_training_state(path, meta, scalars, optimizer_state, model_state):
    """Every stored value a resumed run reads, checked for type and range before it is used.
    Values that are absent are left to the reader (``Trainer.resume`` names a missing one)."""
    state = _StateCheck(path)
    _check_progress(state, meta)
    _check_adam(state, scalars, optimizer_state, model_state)
    _check_schedule_and_stopper(state, meta)
    # the random generators (numpy's PCG64, the bit generator behind default_rng)
    for key in ("minigrad_rng", "data_rng"):
        if key in meta and not _valid_pcg64_state(meta[key]):
            state.refuse(f"{key} is not a valid PCG64 random generator state")


class _StateCheck:
    """Refuses a checkpoint's training state with one error naming the file and the bad value."""

    def __init__(self, path):
        self.path = path

    def refuse(self, what):
        raise CheckpointError(f"checkpoint {self.path} has an invalid training state ({what})")

    def check(self, container, where, key, valid, expected):
        if key in container and not valid(container[key]):
            self.refuse(f"{where}{key} is {container[key]!r}, expected {expected}")


def _check_progress(state, meta):
    """The step reached, the training seconds spent and the evaluation records."""
    state.check(meta, "", "step", lambda v: _is_int(v) and v >= 0, "an integer >= 0")
    state.check(meta, "", "elapsed", lambda v: _is_number(v) and v >= 0, "a finite number of seconds >= 0")
    state.check(meta, "", "history", lambda v: isinstance(v, list) and all(isinstance(r, dict) for r in v),
                "a list of evaluation records")


def _check_adam(state, scalars, optimizer_state, model_state):
    """Adam's scalars (optim.Adam.state_dict), then its moment buffers: one (m, v) pair per
    parameter, in parameter (= stored) order."""
    state.check(scalars, "optimizer ", "step_count", lambda v: _is_int(v) and v >= 0, "an integer >= 0")
    state.check(scalars, "optimizer ", "lr", lambda v: _is_number(v) and 0 <= v <= 1, "a number in [0, 1]")
    state.check(scalars, "optimizer ", "betas",
                lambda v: isinstance(v, list) and len(v) == 2 and all(_is_number(b) and 0 <= b < 1 for b in v),
                "two numbers in [0, 1)")
    state.check(scalars, "optimizer ", "eps", lambda v: _is_number(v) and 0 <= v <= 1, "a number in [0, 1]")
    state.check(scalars, "optimizer ", "weight_decay", lambda v: _is_number(v) and v >= 0,
                "a finite number >= 0")
    shapes = [value.shape for value in model_state.values()]
    for key, value in optimizer_state.items():
        match = _MOMENT_KEY.match(key)
        if not match or int(match.group(2)) >= len(shapes):
            state.refuse(f"optim/{key} is not a moment buffer of any of the {len(shapes)} parameters")
        if value.shape != shapes[int(match.group(2))]:
            state.refuse(f"optim/{key} has shape {value.shape}, its parameter {shapes[int(match.group(2))]}")
        if match.group(1) == "v" and value.size and float(value.min()) < 0:
            state.refuse(f"optim/{key}, Adam's second moment, holds negative values")


def _check_schedule_and_stopper(state, meta):
    """The learning-rate schedule (optim.LRSchedule) and the stopping rule (stopping.TargetStop)."""
    def step_or_none(v):
        return v is None or (_is_int(v) and v >= 0)

    schedule = meta.get("schedule", {})
    if not isinstance(schedule, dict):
        state.refuse("schedule is not an object")
    state.check(schedule, "schedule.", "last_step", lambda v: _is_int(v) and v >= 0, "an integer >= 0")
    state.check(schedule, "schedule.", "cooldown_start", step_or_none, "null or an integer >= 0")
    stopper = meta.get("stopper", {})
    if not isinstance(stopper, dict):
        state.refuse("stopper is not an object")
    state.check(stopper, "stopper.", "recent",
                lambda v: isinstance(v, list) and len(v) <= 64 and all(_is_number(x) and 0 <= x <= 1 for x in v),
                "a short list of fractions in [0, 1]")
    for key in ("hit_step", "reached_step"):
        state.check(stopper, "stopper.", key, step_or_none, "null or an integer >= 0")
    state.check(stopper, "stopper.", "last_eval_step", lambda v: _is_int(v) and v >= 0, "an integer >= 0")
    state.check(stopper, "stopper.", "hit_at", lambda v: _is_number(v) and 0 <= v <= 1, "a fraction in [0, 1]")
    state.check(stopper, "stopper.", "reached_seconds", lambda v: v is None or (_is_number(v) and v >= 0),
                "null or a number of seconds >= 0")


def _valid_pcg64_state(state) -> bool:
    if not isinstance(state, dict) or set(state) != {"bit_generator", "state", "has_uint32", "uinteger"}:
        return False
    inner = state["state"]
    if state["bit_generator"] != "PCG64" or not isinstance(inner, dict) or set(inner) != {"state", "inc"}:
        return False
    return (all(_is_int(inner[k]) and 0 <= inner[k] < _UINT128 for k in ("state", "inc"))
            and state["has_uint32"] in (0, 1) and _is_int(state["has_uint32"])
            and _is_int(state["uinteger"]) and 0 <= state["uinteger"] < _UINT64)


def _check_model_config(path, meta, model_state):
    """The stored config must be valid and describe the stored weights, before any model is built."""
    if "model_config" not in meta:
        raise CheckpointError(f"checkpoint {path} has no model config: not a minigrad checkpoint")
    try:
        config = _stored_model_config(meta["model_config"])
    except (ValueError, TypeError) as error:
        raise CheckpointError(f"checkpoint {path} has an invalid model config ({error})") from None
    stored = sum(int(v.size) for v in model_state.values())
    expected = config.num_parameters()
    if stored != expected:
        raise CheckpointError(f"checkpoint {path} does not fit the model it describes (its config "
                              f"means {expected:,} weights, the file holds {stored:,})")
    _check_language(path, config)


def _stored_model_config(values):
    """The stored config (``model_config_from_dict``), checked against the task it was trained on
    (ValueError): the configs hold numbers only, the task knows its vocabulary and lengths."""
    config = model_config_from_dict(values)
    task = getattr(config, "task", "dates")
    if task not in TASKS:
        raise ValueError(f"task must be one of {', '.join(TASKS)}, got {task!r}")
    if task == "dates":
        check_model_config(config)
    return config


def _check_language(path, config):
    """A next-word model reads and writes the generated language: its vocabulary must be the
    language's (ids are positions in ``language.VOCAB``), or its outputs are other words or
    none at all."""
    if getattr(config, "task", "dates") != "next-word":
        return
    from transformer.tasks.language import VOCAB
    if config.vocab_size != len(VOCAB):
        raise CheckpointError(f"checkpoint {path} holds a next-word model with a vocabulary of {config.vocab_size} "
                              f"tokens, not the language's {len(VOCAB)}: it was not written by next-word-train")
