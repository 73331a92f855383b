"""Tests for transformer.tasks.dates: vocabulary, encoding, date handling and the data set."""

import doctest
import hashlib
import string
from datetime import date, timedelta

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from transformer.tasks import dates
from transformer.tasks.dates import (
    EOS, PAD, SOS, SRC_LEN, TGT_LEN, VOCAB, VOCAB_SIZE, DateDataset, DateError, EncodingError,
    decode, decode_batch, encode, encode_batch, encode_all_days, format_date, parse_iso_date,
    translate_reference,
)

supported_dates = st.dates(min_value=date(1000, 1, 1), max_value=date(2999, 12, 31))
vocab_text = st.text(alphabet=string.ascii_letters + string.digits + "-, ", max_size=18)


@pytest.fixture(scope="module")
def dataset():
    return DateDataset()


@pytest.fixture(scope="module")
def every_day():
    """All 730,485 supported days, built independently of the module (plain datetime)."""
    first = date(1000, 1, 1)
    return [first + timedelta(days=i) for i in range((date(2999, 12, 31) - first).days + 1)]


# ---------------------------------------------------------------- worked examples, vocabulary

def test_worked_source_example():
    assert encode("1676-11-30").tolist() == [65, 1, 6, 7, 6, 62, 1, 1, 62, 3, 0, 66]


def test_worked_target_example():
    assert encode("November 30, 1676", 20).tolist() == [
        65, 23, 50, 57, 40, 48, 37, 40, 53, 64, 3, 0, 63, 64, 1, 6, 7, 6, 66, 67]


def test_encode_returns_int64():
    assert encode("1676-11-30").dtype == np.int64


def test_vocabulary_size_order_and_specials():
    assert VOCAB_SIZE == 68 and len(VOCAB) == 68
    expected = list("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz-, ")
    assert list(VOCAB) == expected + ["<sos>", "<eos>", "<pad>"]
    assert (SOS, EOS, PAD) == (65, 66, 67)
    assert (SRC_LEN, TGT_LEN) == (12, 20)


@pytest.mark.parametrize("char, token_id", [
    ("0", 0), ("9", 9), ("A", 10), ("Z", 35), ("a", 36), ("z", 61), ("-", 62), (",", 63),
    (" ", 64)])
def test_character_ids_match_spec(char, token_id):
    assert encode(char).tolist() == [SOS, token_id, EOS]


def test_every_character_encodes_to_its_vocab_index():
    characters = "".join(VOCAB[:65])
    assert encode(characters)[1:-1].tolist() == list(range(65))


def test_months():
    assert dates.MONTHS[0] == "January" and dates.MONTHS[8] == "September"
    assert len(dates.MONTHS) == 12


def test_docstring_examples_hold():
    result = doctest.testmod(dates)
    assert result.attempted >= 5 and result.failed == 0


# ---------------------------------------------------------------- encode / decode

def test_padding_fills_up_to_length():
    assert encode("ab", 7).tolist() == [SOS, 36, 37, EOS, PAD, PAD, PAD]


def test_decode_stops_at_first_eos_and_drops_sos_and_pad():
    ids = [SOS, 10, PAD, 11, SOS, EOS, 12, EOS, PAD]
    assert decode(ids) == "AB"
    assert decode(np.array(ids, dtype=np.int32)) == "AB"


def test_decode_without_eos_reads_to_the_end():
    assert decode([SOS, 1, 2, PAD]) == "12"


@settings(max_examples=200, deadline=None)
@given(supported_dates)
def test_round_trip_for_random_dates(day):
    source, target = day.isoformat(), format_date(day)
    encoded_source = encode(source, SRC_LEN)
    assert (encoded_source != PAD).all()  # a source fills all 12 positions
    assert decode(encoded_source) == source
    assert decode(encode(target, TGT_LEN)) == target


@settings(max_examples=100, deadline=None)
@given(st.lists(vocab_text, max_size=8), st.integers(min_value=20, max_value=24))
def test_encode_batch_equals_encode_per_item(texts, length):
    batch = encode_batch(texts, length)
    assert batch.dtype == np.int64 and batch.shape == (len(texts), length)
    for row, text in zip(batch, texts):
        assert row.tolist() == encode(text, length).tolist()
    assert decode_batch(batch) == texts


def test_decode_batch_accepts_lists():
    assert decode_batch([[SOS, 1, EOS, PAD], [SOS, 10, 36, EOS]]) == ["1", "Aa"]


def test_empty_inputs():
    assert encode_batch([], 12).shape == (0, 12)
    assert decode([]) == ""
    assert encode("").tolist() == [SOS, EOS]


# ---------------------------------------------------------------- encoding errors

def test_unknown_character_names_character_and_position():
    with pytest.raises(ValueError) as caught:
        encode("1845/01/05")
    assert str(caught.value) == ("'1845/01/05': character '/' at position 4 is not in the "
                                 "vocabulary (allowed: digits, letters, '-', ',', ' ')")
    assert isinstance(caught.value, EncodingError)


def test_unknown_non_ascii_character():
    with pytest.raises(EncodingError, match=r"character 'é' at position 2 "):
        encode("Aoé")


def test_control_characters_are_rejected_not_read_as_markers():
    # \x00-\x02 are used internally for <pad>/<eos>/<sos>; they must never leak through.
    with pytest.raises(EncodingError, match=r"character '\\x01' at position 1"):
        encode_batch(["ab", "a\x01"], 10)


def test_too_long_names_both_lengths():
    with pytest.raises(EncodingError) as caught:
        encode("September 28, 1976 AD", 20)
    assert "needs 23 tokens with <sos>/<eos> but length is 20" in str(caught.value)
    assert "'September 28, 1976 AD'" in str(caught.value)


def test_encode_batch_errors_name_the_item():
    with pytest.raises(EncodingError, match=r"^texts\[1\] 'x/y': character '/' at position 1"):
        encode_batch(["ok", "x/y"], 12)
    with pytest.raises(EncodingError, match=r"^texts\[2\] .*needs 13 tokens .* length is 12"):
        encode_batch(["ok", "fine", "eleven char"], 12)


def test_encode_rejects_non_strings_and_tiny_lengths():
    with pytest.raises(TypeError):
        encode(1845)
    with pytest.raises(ValueError, match="at least 2"):
        encode_batch([], 1)


@pytest.mark.parametrize("bad_id", [68, -1, 1000])
def test_decode_rejects_out_of_range_id_naming_it_and_its_position(bad_id):
    with pytest.raises(ValueError, match=rf"^id {bad_id} at position 2 is not a token id"):
        decode([SOS, 1, bad_id, EOS])


def test_decode_batch_names_row_and_position():
    with pytest.raises(EncodingError, match=r"id 70 at row 1, position 0"):
        decode_batch(np.array([[1, 2], [70, 3]]))


def test_decode_rejects_non_integer_ids_and_wrong_rank():
    with pytest.raises(TypeError, match="integers"):
        decode([1.5, 2.0])
    with pytest.raises(ValueError, match="1-D"):
        decode([[1, 2]])


# ---------------------------------------------------------------- dates

@pytest.mark.parametrize("day, text", [
    (date(1845, 1, 5), "January 5, 1845"),
    (date(1976, 9, 28), "September 28, 1976"),
    (date(1676, 11, 30), "November 30, 1676"),
    (date(1000, 5, 1), "May 1, 1000"),
])
def test_format_date(day, text):
    assert format_date(day) == text


def test_translate_reference():
    assert translate_reference("1845-01-05") == "January 5, 1845"
    assert translate_reference("2000-02-29") == "February 29, 2000"


@settings(max_examples=200, deadline=None)
@given(supported_dates)
def test_parse_iso_date_inverts_isoformat(day):
    assert parse_iso_date(day.isoformat()) == day


def test_target_lengths_over_all_days(every_day):
    lengths = [len(format_date(day)) for day in every_day]
    assert max(lengths) == 18 and min(lengths) == 11
    assert max(lengths) + 2 <= TGT_LEN


def test_invalid_day_names_date_and_reason():
    with pytest.raises(DateError) as caught:
        parse_iso_date("2023-02-30")
    assert str(caught.value) == ("'2023-02-30' is not a valid date: day is out of range for "
                                 "month (February 2023 has 28 days)")
    assert isinstance(caught.value, ValueError)


def test_gregorian_century_rule():
    assert parse_iso_date("2000-02-29") == date(2000, 2, 29)
    with pytest.raises(DateError, match=r"February 1900 has 28 days"):
        parse_iso_date("1900-02-29")


def test_invalid_month():
    with pytest.raises(DateError, match=r"^'2023-13-01' is not a valid date: month"):
        parse_iso_date("2023-13-01")


def test_not_a_date():
    with pytest.raises(DateError) as caught:
        parse_iso_date("hello")
    assert str(caught.value) == "'hello' is not a date in YYYY-MM-DD form"


def test_unpadded_date_suggests_the_strict_form():
    with pytest.raises(DateError) as caught:
        parse_iso_date("1996-9-8")
    assert str(caught.value) == ("'1996-9-8' is not a date in YYYY-MM-DD form "
                                 "(expected e.g. 1996-09-08)")


@pytest.mark.parametrize("text", ["1996-09-08\n", " 1996-09-08", "1996/09/08", "19960908",
                                  "1996-09-08T00:00", "١٩٩٦-09-08"])
def test_strict_form(text):
    with pytest.raises(DateError, match="is not a date in YYYY-MM-DD form"):
        parse_iso_date(text)


@pytest.mark.parametrize("text", ["0999-12-31", "3000-01-01", "0000-01-01", "9999-12-31"])
def test_years_outside_training_range(text):
    with pytest.raises(DateError) as caught:
        parse_iso_date(text)
    assert str(caught.value).startswith(repr(text))
    assert "1000-01-01 .. 2999-12-31" in str(caught.value)


def test_range_ends_are_accepted():
    assert parse_iso_date("1000-01-01") == date(1000, 1, 1)
    assert parse_iso_date("2999-12-31") == date(2999, 12, 31)


# ---------------------------------------------------------------- the data set

def test_all_days_match_the_string_encoder(every_day):
    sources, targets = encode_all_days()
    assert sources.shape == (730485, SRC_LEN) and targets.shape == (730485, TGT_LEN)
    expected_sources = encode_batch([day.isoformat() for day in every_day], SRC_LEN)
    expected_targets = encode_batch([format_date(day) for day in every_day], TGT_LEN)
    np.testing.assert_array_equal(sources, expected_sources)
    np.testing.assert_array_equal(targets, expected_targets)


def test_all_days_are_cached_and_read_only():
    sources, targets = encode_all_days()
    assert encode_all_days()[0] is sources
    with pytest.raises(ValueError):
        sources[0, 0] = 0
    with pytest.raises(ValueError):
        targets[0, 0] = 0


def test_held_out_set_is_2000_distinct_days_disjoint_from_training(dataset):
    assert len(dataset.test_idx) == 2000 and len(set(dataset.test_idx.tolist())) == 2000
    assert len(set(dataset.test_dates)) == 2000
    assert not np.isin(dataset.test_idx, dataset.train_idx).any()
    assert len(dataset.train_idx) + 2000 == 730485
    assert np.array_equal(np.sort(np.concatenate([dataset.train_idx, dataset.test_idx])),
                          np.arange(730485))


def test_held_out_set_is_a_seeded_sample_of_every_day(dataset):
    import random
    first, last = date(1000, 1, 1).toordinal(), date(2999, 12, 31).toordinal()
    ordinals = random.Random(1234).sample(range(first, last + 1), 2000)
    assert dataset.test_dates == [date.fromordinal(o).isoformat() for o in ordinals]


def test_held_out_arrays_match_the_dates(dataset):
    assert dataset.test_src.dtype == np.int64 and dataset.test_src.shape == (2000, SRC_LEN)
    assert dataset.test_tgt.dtype == np.int64 and dataset.test_tgt.shape == (2000, TGT_LEN)
    assert decode_batch(dataset.test_src) == dataset.test_dates
    assert decode_batch(dataset.test_tgt) == dataset.test_targets
    assert dataset.test_targets == [translate_reference(d) for d in dataset.test_dates]


def test_held_out_set_is_the_one_the_readme_figures_were_scored_on(dataset):
    # Every held-out figure in README.md and docs/ is of these 2,000 pairs, in this order: a
    # change to the seed, the range or the formatting would silently make them incomparable.
    lines = "\n".join(f"{src}\t{tgt}" for src, tgt in zip(dataset.test_dates, dataset.test_targets))
    assert dataset.test_dates[:3] == ["2265-04-20", "1335-06-20", "1021-07-05"]
    assert hashlib.sha256(lines.encode()).hexdigest() == (
        "ef5bd065b772b9ee7c475a824b09f8b0790e51ca753cf6356a3e74be77ef9a9b")


def test_sample_batch_shapes_and_pairs(dataset):
    src, tgt = dataset.sample_batch(np.random.default_rng(0), 64)
    assert src.dtype == np.int64 and src.shape == (64, SRC_LEN)
    assert tgt.dtype == np.int64 and tgt.shape == (64, TGT_LEN)
    for source, target in zip(decode_batch(src), decode_batch(tgt)):
        assert translate_reference(source) == target


def test_sample_batch_never_returns_a_test_date(dataset):
    # 200k draws: a sampler over all days would hit ~550 test days.
    held_out = {row.tobytes() for row in dataset.test_src}
    rng = np.random.default_rng(1)
    for _ in range(20):
        src, _ = dataset.sample_batch(rng, 10_000)
        assert not any(row.tobytes() in held_out for row in src)


def test_sample_batch_covers_the_range(dataset):
    src, _ = dataset.sample_batch(np.random.default_rng(2), 20_000)
    years = {int("".join(map(str, row[1:5]))) for row in src}
    assert min(years) < 1010 and max(years) > 2990


def test_sample_batch_is_reproducible(dataset):
    first = dataset.sample_batch(np.random.default_rng(7), 256)
    second = dataset.sample_batch(np.random.default_rng(7), 256)
    other = dataset.sample_batch(np.random.default_rng(8), 256)
    assert all(np.array_equal(a, b) for a, b in zip(first, second))
    assert not np.array_equal(first[0], other[0])


def test_sample_batch_rejects_a_seed_in_place_of_a_generator(dataset):
    with pytest.raises(TypeError, match="default_rng"):
        dataset.sample_batch(0, 8)
