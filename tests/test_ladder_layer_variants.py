"""The two-layer rungs' variants (transformer/ladder/layer_variants.py) differ from their rung in the
one thing their name says, and docs/ladder.md's table of what each buys is the record's
(docs/layer-variants.json, made by examples/layer_variants.py)."""
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import minigrad
from transformer.ladder import LadderConfig
from transformer.ladder.experiment import MAX_LEN
from transformer.ladder.layer_variants import (LAYER_VARIANTS, LayerNormAtTheRungsRate, OutputMaps, OwnClassifier,
                                               RandomMaps, TwoLayersWithoutResiduals)
from transformer.ladder.rungs import LayerNorm, TwoLayers
from transformer.tasks.language import VOCAB, Language, encode_batch

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RECORD = os.path.join(REPO, "docs", "layer-variants.json")


def build(rung_class, seed=0):
    minigrad.manual_seed(seed)
    return rung_class(len(VOCAB), LadderConfig().d_model, MAX_LEN)


def logits(model) -> np.ndarray:
    batch = encode_batch(Language(seed=0).evaluation_set(per_kind=5), "answer", MAX_LEN)
    with minigrad.no_grad():
        return model(batch.inputs, batch.answer_position).data


def parameters(model) -> dict:
    return {name: p.data for name, p in model.named_parameters()}


def test_each_variant_differs_from_the_one_above_it_in_its_one_thing():
    config = LadderConfig()
    two, without = parameters(build(TwoLayers)), parameters(build(TwoLayersWithoutResiduals))
    assert two.keys() == without.keys() and not two["layer2.w_v.weight"].any()
    assert np.array_equal(without["layer2.w_v.weight"], np.eye(config.d_model))     # a new map starts as the identity
    assert LayerNormAtTheRungsRate.learning_rate(config) == config.lr != LayerNorm.learning_rate(config)
    norm, mixed = build(LayerNorm), build(OutputMaps)
    assert set(parameters(mixed)) - set(parameters(norm)) == {"output_maps.0.weight", "output_maps.1.weight"}
    assert np.array_equal(logits(mixed), logits(norm))                              # W_o starts as the identity
    own = parameters(build(OwnClassifier))
    assert set(own) ^ set(parameters(mixed)) == {"bias", "classifier.weight", "classifier.bias"}
    drawn = parameters(build(RandomMaps))
    assert drawn.keys() == own.keys()
    changed = {name for name in own if not np.array_equal(own[name], drawn[name])}
    assert changed == {"w_q.weight", "w_k.weight", "w_v.weight", "layer2.w_q.weight", "layer2.w_k.weight",
                       "layer2.w_v.weight", "output_maps.0.weight", "output_maps.1.weight"}


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
    table = page[page.index("| variant of the two-layer rungs |"):].split("\n\n")[0]
    assert len(table.splitlines()) == 2 + len(record["variants"])
    for name, numbers in record["variants"].items():
        row = re.search(rf"^\| {re.escape(name)} \|(.*)\|$", table, re.M).group(1)
        accuracy = numbers["accuracy"]
        assert [cell.strip() for cell in row.split("|")] == [
            f"{100 * np.mean(accuracy[k]):.1f} ({100 * min(accuracy[k]):.0f}-{100 * max(accuracy[k]):.0f})"
            for k in record["kinds"]], name


def test_what_the_variants_buy(record):
    """docs/ladder.md: without residuals two layers stay at one layer's recall; at 1e-2 layer norm
    learns recall on no seed; W_o and an own classifier do not make it learn recall on every seed,
    and random maps with them do, every kind on every seed."""
    recall = {name: numbers["accuracy"]["recall"] for name, numbers in record["variants"].items()}
    assert max(recall["two layers, without residuals"]) < 0.5
    assert max(recall["layer norm, lr 1e-2"]) < 0.95
    assert min(recall["layer norm + W_o"]) < 0.95 and min(recall["layer norm + W_o + own classifier"]) < 0.95
    for kind, per_seed in record["variants"]["layer norm + W_o + own classifier, random maps"]["accuracy"].items():
        assert min(per_seed) >= 0.95, kind
