"""The two-layer rung's variants (transformer/ladder/layer_variants.py) differ from the rung in the
one thing their name says, and docs/ladder.md's table of what each buys is the record's
(docs/layer-variants.json, made by examples/layer_variants.py)."""
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from transformer.ladder import LadderConfig
from transformer.ladder.layer_variants import LAYER_VARIANTS
from transformer.ladder.rungs import TwoLayers

from ladder_models import build, logits

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RECORD = os.path.join(REPO, "docs", "layer-variants.json")


def parameters(model) -> dict:
    return {name: p.data for name, p in model.named_parameters()}


MAPS = {"w_q.weight", "w_k.weight", "w_v.weight", "layer2.w_q.weight", "layer2.w_k.weight", "layer2.w_v.weight",
        "w_o.0.weight", "w_o.1.weight"}
ATTENTION_MAPS = MAPS - {"w_o.0.weight", "w_o.1.weight"}
# each variant: the parameters it lacks (-) or has besides the rung's (+), and those that start
# otherwise (the maps are drawn last: without a part built before them they are other draws of the
# same distribution)
DIFFERENCES = {
    "two layers, without residuals": (set(), set()),
    "two layers, without layer norm": ({"-norms.0.weight", "-norms.0.bias", "-norms.1.weight", "-norms.1.bias"}, set()),
    "two layers, identity maps": (set(), MAPS),
    "two layers, without own classifier": ({"-classifier.weight", "-classifier.bias", "+bias"}, MAPS),
    "two layers, without W_o": ({"-w_o.0.weight", "-w_o.1.weight"}, ATTENTION_MAPS | {"classifier.weight", "classifier.bias"}),
    "two layers, without W_o and own classifier": ({"-w_o.0.weight", "-w_o.1.weight", "-classifier.weight",
                                                    "-classifier.bias", "+bias"}, ATTENTION_MAPS),
    "two layers, lr 1e-2": (set(), set()),
}


@pytest.mark.parametrize("name", list(LAYER_VARIANTS))
def test_each_variant_differs_from_the_rung_in_its_one_thing(name):
    """The parameters it has and how they start: the rung's, but for what its name takes away; the
    learning rate: the rung's, but for the variant at 1e-2; the computation: not the rung's."""
    config, variant = LadderConfig(), LAYER_VARIANTS[name]
    rung, other = parameters(build(TwoLayers)), parameters(build(variant))
    names, starts = DIFFERENCES[name]
    assert {f"-{n}" for n in rung.keys() - other.keys()} | {f"+{n}" for n in other.keys() - rung.keys()} == names
    assert {n for n in rung.keys() & other.keys() if not np.array_equal(rung[n], other[n])} == starts
    assert (variant.learning_rate(config) == config.lr) == (name == "two layers, lr 1e-2")
    if name == "two layers, identity maps":                   # as on the rungs below; layer 2 adds nothing at first
        assert all(np.array_equal(other[n], np.eye(config.d_model)) for n in MAPS - {"layer2.w_v.weight"})
        assert not other["layer2.w_v.weight"].any()
    if name not in ("two layers, lr 1e-2", "two layers, identity maps"):
        assert not np.allclose(logits(build(variant)), logits(build(TwoLayers)))


def test_an_unknown_variant_is_one_clear_line():
    result = subprocess.run([sys.executable, os.path.join(REPO, "examples", "layer_variants.py"), "--variants", "wings",
                             "--json", os.devnull], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert "unknown variant 'wings'" in result.stderr and "Traceback" not in result.stderr


@pytest.fixture(scope="module")
def record():
    with open(RECORD) as file:
        return json.load(file)


def test_the_record_holds_every_variant(record):
    assert set(record["variants"]) == set(LAYER_VARIANTS) and record["steps"] == LadderConfig().steps


def test_the_docs_table_of_the_variants_is_the_records(record):
    with open(os.path.join(REPO, "docs", "ladder.md")) as file:
        page = file.read()
    table = page[page.index("| variant of the two-layer rung |"):].split("\n\n")[0]
    assert len(table.splitlines()) == 2 + len(record["variants"])
    for name, numbers in record["variants"].items():
        row = re.search(rf"^\| {re.escape(name)} \|(.*)\|$", table, re.M).group(1)
        accuracy = numbers["accuracy"]
        assert [cell.strip() for cell in row.split("|")] == [
            f"{100 * np.mean(accuracy[k]):.1f} ({100 * min(accuracy[k]):.0f}-{100 * max(accuracy[k]):.0f})"
            for k in record["kinds"]], name


def ladder_recall() -> dict:
    """Recall per seed of the heads rung and the two-layer rung in the ladder's record."""
    with open(os.path.join(REPO, "docs", "ladder-run.json")) as file:
        ladder = json.load(file)
    return {r["name"]: r["accuracy"]["recall"] for r in ladder["rungs"]}


NEEDED_FOR_RECALL = ("two layers, without residuals", "two layers, without layer norm", "two layers, identity maps",
                     "two layers, without own classifier", "two layers, without W_o and own classifier")


def test_what_each_aid_buys(record):
    """docs/ladder.md: the rung learns recall (95% or more) on every seed. Without the residuals,
    layer norm, the random maps or the own classifier recall is below 95% on at least one seed of the
    same ten; without layer norm it stays at one layer's level on every seed, without residuals under
    75% on every seed. Without W_o every kind stays at 95% or more (it buys a point of
    recall); at 1e-2 recall does too, and swap falls under 95% on a seed."""
    ladder = ladder_recall()
    assert record["seeds"] == list(range(10)) and min(ladder["two layers"]) >= 0.95
    accuracy = {name: numbers["accuracy"] for name, numbers in record["variants"].items()}
    for name in NEEDED_FOR_RECALL:
        assert min(accuracy[name]["recall"]) < 0.95, name
    assert max(accuracy["two layers, without layer norm"]["recall"]) < 0.5
    assert max(accuracy["two layers, without residuals"]["recall"]) < 0.75
    for kind, per_seed in accuracy["two layers, without W_o"].items():
        assert min(per_seed) >= 0.95, kind
    assert np.mean(accuracy["two layers, without W_o"]["recall"]) < np.mean(ladder["two layers"])
    assert min(accuracy["two layers, lr 1e-2"]["recall"]) >= 0.95 and min(accuracy["two layers, lr 1e-2"]["swap"]) < 0.95
