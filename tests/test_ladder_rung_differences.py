"""Neighbouring rungs differ only in what docs/ladder.md's table of rungs lists.

The table says, per rung, which parameters it adds (names and shapes) and whether before any
training it computes the rung below's logits. Both are checked on the classes themselves, so a
rung that quietly gains a parameter, or starts elsewhere than the docs say, fails here.
"""
import os
import re

import numpy as np
import pytest

import minigrad
from transformer.ladder import RUNGS, LadderConfig
from transformer.ladder.experiment import MAX_LEN
from transformer.tasks.language import VOCAB, Language, encode_batch

DOCS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs", "ladder.md")
D_MODEL = LadderConfig().d_model
SEEDS = (0, 1, 2)               # initialisations compared


def rung_table() -> dict:
    """docs/ladder.md's table of rungs: name -> (the parameters cell, the 'starts where' cell)."""
    with open(DOCS) as file:
        page = file.read()
    table = page[page.index("| # | rung | the one idea it adds | parameters it adds |"):]
    rows = {}
    for line in table.splitlines()[2:]:
        if not line.startswith("|"):
            break
        _, number, name, _, added, starts, _ = (cell.strip() for cell in line.split("|"))
        rows[name] = (added, starts)
    return rows


def listed_parameters(cell: str) -> dict:
    """'`w_v.weight` (32 x 32), `bias` (194)' -> {'w_v.weight': (32, 32), 'bias': (194,)}."""
    return {name: tuple(int(n) for n in shape.split(" x "))
            for name, shape in re.findall(r"`([\w.]+)` \(([\d x]+)\)", cell)}


def build(rung_class, seed):
    minigrad.manual_seed(seed)
    return rung_class(len(VOCAB), D_MODEL, MAX_LEN)


def parameter_shapes(model) -> dict:
    return {name: p.shape for name, p in model.named_parameters()}


def initial_logits(rung_class, seed) -> np.ndarray:
    examples = Language(seed=0).evaluation_set(per_kind=20)
    batch = encode_batch(examples, "answer", MAX_LEN)
    with minigrad.no_grad():
        return build(rung_class, seed)(batch.inputs, batch.answer_position).data


def test_the_table_names_every_rung_in_order():
    assert list(rung_table()) == [rung.name for rung in RUNGS]


def test_each_one_layer_rung_adds_exactly_the_parameters_the_docs_list():
    table = rung_table()
    have = {}
    for rung in RUNGS[:-1]:
        added, _ = table[rung.name]
        have.update(listed_parameters(added))
        assert added == "none" or listed_parameters(added), (rung.name, added)
        assert parameter_shapes(build(rung, 0)) == have, rung.name


def test_the_full_block_has_the_parts_the_docs_list_and_none_of_the_rungs_own():
    added, _ = rung_table()["full block"]
    names = list(parameter_shapes(build(RUNGS[-1], 0)))
    for part in re.findall(r"`([\w.]+)`", added):
        assert any(part in name for name in names), part
    assert not set(names) & set(parameter_shapes(build(RUNGS[-2], 0)))      # its own classifier too


@pytest.mark.parametrize("below, rung", list(zip(RUNGS, RUNGS[1:])), ids=lambda r: r.name)
def test_a_rung_starts_where_the_rung_below_stands_where_the_docs_say_so(below, rung):
    _, starts = rung_table()[rung.name]
    assert starts.split(":")[0] in ("yes", "no"), starts
    differences = [np.abs(initial_logits(rung, seed) - initial_logits(below, seed)).max() for seed in SEEDS]
    if starts.startswith("yes"):
        assert max(differences) <= 1e-5, differences
    else:
        assert min(differences) > 1e-5, differences
    bound = re.search(r"the initial logits move by at most ([\d.]+)", starts)
    if bound:
        assert max(differences) <= float(bound.group(1)), differences
