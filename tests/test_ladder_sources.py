"""What the sources teach, measured on the ladder, as docs/ladder.md states it.

``docs/ladder-sources.json`` is what ``python examples/ladder_sources.py --seeds 0-9 --json
docs/ladder-sources.json`` writes: six variants of the heads rung and the full block (values of
their own or not, the loss at the answer or at every position) on seeds 0-9, with learning
curves and the heads' roles on blend, one record per arithmetic (AVX2, which the page states,
and AVX-512); ``docs/images/blend_heads.png`` the heads on one blend sentence. The page's tables
must be the AVX2 record's, its bounds must hold on every seed of every record, and (slow)
re-training cells of the record made with this machine's arithmetic must give its numbers (a
machine no record was made with says so and skips).
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
from transformer.ladder.variants import load_record, load_records, run_variant, train_with_curve
from transformer.ladder.variants_table import (accuracy_table, roles_table, steps_later, steps_table, steps_to_learn,
                                              variant)
from transformer.parallel.threads import arithmetic
from transformer.tasks.language import VOCAB, Language, encode_batch

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RECORD = os.path.join(REPO, "docs", "ladder-sources.json")
PICTURE = os.path.join(REPO, "docs", "images", "blend_heads.png")
PAGE = os.path.join(REPO, "docs", "ladder.md")
SECTION = "## What the sources teach, measured"
REMAKE = "python examples/ladder_sources.py --seeds 0-9 --keep runs/ladder-sources --json docs/ladder-sources.json --force"
SEEDS = list(range(10))
REDRAW = "python examples/ladder_sources.py --picture docs/images/blend_heads.png --force"
VALUES = ("heads", "heads, values = keys", "heads, values = words")
POSITIONS = ("heads", "heads, every position")
FULL = ("full block", "full block, every position")


@pytest.fixture(scope="module")
def record():
    """The AVX2 record, the one docs/ladder.md states."""
    return load_record(RECORD)


@pytest.fixture(scope="module")
def records():
    """Every record in the file, one per arithmetic: the page's bounds must hold on each."""
    return list(load_records(RECORD).values())


def this_machines_record():
    """The record made with this machine's arithmetic (the same bits when trained again), or skip."""
    made = load_records(RECORD)
    if arithmetic() not in made:
        pytest.skip(f"docs/ladder-sources.json holds records made with {'; '.join(made)}; this machine rounds with "
                    f"{arithmetic()}. To make one here: {REMAKE}")
    return made[arithmetic()]


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

def test_every_record_is_the_default_budget_on_ten_seeds(records):
    assert any(r["arithmetic"].endswith("32-byte vectors") for r in records), "the page states an AVX2 record"
    for record in records:
        assert record["config"]["seeds"] == SEEDS
        # the budget is the ladder's; jobs (trainings at once) and eager (the step not replayed from
        # its tape) do not change a number of the record
        assert record["config"] == dict(record["config"], **{k: v for k, v in vars(LadderConfig()).items()
                                                             if k not in ("seeds", "kinds", "jobs", "eager")})
        assert {v["name"] for v in record["variants"]} == set(VALUES + POSITIONS + FULL)


def test_a_record_of_another_arithmetic_is_kept_beside_the_ones_there(tmp_path):
    """A run replaces its own machine's record and keeps the others' (the file holds AVX2's and AVX-512's)."""
    from transformer.ladder.variants import keep_record
    path = tmp_path / "sources.json"
    path.write_text(keep_record(path, {"arithmetic": "a", "n": 1}, "first"))
    path.write_text(keep_record(path, {"arithmetic": "b", "n": 2}, "second"))
    path.write_text(keep_record(path, {"arithmetic": "a", "n": 3}, "third"))
    assert load_records(path) == {"a": {"arithmetic": "a", "n": 3}, "b": {"arithmetic": "b", "n": 2}}
    with pytest.raises(KeyError, match="holds no record made with 'c', only with a, b"):
        load_record(path, "c")


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
@pytest.mark.parametrize("name, seed", [("heads, values = keys", 7), ("heads, every position", 5),
                                        ("full block, every position", 9)])
def test_a_cell_of_the_record_is_what_the_variant_trains(name, seed):
    record = this_machines_record()
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


COUNTS = ("no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten")


def span(values) -> str:
    """'100-1,300': the lowest and the highest of some steps, as the page writes them."""
    return f"{min(values):,}-{max(values):,}"


def reached(steps) -> list:
    return [step for step in steps if step is not None]


def percent(fraction) -> str:
    return f"{100 * fraction:g}%"


@pytest.fixture(scope="module")
def prose(section):
    """The section on one line: a sentence may wrap anywhere."""
    return " ".join(section.split())


def test_a_value_space_of_its_own_buys_little_and_not_reliably_time(record, records, prose):
    keys, words = "heads, values = keys", "heads, values = words"
    for made in records:                                        # the bounds, on every arithmetic's ten seeds
        assert min(accuracy(made, keys, kind).min() for kind in ("topic", "game", "order")) >= 0.95
        assert max(np.abs(points(made, keys, kind)).max() for kind in ("swap", "recall")) <= 10
        assert all(step is None for step in steps_to_learn(made, words, "colour"))
        assert accuracy(made, words, "colour").max() < 0.9
    assert "ends at 95% or more of topic, game and order on every seed, and swap and recall within 10 points" in prose
    lowest = {name: [f"{100 * accuracy(record, name, kind).min():.0f}%" for kind in ("colour", "blend")]
              for name in ("heads", keys)}
    assert (f"at the lowest colour {lowest[keys][0]} and blend {lowest[keys][1]}; with W_v {lowest['heads'][0]} and "
            f"{lowest['heads'][1]})") in prose
    later = steps_later(record, keys, "heads", "blend")
    slower, not_slower = [s for s in later if s is not None and s > 0], [s for s in later if s is not None and s <= 0]
    assert (f"It learns blend later on {COUNTS[len(slower)]} seeds of ten, by {span(slower)} steps, but at the same "
            f"step or sooner on {COUNTS[len(not_slower)]} and not at all on {COUNTS[later.count(None)]}") in prose
    mean = {name: np.mean(reached(steps_to_learn(record, name, "blend"))) for name in ("heads", keys)}
    assert f"on average at step {mean[keys]:,.0f} against {mean['heads']:,.0f}" in prose
    game = steps_later(record, words, "heads", "game")
    assert (f"blend is learned on {COUNTS[len(reached(steps_to_learn(record, words, 'blend')))]} seeds of ten, "
            f"and game, which four heads moving different slices of the words can still learn, misses 90% on "
            f"{COUNTS[game.count(None)]} seeds and reaches it {span(reached(game))} steps later") in prose


def test_predicting_at_every_position_costs_one_layer_the_answer(record, records, prose):
    every = "heads, every position"
    for made in records:
        assert all(step is None for step in steps_to_learn(made, every, "blend"))
        assert accuracy(made, every, "blend").max() < 0.8
        assert all(step is not None and step > 0 for step in steps_later(made, every, "heads", "order"))
    assert accuracy(record, "heads", "blend").min() == 1.0
    assert ("blend ends below 80% on every seed and reaches 90% on none (the answer-only loss: 100% on every seed of "
            "this record)") in prose
    colour = reached(steps_to_learn(record, every, "colour"))
    order, swap, game = (steps_later(record, every, "heads", kind) for kind in ("order", "swap", "game"))
    assert (f"colour reaches 90% on {COUNTS[len(colour)]} seeds of ten, and the kinds it learns come later: order on "
            f"every seed, by {span(order)} steps, swap by {span(reached(swap))} (never on {COUNTS[swap.count(None)]} "
            f"seed), game by up to {max(game):,} (the same step on {COUNTS[game.count(0)]})") in prose
    assert min(accuracy(record, every, kind).min() for kind in ("topic", "game")) < 1.0
    recall, base = accuracy(record, every, "recall"), accuracy(record, "heads", "recall")
    high = np.flatnonzero(recall >= 0.5)
    seeds = [record["config"]["seeds"][i] for i in high]
    assert (f"ends at {100 * recall.min():.0f}-{100 * recall.max():.0f}% ({' and '.join(percent(recall[i]) for i in high)} "
            f"on seeds {' and '.join(map(str, seeds))}, where the answer-only loss gets "
            f"{' and '.join(percent(base[i]) for i in high)}; not explained here)") in prose


def test_predicting_at_every_position_slows_the_full_block_and_its_recall(record, records, prose):
    every, answer = FULL[1], FULL[0]
    kinds = ("colour", "game", "swap", "order")
    for made in records:
        assert min(accuracy(made, answer, kind).min() for kind in made["config"]["kinds"]) >= 0.9
        assert None not in steps_to_learn(made, answer, "recall")
        for kind in kinds:
            assert all(step is not None and step > 0 for step in steps_later(made, every, answer, kind)), kind
        assert min(accuracy(made, every, kind).min() for kind in kinds + ("topic",)) >= 0.9
    assert "with its loss at the answer it ends at 90% or more of every kind on every seed" in prose
    later = {kind: span(steps_later(record, every, answer, kind)) for kind in kinds}
    assert (f"(colour by {later['colour']} steps, swap by {later['swap']}, order by {later['order']}, game by "
            f"{later['game']}), topic on all but one") in prose
    topic = steps_later(record, every, answer, "topic")
    assert sum(step is not None and step > 0 for step in topic) == len(topic) - 1
    blend = steps_later(record, every, answer, "blend")
    recall = reached(steps_to_learn(record, every, "recall"))
    assert (f"blend it learns on {COUNTS[len(reached(blend))]} seeds of ten, by {span(reached(blend))} steps later, "
            f"and recall, which the answer-only loss learns on every seed by step "
            f"{span(steps_to_learn(record, answer, 'recall'))}, on {COUNTS[len(recall)]} seeds of ten") in prose


def test_each_blend_role_is_read_by_a_head_of_its_own_as_a_rule(record, records, prose):
    assert accuracy(record, "heads", "blend").min() == 1.0 and "On every seed of this record blend ends at 100%" in prose
    for made in records:         # where blend is not learned, a role has no head: on every seed of every record
        roles = variant(made, "heads")["head_roles"]
        for s, blend in enumerate(accuracy(made, "heads", "blend")):
            assert (blend < 0.9) == (min(max(roles[role][s]) for role in BLEND_ROLES) < 0.4), (made["arithmetic"], s)
    avx512 = [made for made in records if made["arithmetic"].endswith("64-byte vectors")]
    assert avx512, "the AVX-512 record is kept beside the AVX2 one"
    blend = accuracy(avx512[0], "heads", "blend")
    low = int(blend.argmin())
    colour = max(variant(avx512[0], "heads")["head_roles"]["colour"][low])
    below = sum(int((accuracy(made, "heads", "blend") < 0.98).sum()) for made in records)
    assert (f"on its seed {avx512[0]['config']['seeds'][low]} no head puts more than {colour:.2f} of its weight on the "
            f"colour's thing, and the heads rung ends blend at {percent(blend[low])}, the {COUNTS[below]} seed of "
            f"twenty below 98%") in prose
    roles = variant(record, "heads")["head_roles"]
    seeds = range(len(record["config"]["seeds"]))
    own = [s for s in seeds if all(max(roles[role][s]) > 0.5 for role in BLEND_ROLES)]
    best = [max(roles[role][s]) for role in BLEND_ROLES for s in own]
    assert (f"on {COUNTS[len(own)]} seeds of ten each of the three roles has a head of its own that puts more than "
            f"half its weight on that role's thing ({min(best):.2f}-{max(best):.2f} on average") in prose
    free = [s for s in seeds if any(role_of({r: roles[r][s] for r in BLEND_ROLES}, h) is None for h in range(4))]
    assert f"on {COUNTS[len(free)]} seeds a head reads no one role" in prose
