"""The attention ladder's trained rungs in one ``.npz`` file, kept so they are trained once.

``next-word-explore`` shows the ladder's rungs (``transformer.ladder.rungs``) beside a run; they
depend only on the language, their seed and their training settings, not on the run, so the
first start trains them and keeps them in a file, and every later start reads them back.

Layout of the archive (written atomically, as a checkpoint is: ``write_npz_atomically``):
  rung<i>/<dotted parameter name>   rung i's weights (float32), in ladder order
  meta.json                         UTF-8 JSON as a uint8 array: ``format_version``, the
                                    ``settings`` they were trained with (compared on reading) and
                                    ``trained`` (when, in how many seconds: only said)

Reading trusts the file no more than a checkpoint (``npz_archive``'s checks: a regular file,
members unique, stored, no larger than the file, no pickle), and before any weight is read,
every member's name, shape and dtype must be those of the rungs this code builds (so the file
is never larger than they are), meta.json at most ``MAX_META_BYTES``; then the stored settings
must equal the ones asked for, and every weight must be finite. Any problem is one
``RungsFileError``: the caller ignores the file, says why in one line and trains again.
"""
import datetime
import json

import numpy as np

from transformer.files.checkpoint import parse_meta_json, write_npz_atomically
from transformer.files.npz_archive import MISSING, NpzArchive, NpzError

FORMAT_VERSION = 1
MAX_META_BYTES = 2 ** 20        # the settings and rung names: a few kB


class RungsFileError(Exception):
    """The file cannot be used: ``missing`` (nothing there yet), or ``reason`` says what is wrong."""

    def __init__(self, reason: str, missing: bool = False):
        super().__init__(reason)
        self.reason, self.missing = reason, missing


def save_rungs(path, models: list, settings: dict, seconds: float):
    """Keep ``models`` (trained rungs, in ladder order) and the ``settings`` they were trained with."""
    arrays = {f"rung{i}/{name}": value for i, model in enumerate(models)
              for name, value in model.state_dict().items()}
    meta = {"format_version": FORMAT_VERSION, "settings": settings,
            "trained": {"seconds": round(seconds, 1), "date": datetime.date.today().isoformat()}}
    arrays["meta.json"] = np.frombuffer(json.dumps(meta).encode("utf-8"), dtype=np.uint8)
    write_npz_atomically(path, arrays)


def load_rungs(path, fresh: list, settings: dict) -> dict:
    """Load the file's weights into ``fresh`` (untrained rungs, in ladder order) after every check
    (module docstring); -> the file's ``trained`` record. RungsFileError otherwise."""
    expected = {f"rung{i}/{name}": (value.shape, value.dtype) for i, model in enumerate(fresh)
                for name, value in model.state_dict().items()}
    most = sum(int(np.prod(shape)) * dtype.itemsize for shape, dtype in expected.values()) + MAX_META_BYTES
    try:
        with NpzArchive(path) as npz:
            npz.check_members(compressed=False, max_bytes=most, limits={"meta.json": MAX_META_BYTES})
            _check_headers(npz.headers(), expected)
            meta = _check_meta(parse_meta_json(npz.read(["meta.json"])["meta.json"]), settings)
            arrays = npz.read(list(expected))
    except NpzError as error:
        raise RungsFileError(f"unreadable: {error.reason}", missing=error.kind == MISSING) from None
    except ValueError as error:         # meta.json that is not a JSON object
        raise RungsFileError(f"unreadable: {error}") from None
    for name, value in arrays.items():
        if not np.all(np.isfinite(value)):
            raise RungsFileError(f"corrupt: {name} holds values that are not finite")
    for i, model in enumerate(fresh):
        prefix = f"rung{i}/"
        model.load_state_dict({name[len(prefix):]: value for name, value in arrays.items()
                               if name.startswith(prefix)})
    return meta["trained"]


def _check_headers(headers: dict, expected: dict):
    if set(headers) != {*expected, "meta.json"}:
        odd = sorted(set(headers) ^ {*expected, "meta.json"})
        raise RungsFileError(f"does not hold the rungs this code builds (members differ: {', '.join(odd[:3])}"
                             + (" ..." if len(odd) > 3 else "") + ")")
    for name, (shape, dtype) in expected.items():
        if headers[name] != (shape, dtype):
            raise RungsFileError(f"does not hold the rungs this code builds ({name} is {headers[name][1]} "
                                 f"{headers[name][0]}, expected {dtype} {shape})")


def _check_meta(meta: dict, settings: dict) -> dict:
    """The stored format and settings must be this code's and the ones asked for."""
    if meta.get("format_version") != FORMAT_VERSION:
        raise RungsFileError(f"written in format {meta.get('format_version')!r}, this code reads {FORMAT_VERSION}")
    stored, wanted = meta.get("settings"), json.loads(json.dumps(settings))    # tuples as JSON lists
    if not isinstance(stored, dict):
        raise RungsFileError("unreadable: it records no settings")
    for key in sorted({*stored, *wanted}):
        if stored.get(key) != wanted.get(key):
            _refuse_setting(key, stored.get(key), wanted.get(key))
    trained = meta.get("trained")
    if not (isinstance(trained, dict) and isinstance(trained.get("date"), str) and len(trained["date"]) <= 32
            and type(trained.get("seconds")) in (int, float) and 0 <= trained["seconds"] < 1e9):
        raise RungsFileError("unreadable: it records no training time")
    return meta


def _refuse_setting(key, stored, wanted):
    def short(value):
        text = json.dumps(value)
        return text if len(text) <= 60 else text[:57] + "..."
    raise RungsFileError(f"trained with {key} {short(stored)}, not {short(wanted)}")
