"""Neighbouring rungs differ only in what docs/ladder.md's table of rungs lists.

The table says, per rung, which parameters it adds (names and shapes), the learning rate it is
trained at, and whether before any training it computes the rung below's logits. All three are
checked on the classes themselves, and every parameter a rung shares with the rung below starts
with the same values (the classifier, the embeddings' scale, the positions, every map's
initialisation), so a rung that quietly gains a parameter, another rate or another start fails here.
A rung may draw some of the shared parameters anew; its "starts" cell names each of them, and they
must then start differently. After the ladder comes the project's model, built apart (all its
parameters are its own): it must have the parts the table names and none of the rungs' parameters.
"""
import os
import re

import numpy as np
import pytest

import minigrad
from transformer.ladder import LADDER, RUNGS, LadderConfig
from transformer.ladder.experiment import MAX_LEN
from transformer.ladder.rungs import TwoLayers
from transformer.tasks.language import VOCAB, Language, encode_batch

DOCS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs", "ladder.md")
D_MODEL = LadderConfig().d_model
SEEDS = (0, 1, 2)               # initialisations compared
NEIGHBOURS = list(zip(LADDER, LADDER[1:]))


def rung_table() -> dict:
    """docs/ladder.md's table of rungs: name -> {'added', 'lr', 'starts'} (its cells)."""
    with open(DOCS) as file:
        page = file.read()
    table = page[page.index("| # | rung | the one idea it adds | parameters it adds |"):]
    rows = {}
    for line in table.splitlines()[2:]:
        if not line.startswith("|"):
            break
        _, number, name, _, added, lr, starts, _ = (cell.strip() for cell in line.split("|"))
        rows[name] = {"added": added, "lr": lr, "starts": starts}
    return rows


def listed_parameters(cell: str) -> dict:
    """'`w_v.weight` (32 x 32), `bias` (194)' -> {'w_v.weight': (32, 32), 'bias': (194,)}; a name
    written with {0,1} stands for both layers: '`norms.{0,1}.bias` (32)'. What follows "in place of"
    is what the rung takes away (``replaced``)."""
    cell = cell.split("in place of")[0]
    listed = {}
    for name, shape in re.findall(r"`([\w.{},]+)` \(([\d x]+)\)", cell):
        for layer in (("0", "1") if "{0,1}" in name else ("",)):
            listed[name.replace("{0,1}", layer)] = tuple(int(n) for n in shape.split(" x "))
    return listed


def replaced(cell: str) -> set:
    """The parameters a rung's cell says it takes away: the names after "in place of"."""
    return set(listed_parameters(cell.split("in place of")[1])) if "in place of" in cell else set()


def redrawn(cell: str) -> set:
    """The shared parameters a rung's "starts" cell says it draws anew (the names in backticks)."""
    return set(re.findall(r"`([\w.]+)`", cell))


def build(rung_class, seed):
    minigrad.manual_seed(seed)
    return rung_class(len(VOCAB), D_MODEL, MAX_LEN)


def parameter_shapes(model) -> dict:
    return {name: p.shape for name, p in model.named_parameters()}


def held_out_batch():
    return encode_batch(Language(seed=0).evaluation_set(per_kind=20), "answer", MAX_LEN)


def initial_logits(rung_class, seed) -> np.ndarray:
    batch = held_out_batch()
    with minigrad.no_grad():
        return build(rung_class, seed)(batch.inputs, batch.answer_position).data


def test_the_table_names_every_rung_in_order():
    assert list(rung_table()) == [rung.name for rung in RUNGS]


def test_each_rung_adds_exactly_the_parameters_the_docs_list():
    table = rung_table()
    have = {}
    for rung in LADDER:
        added = table[rung.name]["added"]
        have.update(listed_parameters(added))
        have = {name: shape for name, shape in have.items() if name not in replaced(added)}
        assert added == "none" or listed_parameters(added), (rung.name, added)
        assert parameter_shapes(build(rung, 0)) == have, rung.name


@pytest.mark.parametrize("below, rung", NEIGHBOURS, ids=lambda r: r.name)
def test_what_a_rung_shares_with_the_rung_below_starts_the_same(below, rung):
    """The classifier (tied to the embeddings, and its bias), the embeddings and their scale, the
    positions and every map the rung below has: drawn the same from the same seed, but for the
    ones the table says the rung draws anew, which must differ."""
    drawn_anew = redrawn(rung_table()[rung.name]["starts"])
    for seed in SEEDS:
        lower, upper = dict(build(below, seed).named_parameters()), dict(build(rung, seed).named_parameters())
        for name, p in lower.items():
            if name in upper:
                same = np.array_equal(p.data, upper[name].data)
                assert same != (name in drawn_anew), (rung.name, name, seed)


def test_each_rung_is_trained_at_the_learning_rate_the_docs_list():
    config = LadderConfig()
    table = rung_table()
    for rung in RUNGS:
        assert rung.learning_rate(config) == float(table[rung.name]["lr"]), rung.name


def test_the_projects_model_has_the_parts_the_docs_list_and_none_of_the_rungs_own():
    added = rung_table()[RUNGS[-1].name]["added"]
    names = list(parameter_shapes(build(RUNGS[-1], 0)))
    for part in re.findall(r"`([\w.]+)`", added):
        assert any(part in name for name in names), part
    assert not set(names) & set(parameter_shapes(build(RUNGS[-2], 0)))      # its own classifier too


@pytest.mark.parametrize("below, rung", list(zip(RUNGS, RUNGS[1:])), ids=lambda r: r.name)
def test_a_rung_starts_where_the_rung_below_stands_where_the_docs_say_so(below, rung):
    starts = rung_table()[rung.name]["starts"]
    assert starts.split(":")[0] in ("yes", "no"), starts
    differences = [np.abs(initial_logits(rung, seed) - initial_logits(below, seed)).max() for seed in SEEDS]
    if starts.startswith("yes"):
        assert max(differences) <= 1e-5, differences
    else:
        assert min(differences) > 1e-5, differences
    bound = re.search(r"the initial logits move by at most ([\d.]+)", starts)
    if bound:
        assert max(differences) <= float(bound.group(1)), differences


def test_the_two_layer_rungs_maps_start_as_minigrads_linear_draws_them():
    """Every d x d map of the two-layer rung (W_q, W_k, W_v of both layers, W_o) is drawn from
    U(-1/sqrt(d), 1/sqrt(d)), not the identity the rungs below start from: none is the identity, each
    fills its bounds, and another seed draws another."""
    bound = 1 / np.sqrt(D_MODEL)
    first, second = build(TwoLayers, 0).maps(), build(TwoLayers, 1).maps()
    assert len(first) == 8
    for a, b in zip(first, second):
        assert not np.allclose(a.weight.data, np.eye(D_MODEL))
        assert np.abs(a.weight.data).max() <= bound and np.abs(a.weight.data).max() > 0.9 * bound
        assert not np.array_equal(a.weight.data, b.weight.data)
