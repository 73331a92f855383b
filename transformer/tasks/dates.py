"""The date-rewriting task: vocabulary, encoding, date formatting and the data set.

Task
----
The model reads an ISO date ``YYYY-MM-DD`` and writes it out in English as
``Month D, YYYY`` (no leading zero on the day), e.g. ``1845-01-05`` -> ``January 5, 1845``.
Dates are drawn uniformly from the 730,485 valid calendar days 1000-01-01 .. 2999-12-31
(proleptic Gregorian, as Python's ``datetime.date``). A fixed set of 2,000 of those days is
held out for testing, drawn once from a fixed seed (``held_out_ordinals``), so every run,
minigrad's or the PyTorch twin's in ``examples/compare_with_pytorch.py``, is scored on the
same dates and exact-match figures compare.

Vocabulary (68 tokens, one per character)
-----------------------------------------
    ids      tokens
    0-9      '0'-'9'
    10-35    'A'-'Z'
    36-61    'a'-'z'
    62       '-'
    63       ','
    64       ' '
    65       <sos>   start of sequence
    66       <eos>   end of sequence
    67       <pad>   padding

Padding rule
------------
A text is encoded as ``<sos>``, one token per character, ``<eos>``, then ``<pad>`` up to the
requested length. Sources always fill ``SRC_LEN = 12`` exactly (10 characters + 2 markers);
targets are padded to ``TGT_LEN = 20`` (the longest, e.g. "September 28, 1976", is 18
characters + 2 markers). Decoding stops at the first ``<eos>`` and drops ``<sos>``/``<pad>``.

One sequence for a decoder-only model
-------------------------------------
A decoder-only model reads the date and writes the answer in one sequence: the date's 10
characters, then the target exactly as the encoder-decoder's decoder sees it, ``<sos>`` answer
``<eos>`` ``<pad>``... (``join_for_decoder_only``). ``<sos>`` is the separator: it already means
"the answer starts here", so no token is added and no id changes. The first
``PROMPT_LEN = 11`` tokens (date and separator) are given; the model predicts the rest, and
its loss counts only those. ``DECODER_ONLY_LEN = 30`` positions hold the longest example.

Worked example (the date ``dates-explain`` walks through):

>>> encode("1676-11-30").tolist()
[65, 1, 6, 7, 6, 62, 1, 1, 62, 3, 0, 66]
>>> encode("November 30, 1676", TGT_LEN).tolist()
[65, 23, 50, 57, 40, 48, 37, 40, 53, 64, 3, 0, 63, 64, 1, 6, 7, 6, 66, 67]
>>> decode([65, 23, 50, 57, 40, 48, 37, 40, 53, 64, 3, 0, 63, 64, 1, 6, 7, 6, 66, 67])
'November 30, 1676'
"""

from __future__ import annotations

import calendar
import functools
import random
import re
import string
from collections.abc import Iterable
from datetime import date

import numpy as np

__all__ = [
    "VOCAB", "VOCAB_SIZE", "SOS", "EOS", "PAD", "SRC_LEN", "TGT_LEN", "MONTHS",
    "FIRST_DATE", "LAST_DATE", "N_DAYS", "TEST_SEED", "N_TEST",
    "EncodingError", "DateError",
    "encode", "encode_batch", "decode", "decode_batch",
    "format_date", "parse_iso_date", "translate_reference",
    "held_out_ordinals", "encode_all_days", "DateDataset",
    "PROMPT_LEN", "DECODER_ONLY_LEN", "join_for_decoder_only", "check_model_config",
]

# --------------------------------------------------------------------------------------
# vocabulary
# --------------------------------------------------------------------------------------
_CHARACTERS = string.digits + string.ascii_uppercase + string.ascii_lowercase + "-, "
VOCAB: tuple[str, ...] = tuple(_CHARACTERS) + ("<sos>", "<eos>", "<pad>")
VOCAB_SIZE = 68
SOS, EOS, PAD = 65, 66, 67
SRC_LEN, TGT_LEN = 12, 20
PROMPT_LEN = SRC_LEN - 1                  # decoder-only: the date's 10 characters and the separator <sos>
DECODER_ONLY_LEN = SRC_LEN - 2 + TGT_LEN  # decoder-only: the 10 characters, then a whole target
# Spelled out rather than calendar.month_name, which follows the process locale.
MONTHS: tuple[str, ...] = ("January", "February", "March", "April", "May", "June", "July",
                           "August", "September", "October", "November", "December")

assert len(VOCAB) == VOCAB_SIZE and VOCAB[SOS] == "<sos>" and VOCAB[PAD] == "<pad>"

_ALLOWED = "digits, letters, '-', ',', ' '"

# Byte-level tables so whole batches are encoded/decoded by C loops (bytes.translate,
# numpy indexing) instead of per-character Python code. Control bytes 0/1/2 stand for
# <pad>/<eos>/<sos> while encoding; texts are validated first, so they never contain them.
_PAD_BYTE, _EOS_BYTE, _SOS_BYTE = "\x00", "\x01", "\x02"
_BYTE_TO_ID = bytearray(256)
for _id, _char in enumerate(_CHARACTERS):
    _BYTE_TO_ID[ord(_char)] = _id
_BYTE_TO_ID[0], _BYTE_TO_ID[1], _BYTE_TO_ID[2] = PAD, EOS, SOS
_BYTE_TO_ID = bytes(_BYTE_TO_ID)
_VOCAB_BYTES = _CHARACTERS.encode("ascii")

# id -> byte for decoding: characters map to themselves, <eos> to \x01 (where a row is cut),
# <sos>/<pad> to \x00 (deleted).
_ID_TO_BYTE = np.frombuffer(_VOCAB_BYTES + b"\x00\x01\x00", dtype=np.uint8)


class EncodingError(ValueError):
    """A text cannot be encoded (unknown character, too long) or ids cannot be decoded."""


def _short_repr(text: str, limit: int = 40) -> str:
    """repr() of text, cut short so a huge input cannot flood an error message."""
    return repr(text) if len(text) <= limit else repr(text[:limit]) + "..."


def _first_unknown_char(text: str) -> int | None:
    """Position of the first character outside the vocabulary, or None."""
    # Fast path: deleting every vocabulary byte leaves nothing.
    if text.isascii() and not text.encode("ascii").translate(None, _VOCAB_BYTES):
        return None
    return next(i for i, char in enumerate(text) if char not in _CHARACTERS)


def _check_text(text: str, length: int) -> None:
    """Raise EncodingError if `text` cannot be encoded into `length` tokens."""
    if not isinstance(text, str):
        raise TypeError(f"expected a str to encode, got {type(text).__name__}")
    bad = _first_unknown_char(text)
    if bad is not None:
        raise EncodingError(
            f"{_short_repr(text)}: character {text[bad]!r} at position {bad} "
            f"is not in the vocabulary (allowed: {_ALLOWED})")
    if len(text) + 2 > length:
        raise EncodingError(
            f"{_short_repr(text)}: needs {len(text) + 2} tokens with <sos>/<eos> "
            f"but length is {length}")


def _check_length(length: int) -> None:
    if isinstance(length, bool) or not isinstance(length, (int, np.integer)):
        raise TypeError(f"length must be an int, got {type(length).__name__}")
    if length < 2:
        raise ValueError(f"length must be at least 2 (room for <sos> and <eos>), got {length}")


def _encode_checked(texts: list[str], length: int) -> np.ndarray:
    """Encode already-validated texts into an (N, length) uint8 array of ids."""
    framed = "".join((_SOS_BYTE + text + _EOS_BYTE).ljust(length, _PAD_BYTE) for text in texts)
    ids = np.frombuffer(framed.encode("ascii").translate(_BYTE_TO_ID), dtype=np.uint8)
    return ids.reshape(len(texts), length)


def encode(text: str, length: int | None = None) -> np.ndarray:
    """Encode `text` as int64 ids: <sos>, its characters, <eos>, then <pad> up to `length`.

    Without `length` the result has exactly len(text) + 2 ids. Raises EncodingError for a
    character outside the vocabulary or a text that does not fit in `length`.
    """
    if length is None:
        length = len(text) + 2 if isinstance(text, str) else 2
    _check_length(length)
    _check_text(text, length)
    return _encode_checked([text], length).reshape(-1).astype(np.int64)


def encode_batch(texts: Iterable[str], length: int) -> np.ndarray:
    """Encode many texts at once into an (N, length) int64 array (padded like encode)."""
    texts = list(texts)
    _check_length(length)
    if not _batch_is_encodable(texts, length):
        # Slow path, only taken to build a precise error message.
        for index, text in enumerate(texts):
            try:
                _check_text(text, length)
            except EncodingError as error:
                raise EncodingError(f"texts[{index}] {error}") from None
    return _encode_checked(texts, length).astype(np.int64)


def _batch_is_encodable(texts: list[str], length: int) -> bool:
    if not all(isinstance(text, str) for text in texts):
        raise TypeError("encode_batch expects an iterable of str")
    joined = "".join(texts)
    all_in_vocab = joined.isascii() and not joined.encode("ascii").translate(None, _VOCAB_BYTES)
    return all_in_vocab and max(map(len, texts), default=0) + 2 <= length


def _as_ids(ids, ndim: int) -> np.ndarray:
    """ids as an int64 array of the given rank, with every id checked to be in 0..67."""
    array = np.asarray(ids)
    if array.size == 0 and array.ndim == ndim:
        return array.astype(np.int64)  # np.asarray([]) is float64; an empty list is fine
    if array.ndim != ndim:
        raise ValueError(f"expected a {ndim}-D sequence of token ids, got shape {array.shape}")
    if not np.issubdtype(array.dtype, np.integer):
        raise TypeError(f"token ids must be integers, got dtype {array.dtype}")
    out_of_range = np.argwhere((array < 0) | (array >= VOCAB_SIZE))
    if len(out_of_range):
        where = tuple(int(i) for i in out_of_range[0])
        place = f"position {where[0]}" if ndim == 1 else f"row {where[0]}, position {where[1]}"
        raise EncodingError(
            f"id {int(array[where])} at {place} is not a token id (valid: 0..{VOCAB_SIZE - 1})")
    return array.astype(np.int64, copy=False)


def _bytes_to_text(row: bytes) -> str:
    return row.split(b"\x01", 1)[0].replace(b"\x00", b"").decode("ascii")


def decode(ids) -> str:
    """Ids (list or 1-D array) back to text: stop at the first <eos>, drop <sos>/<pad>."""
    return _bytes_to_text(_ID_TO_BYTE[_as_ids(ids, ndim=1)].tobytes())


def decode_batch(ids_2d) -> list[str]:
    """Decode every row of a 2-D array (or list of equal-length lists) of ids."""
    rows = _ID_TO_BYTE[_as_ids(ids_2d, ndim=2)]
    return [_bytes_to_text(row.tobytes()) for row in rows]


def join_for_decoder_only(src, tgt) -> np.ndarray:
    """Sources (B, 12) and targets (B, 20) -> (B, 30) decoder-only sequences: each date's 10
    characters (its source without <sos>/<eos>), then its target <sos> answer <eos> <pad>...

    >>> join_for_decoder_only(encode("1845-01-05")[None], encode("January 5, 1845", TGT_LEN)[None])[0].tolist()
    [1, 8, 4, 5, 62, 0, 1, 62, 0, 5, 65, 19, 36, 49, 56, 36, 53, 60, 64, 5, 63, 64, 1, 8, 4, 5, 66, 67, 67, 67]
    """
    src, tgt = np.asarray(src), np.asarray(tgt)
    if src.ndim != 2 or tgt.ndim != 2 or src.shape[1] != SRC_LEN or tgt.shape[1] != TGT_LEN \
            or len(src) != len(tgt):
        raise ValueError(f"join_for_decoder_only needs sources (B, {SRC_LEN}) and targets (B, {TGT_LEN}), "
                         f"got {src.shape} and {tgt.shape}")
    return np.concatenate([src[:, 1:-1], tgt], axis=1)


def check_model_config(config):
    """ValueError in one line unless a model of ``config`` (either architecture's) can do the
    date task: its vocabulary is the 68 characters and tokens, its positions hold a date's
    answer (encoder-decoder) or a date and its answer (decoder-only), it pads with ``PAD``.
    The model configs hold numbers only; this is where the date task's numbers are checked."""
    if config.vocab_size != VOCAB_SIZE:
        raise ValueError(f"vocab_size must be {VOCAB_SIZE} (the date vocabulary), got {config.vocab_size}")
    if config.architecture == "decoder-only":
        needed, why = DECODER_ONLY_LEN, f"a date and its answer take {DECODER_ONLY_LEN} positions"
    else:
        needed, why = max(SRC_LEN, TGT_LEN), f"the dates need {max(SRC_LEN, TGT_LEN)} positions"
    if config.max_len < needed:
        raise ValueError(f"max_len must be at least {needed} ({why}), got {config.max_len}")
    if getattr(config, "pad_id", PAD) != PAD:
        raise ValueError(f"pad_id must be {PAD} (the date vocabulary's <pad>), got {config.pad_id}")


# --------------------------------------------------------------------------------------
# dates
# --------------------------------------------------------------------------------------
FIRST_DATE = date(1000, 1, 1)
LAST_DATE = date(2999, 12, 31)
_FIRST_ORDINAL = FIRST_DATE.toordinal()
_LAST_ORDINAL = LAST_DATE.toordinal()
N_DAYS = _LAST_ORDINAL - _FIRST_ORDINAL + 1  # 730,485

# [0-9] rather than \d: \d also matches non-ASCII digits such as '١'.
_ISO_FORM = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})")
_LOOSE_FORM = re.compile(r"([0-9]{1,4})-([0-9]{1,2})-([0-9]{1,2})")


class DateError(ValueError):
    """A text is not a supported ISO date; the message names the text and the problem."""


def format_date(d: date) -> str:
    """The target text for a date: "Month D, YYYY", e.g. date(1845, 1, 5) -> "January 5, 1845"."""
    return f"{MONTHS[d.month - 1]} {d.day}, {d.year}"


def _form_error(text: str) -> DateError:
    message = f"{_short_repr(text)} is not a date in YYYY-MM-DD form"
    loose = _LOOSE_FORM.fullmatch(text.strip())
    if loose:  # e.g. '1996-9-8' or ' 1996-09-08': show the strict spelling
        year, month, day = map(int, loose.groups())
        message += f" (expected e.g. {year:04d}-{month:02d}-{day:02d})"
    return DateError(message)


def parse_iso_date(text: str) -> date:
    """Parse a strict `YYYY-MM-DD` date within 1000-01-01 .. 2999-12-31, else DateError."""
    if not isinstance(text, str):
        raise TypeError(f"expected an ISO date string, got {type(text).__name__}")
    match = _ISO_FORM.fullmatch(text)
    if match is None:
        raise _form_error(text)
    year, month, day = map(int, match.groups())
    if not FIRST_DATE.year <= year <= LAST_DATE.year:
        raise DateError(f"{text!r} is outside the supported range {FIRST_DATE} .. {LAST_DATE} "
                        f"(the model is trained on these dates only)")
    if not 1 <= month <= 12:
        raise DateError(f"{text!r} is not a valid date: month must be 01..12")
    days_in_month = calendar.monthrange(year, month)[1]
    if not 1 <= day <= days_in_month:
        raise DateError(f"{text!r} is not a valid date: day is out of range for month "
                        f"({MONTHS[month - 1]} {year} has {days_in_month} days)")
    return date(year, month, day)


def translate_reference(text: str) -> str:
    """The ground-truth answer for an input: '1845-01-05' -> 'January 5, 1845'."""
    return format_date(parse_iso_date(text))


# --------------------------------------------------------------------------------------
# data set
# --------------------------------------------------------------------------------------
TEST_SEED = 1234
N_TEST = 2000


def held_out_ordinals() -> list[int]:
    """The 2,000 test-day ordinals, in the order ``random.Random(TEST_SEED).sample`` draws them."""
    return random.Random(TEST_SEED).sample(range(_FIRST_ORDINAL, _LAST_ORDINAL + 1), N_TEST)


# The 366 (month, day) pairs of a leap year, in calendar order.
_LEAP_MONTH_DAYS = [(month, day) for month in range(1, 13)
                    for day in range(1, calendar.monthrange(2000, month)[1] + 1)]


def _day_keys() -> tuple[np.ndarray, np.ndarray]:
    """For every day 1000-01-01 .. 2999-12-31 in order: (year - 1000, month-day key).

    The month-day key indexes _LEAP_MONTH_DAYS, the 366 (month, day) pairs of a leap year.
    """
    years = range(FIRST_DATE.year, LAST_DATE.year + 1)
    leap_keys = np.arange(366)
    common_keys = np.delete(leap_keys, 59)  # key 59 is February 29
    month_day = np.concatenate([leap_keys if calendar.isleap(y) else common_keys for y in years])
    year = np.repeat(np.arange(len(years)), [366 if calendar.isleap(y) else 365 for y in years])
    return year, month_day


def _build_all_days() -> tuple[np.ndarray, np.ndarray]:
    # Every text splits into a year part and a month-day part:
    #   source  "<sos>YYYY" + "-MM-DD<eos>"          target  "<sos>Month D, " + "YYYY<eos><pad>..."
    # so encode the 2,000 year parts and 366 month-day parts once, and gather them per day.
    year_key, month_day = _day_keys()
    years = _encode_checked([str(y) for y in range(FIRST_DATE.year, LAST_DATE.year + 1)], 6)
    sos_year, year_eos = years[:, :5], years[:, 1:]  # from "<sos>YYYY<eos>"
    dashed = _encode_checked([f"-{m:02d}-{d:02d}" for m, d in _LEAP_MONTH_DAYS], 8)[:, 1:]
    sources = np.hstack([sos_year[year_key], dashed[month_day]])

    prefixes = [f"{MONTHS[m - 1]} {d}, " for m, d in _LEAP_MONTH_DAYS]
    targets = _encode_checked(prefixes, TGT_LEN)[month_day]  # "<sos>Month D, <eos><pad>..."
    year_start = np.array([len(p) + 1 for p in prefixes])[month_day]  # where that <eos> is
    columns = year_start[:, None] + np.arange(5)
    np.put_along_axis(targets, columns, year_eos[year_key], axis=1)
    return sources, targets


@functools.cache  # built once per process; every DateDataset shares the arrays
def encode_all_days() -> tuple[np.ndarray, np.ndarray]:
    """Sources (N_DAYS, 12) and targets (N_DAYS, 20) of every day, as read-only uint8 ids.

    Row i is the day date.fromordinal(FIRST_DATE.toordinal() + i). Built by numpy gathers
    (no per-day Python), then frozen so that no caller can corrupt the shared cache.
    """
    sources, targets = _build_all_days()
    sources.flags.writeable = False
    targets.flags.writeable = False
    return sources, targets


class DateDataset:
    """Every day 1000-01-01 .. 2999-12-31 encoded, split into training days and 2,000 test days.

    Attributes
      all_src, all_tgt  (730485, 12) / (730485, 20) read-only uint8 ids of every day, in order
      test_idx          (2000,) int64 row numbers of the held-out days, in held_out_ordinals()'s order
      test_src          (2000, 12) int64      test_tgt  (2000, 20) int64
      test_dates        ISO strings of the held-out days ("2265-04-20", ...)
      test_targets      their expected outputs ("April 20, 2265", ...)
      train_idx         (728485,) row numbers of every other day, ascending

    Hand-worked example, 1845-01-05 -> "January 5, 1845":
      source  <sos> 1  8  4  5  -  0  1  -  0  5 <eos>
              65    1  8  4  5  62 0  1  62 0  5 66
      target  <sos> J  a  n  u  a  r  y  ' ' 5 ,  ' ' 1  8  4  5 <eos> <pad> x3
              65    19 36 49 56 36 53 60 64  5 63 64  1  8  4  5 66    67 67 67
    ('J' = 10 + 9, 'a' = 36 + 0, 'n' = 36 + 13, ...). The target has 15 characters, 17 ids
    with <sos>/<eos>, and 3 <pad>s to reach TGT_LEN = 20.

    >>> row = date(1845, 1, 5).toordinal() - FIRST_DATE.toordinal()
    >>> src, tgt = encode_all_days()
    >>> src[row].tolist()
    [65, 1, 8, 4, 5, 62, 0, 1, 62, 0, 5, 66]
    >>> tgt[row].tolist()
    [65, 19, 36, 49, 56, 36, 53, 60, 64, 5, 63, 64, 1, 8, 4, 5, 66, 67, 67, 67]
    """

    def __init__(self) -> None:
        self.all_src, self.all_tgt = encode_all_days()
        test_ordinals = held_out_ordinals()
        self.test_idx = np.array(test_ordinals, dtype=np.int64) - _FIRST_ORDINAL
        test_days = [date.fromordinal(o) for o in test_ordinals]
        self.test_dates = [d.isoformat() for d in test_days]
        self.test_targets = [format_date(d) for d in test_days]
        self.test_src = self.all_src[self.test_idx].astype(np.int64)
        self.test_tgt = self.all_tgt[self.test_idx].astype(np.int64)
        is_train = np.ones(N_DAYS, dtype=bool)
        is_train[self.test_idx] = False
        self.train_idx = np.flatnonzero(is_train).astype(np.int64)

    def sample_batch(self, rng: np.random.Generator, batch_size: int) -> tuple[np.ndarray, np.ndarray]:
        """(src, tgt) int64 arrays of shape (batch_size, 12) / (batch_size, 20).

        Days are drawn uniformly, with replacement, from the training days only, in one
        rng.integers call, so a seeded rng gives the same days.
        """
        if not isinstance(rng, np.random.Generator):
            raise TypeError(f"rng must be a numpy Generator (np.random.default_rng(seed)), "
                            f"got {type(rng).__name__}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        rows = self.train_idx[rng.integers(0, len(self.train_idx), batch_size)]
        return self.all_src[rows].astype(np.int64), self.all_tgt[rows].astype(np.int64)
