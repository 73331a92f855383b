"""The full block with one part taken away (transformer/ladder/full_block_parts.py) is the full
block less exactly that part, and docs/ladder.md's table of what each part buys is the record's
(docs/full-block-parts.json, made by examples/full_block_parts.py)."""
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from transformer.ladder import LadderConfig, LadderResult
from transformer.ladder.full_block_parts import PARTS, full_block_without
from transformer.ladder.rungs import FullBlock

from ladder_models import build, logits

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RECORD = os.path.join(REPO, "docs", "full-block-parts.json")
LADDER = os.path.join(REPO, "docs", "ladder-run.json")


def shapes(model) -> dict:
    return {name: p.shape for name, p in model.named_parameters()}


def test_with_nothing_removed_it_is_the_full_block():
    for seed in (0, 1):
        assert np.array_equal(logits(build(full_block_without(), seed)), logits(build(FullBlock, seed)))
        assert shapes(build(full_block_without(), seed)) == shapes(build(FullBlock, seed))


# the parameters each removal takes away (or adds): name patterns of the full block's parameters
REMOVED = {"feed-forward": r"feed_forward\.|norm2\.", "layer norm": r"norm[12]\.", "second layer": r"layers\.1\.",
           "W_o and biases": r"w_o\.|w_qkv\.bias", "own classifier": r"^model\.output\."}


@pytest.mark.parametrize("part", PARTS)
def test_each_removal_takes_away_its_part_and_nothing_else(part):
    full, less = build(FullBlock), build(full_block_without(part))
    gone = {name for name in shapes(full) if name not in shapes(less)}
    pattern = REMOVED.get(part)
    assert gone == {name for name in shapes(full) if pattern and re.search(pattern, name)}, part
    added = set(shapes(less)) - set(shapes(full))
    assert added == ({"bias"} if part == "own classifier" else set()), part
    config = LadderConfig()
    assert full_block_without(part).learning_rate(config) == (config.lr if part == "lr 3e-3" else config.full_block_lr)
    same_weights = all(np.array_equal(p.data, dict(less.named_parameters())[name].data)
                       for name, p in full.named_parameters() if name in shapes(less))
    # only these two change weights that both models have
    assert same_weights == (part not in ("Xavier init", "random positions")), part
    if part == "random positions":
        assert not less.model.positions.embedding.weight.data.any()
    if part in ("residuals", "embedding scale", "lr 3e-3"):           # the same weights, another computation
        assert shapes(less) == shapes(full)
    if part != "lr 3e-3":
        assert not np.array_equal(logits(less), logits(full)), part


def test_an_unknown_part_is_one_clear_line():
    result = subprocess.run([sys.executable, os.path.join(REPO, "examples", "full_block_parts.py"), "--parts", "wings",
                             "--json", os.devnull], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert "unknown part 'wings'" in result.stderr and "Traceback" not in result.stderr


@pytest.fixture(scope="module")
def record():
    with open(RECORD) as file:
        return json.load(file)


def test_the_record_holds_every_part_on_the_ladders_seeds(record):
    ladder = LadderResult.load(LADDER)
    assert list(record["parts"]) == list(PARTS)
    assert record["steps"] == ladder.config.steps and record["kinds"] == list(ladder.kinds)
    assert set(record["seeds"]) <= set(ladder.seeds)


def first_table(text: str) -> str:
    """The first table of parts in ``text`` (its lines, up to the blank line after it)."""
    return text[text.index("| the full block without |"):].split("\n\n")[0]


def docs_page() -> str:
    with open(os.path.join(REPO, "docs", "ladder.md")) as file:
        return file.read()


def check_docs_table(record, table):
    assert len(table.splitlines()) == 2 + len(record["parts"])
    for part, numbers in record["parts"].items():
        row = re.search(rf"^\| {re.escape(part)} \|(.*)\|$", table, re.M).group(1)
        cells = [cell.strip() for cell in row.split("|")]
        accuracy = numbers["accuracy"]
        expected = [f"{100 * np.mean(accuracy[k]):.1f} ({100 * min(accuracy[k]):.0f}-{100 * max(accuracy[k]):.0f})"
                    for k in record["kinds"]]
        assert cells == expected, part


def test_the_docs_table_of_the_parts_is_the_records(record):
    check_docs_table(record, first_table(docs_page()))


@pytest.mark.parametrize("name", ["full-block-cumulative.json", "full-block-smallest.json"])
def test_the_docs_tables_of_the_cumulative_removal_are_the_records(name):
    """Each record's table is the first table after the sentence that names the record's file."""
    with open(os.path.join(REPO, "docs", name)) as file:
        record = json.load(file)
    page = docs_page()
    check_docs_table(record, first_table(page[page.index(f"`docs/{name}`", page.index("### How little of the block")):]))


def test_the_smallest_stack_learns_recall_on_every_seed_and_one_removal_more_does_not():
    """docs/ladder.md: the fourth row of the cumulative removal keeps recall >= 95% on seeds 0-4; the
    fifth (the tied classifier) breaks it on some seed, and so does removing W_o or layer norm instead."""
    with open(os.path.join(REPO, "docs", "full-block-smallest.json")) as file:
        smallest = json.load(file)
    with open(os.path.join(REPO, "docs", "full-block-cumulative.json")) as file:
        search = json.load(file)
    rows = list(smallest["parts"].values())
    assert smallest["seeds"] == [0, 1, 2, 3, 4]
    assert all(min(per_seed) >= 0.95 for per_seed in rows[3]["accuracy"].values())
    assert min(rows[4]["accuracy"]["recall"]) < 0.95
    for name, numbers in list(search["parts"].items())[5:]:
        assert min(numbers["accuracy"]["recall"]) < 0.95, name
