"""What the sources teach, measured on the ladder, as docs/ladder.md states it.

``docs/ladder-sources.json`` is what ``python examples/ladder_sources.py --seeds 0-4 --json
docs/ladder-sources.json`` writes: six variants of the heads rung and the full block (values of
their own or not, the loss at the answer or at every position) on seeds 0-4, with learning
curves and the heads' roles on blend; ``docs/images/blend_heads.png`` the heads on one blend
sentence. The page's tables must be the record's, its claims must hold on every seed of it,
and (slow) re-training cells of it and the picture must give the same numbers and labels where
floats round as on the machine that made them (elsewhere the test says so and skips).
"""
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import minigrad
from transformer.ladder import Heads, LadderConfig
from transformer.ladder.experiment import MAX_LEN, rounded, train_rung
from transformer.ladder.head_roles import BLEND_ROLES, role_of
from transformer.ladder.loss_positions import rung_loss
from transformer.ladder.value_space import VALUE_VARIANTS
from transformer.ladder.variants import load_record, run_variant, train_with_curve
from transformer.ladder.variants_table import (accuracy_table, roles_table, steps_later, steps_table, steps_to_learn,
                                              variant)
from transformer.parallel.threads import arithmetic
from transformer.tasks.language import VOCAB, Language, encode_batch

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RECORD = os.path.join(REPO, "docs", "ladder-sources.json")
PICTURE = os.path.join(REPO, "docs", "images", "blend_heads.png")
PAGE = os.path.join(REPO, "docs", "ladder.md")
SECTION = "## What the sources teach, measured"
REMAKE = "python examples/ladder_sources.py --seeds 0-4 --json docs/ladder-sources.json --force"
REDRAW = "python examples/ladder_sources.py --picture docs/images/blend_heads.png --force"
VALUES = ("heads", "heads, values = keys", "heads, values = words")
POSITIONS = ("heads", "heads, every position")
FULL = ("full block", "full block, every position")


@pytest.fixture(scope="module")
def record():
    return load_record(RECORD)


@pytest.fixture(scope="module")
def section():
    with open(PAGE) as file:
        page = file.read()
    assert SECTION in page, f"docs/ladder.md has no section {SECTION!r}"
    return page[page.index(SECTION):]


def accuracy(record, name, kind) -> np.ndarray:
    return np.asarray(variant(record, name)["accuracy"][kind])


# --- the loss option and the value variants, on small models ---

def test_the_answer_loss_trains_as_the_ladder_does_even_while_scored():
    config = LadderConfig(steps=30)
    ladder = train_rung(Heads, config, Language(seed=1), 1)
    curved, curve = train_with_curve(Heads, config, 1, "answer", every=10, per_kind=10)
    assert len(curve["blend"]) == 3
    for kept, trained in zip(ladder.parameters(), curved.parameters()):
        assert np.array_equal(kept.data, trained.data)


def test_the_every_position_loss_is_the_mean_over_every_word_of_each_sentence():
    language = Language(seed=0)
    examples = language.sample("train", 14, np.random.default_rng(0))
    batch = encode_batch(examples, "sentence", MAX_LEN)
    minigrad.manual_seed(0)
    model = Heads(len(VOCAB), 32, MAX_LEN)
    logits = model(batch.inputs).data.astype(np.float64)                        # (B, T, vocab)
    shifted = logits - logits.max(axis=-1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    own = np.take_along_axis(log_probs, batch.targets[..., None], axis=-1)[..., 0]   # (B, T)
    lengths = [len(e.words) + 1 for e in examples]                                 # every word and the <eos>
    every_word = -np.mean([own[b, t] for b, n in enumerate(lengths) for t in range(n)])
    at_answer = -np.mean([own[b, e.answer_index] for b, e in enumerate(examples)])
    assert float(rung_loss(model, batch, "all").data) == pytest.approx(every_word, rel=1e-5)
    assert float(rung_loss(model, batch, "answer").data) == pytest.approx(at_answer, rel=1e-5)
    assert abs(every_word - at_answer) > 1e-3            # not the same loss by accident


def test_an_unknown_loss_position_is_one_clear_error():
    batch = encode_batch(Language(seed=0).sample("train", 2, np.random.default_rng(0)), "sentence", MAX_LEN)
    with pytest.raises(ValueError, match="one of answer, all, got 'every'"):
        rung_loss(Heads(len(VOCAB), 32, MAX_LEN), batch, "every")


def test_the_value_variants_differ_from_the_heads_rung_only_in_where_values_come_from():
    """Built from one seed they hold the heads rung's weights but W_v, and before training
    compute its logits: what they reach is what training makes of their values."""
    ids = encode_batch(Language(seed=0).evaluation_set(per_kind=2), "sentence", MAX_LEN).inputs
    built = {}
    for values, rung_class in VALUE_VARIANTS.items():
        minigrad.manual_seed(3)
        built[values] = rung_class(len(VOCAB), 32, MAX_LEN)
    names = {values: dict(model.named_parameters()) for values, model in built.items()}
    assert set(names["own"]) - set(names["keys"]) == {"w_v.weight"} and set(names["keys"]) == set(names["words"])
    for values in ("keys", "words"):
        for name, parameter in names[values].items():
            assert np.array_equal(parameter.data, names["own"][name].data), name
        with minigrad.no_grad():
            assert np.array_equal(built[values](ids).data, built["own"](ids).data)


def test_the_command_refuses_bad_input_in_one_line(tmp_path):
    for args in (["--seeds", "two", "--json", str(tmp_path / "x.json")], []):
        done = subprocess.run([sys.executable, os.path.join(REPO, "examples", "ladder_sources.py"), *args],
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 2 and done.stdout == ""
        assert len(done.stderr.strip().splitlines()) == 1 and done.stderr.startswith("error: ")


# --- the page against the committed record ---

def test_the_record_is_the_default_budget_on_five_seeds(record):
    assert record["config"]["seeds"] == [0, 1, 2, 3, 4]
    assert record["config"] == dict(record["config"], **{k: v for k, v in vars(LadderConfig()).items()
                                                         if k not in ("seeds", "kinds")})
    assert {v["name"] for v in record["variants"]} == set(VALUES + POSITIONS + FULL)


def test_the_page_shows_the_records_tables(record, section):
    for table in (accuracy_table(record, VALUES), steps_table(record, VALUES, ("game", "swap", "colour", "blend")),
                  accuracy_table(record, POSITIONS), steps_table(record, POSITIONS, ("game", "swap", "order", "blend")),
                  accuracy_table(record, FULL), steps_table(record, FULL, ("colour", "swap", "blend", "recall")),
                  roles_table(record)):
        assert table in section, f"docs/ladder.md's table is not the record's; it is now:\n{table}"


def test_the_picture_says_what_the_record_says_of_seed_0(record):
    """Each panel's label names the role its head reads on the record's seed 0, with its mean weight."""
    from viz.blend_heads import picture_labels
    labels, made_with = picture_labels(PICTURE)
    roles = {role: weights[0] for role, weights in variant(record, "heads")["head_roles"].items()}
    assert made_with == record["arithmetic"], f"the picture and the record come from other machines: {REDRAW}"
    for head, label in enumerate(labels[:-1]):
        role = role_of(roles, head)
        if role is None:
            best = max(BLEND_ROLES, key=lambda r: roles[r][head])
            assert label.startswith(f"head {head}: no one role (mean {roles[best][head]:.2f} on the {best}'s"), label
        else:
            assert label.startswith(f"head {head} reads the {role}'s thing") and \
                label.endswith(f"(mean {roles[role][head]:.2f})"), label


def skip_where_floats_round_otherwise(made_with: str, remake: str):
    """The same numbers to the last digit need the BLAS kernels and vector width they were made with."""
    if made_with != arithmetic():
        pytest.skip(f"made with {made_with}; this machine rounds with {arithmetic()}. To make it here: {remake}")


@pytest.mark.slow
@pytest.mark.parametrize("name, seed", [("heads, values = keys", 3), ("heads, every position", 1),
                                        ("full block, every position", 2)])
def test_a_cell_of_the_record_is_what_the_variant_trains(record, name, seed):
    skip_where_floats_round_otherwise(record["arithmetic"], REMAKE)
    config = LadderConfig(**{k: tuple(v) if isinstance(v, list) else v for k, v in record["config"].items()})
    run = run_variant(name, seed, config)
    entry, s = variant(record, name), config.seeds.index(seed)
    found = [f"{kind}: {run.accuracy[kind]} now, {entry['accuracy'][kind][s]} recorded" for kind in run.accuracy
             if rounded(run.accuracy[kind]) != entry["accuracy"][kind][s]]
    found += [f"curve of {kind}" for kind in run.curve if [rounded(a) for a in run.curve[kind]] != entry["curve"][kind][s]]
    found += [f"head roles: {role}" for role in run.head_roles
              if [rounded(w) for w in run.head_roles[role]] != entry["head_roles"][role][s]]
    assert not found, f"re-make the record ({REMAKE}) and re-check docs/ladder.md:\n" + "\n".join(found)


@pytest.mark.slow
def test_the_committed_picture_is_what_todays_code_draws(tmp_path):
    from viz.blend_heads import picture_labels, save_blend_heads
    labels, made_with = picture_labels(PICTURE)
    skip_where_floats_round_otherwise(made_with, REDRAW)
    drawn = save_blend_heads(tmp_path / "heads.png", LadderConfig(seeds=(0,)))
    assert drawn == labels, f"redraw it ({REDRAW}):\n" + "\n".join(drawn)


def points(record, name, kind, baseline="heads") -> np.ndarray:
    """Per seed: the variant's accuracy on ``kind`` minus the baseline's, in points."""
    return 100 * (accuracy(record, name, kind) - accuracy(record, baseline, kind))


def test_a_value_space_of_its_own_buys_time_on_blend_not_accuracy(record, section):
    keys = "heads, values = keys"
    assert accuracy(record, keys, "blend").min() == accuracy(record, keys, "game").min() == 1.0
    assert max(np.abs(points(record, keys, kind)).max() for kind in record["config"]["kinds"]) <= 5
    later = steps_later(record, keys, "heads", "blend")
    assert None not in later and 100 <= min(later) and max(later) <= 300, later
    assert "by 100-300 steps (980 steps on average against 740)" in section
    words = "heads, values = words"
    assert all(step is None for step in steps_to_learn(record, words, "colour"))
    assert sum(step is not None for step in steps_to_learn(record, words, "blend")) == 2
    assert "colour ends at 40-88% (never 90% on any seed), blend is learned on two seeds of five" in section


def test_predicting_at_every_position_costs_one_layer_the_answer(record, section):
    every = "heads, every position"
    assert all(step is None for step in steps_to_learn(record, every, "blend"))
    assert accuracy(record, every, "blend").max() < 0.6 and accuracy(record, "heads", "blend").min() == 1.0
    for kind, (low, high) in (("order", (400, 800)), ("swap", (300, 1300))):
        later = steps_later(record, every, "heads", kind)
        assert None not in later and (min(later), max(later)) == (low, high), (kind, later)
    assert accuracy(record, every, "topic").min() == accuracy(record, every, "game").min() == 1.0
    assert "order by 400-800 steps, swap by\n300-1,300" in section
    seed_4 = record["config"]["seeds"].index(4)
    assert f"61% on seed 4, where the answer-only loss gets {100 * accuracy(record, 'heads', 'recall')[seed_4]:.0f}%" \
        in section


def test_each_blend_role_has_a_head_of_its_own_on_every_seed(record, section):
    roles = variant(record, "heads")["head_roles"]
    best = [max(roles[role][s]) for role in BLEND_ROLES for s in range(len(record["config"]["seeds"]))]
    assert min(best) > 0.5 and f"({min(best):.2f}-{max(best):.2f} on average" in section
    assert accuracy(record, "heads", "blend").min() == 1.0


def test_predicting_at_every_position_slows_the_full_block_and_its_recall(record, section):
    every, answer = FULL[1], FULL[0]
    for kind in record["config"]["kinds"]:
        later = steps_later(record, every, answer, kind)
        if kind == "recall":
            assert sum(step is not None for step in steps_to_learn(record, every, kind)) == 1
            assert None not in steps_to_learn(record, answer, kind)
        else:
            assert None not in later and min(later) > 0, (kind, later)
    assert accuracy(record, answer, "recall").min() == 1.0
    for kind, (low, high) in (("blend", (400, 1700)), ("swap", (200, 500)), ("colour", (300, 600))):
        assert (min(steps_later(record, every, answer, kind)), max(steps_later(record, every, answer, kind))) == \
            (low, high), kind
        assert f"{kind} by {low:,}-{high:,}" in section.replace("\n", " ")
