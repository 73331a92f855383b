"""The README's paragraph on the attention ladder states bounds of the committed ten-seed record
(docs/ladder-run.json): the smallest gain of a rung on the kind its idea is for, which rung that is,
the floor every other rung clears, and the full block's lowest accuracy. A re-made record that moves
them fails here until the paragraph is restated."""
import os
import re

import numpy as np

from transformer.ladder import RUNGS, LadderResult
from transformer.ladder.experiment import REASONS

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def ladder_paragraph() -> str:
    readme = open(os.path.join(REPO, "README.md"), encoding="utf-8").read()
    start = readme.index("**The attention ladder**")
    return " ".join(readme[start:readme.index("\n\n", start)].split())


def least_gains() -> dict:
    """(rung, kind) -> the smallest gain over the record's seeds, in points: the rung whose idea the
    kind needs against the rung below it."""
    record = LadderResult.load(os.path.join(REPO, "docs", "ladder-run.json"))
    rungs = {r.name: r for r in record.rungs}
    names = [r.name for r in RUNGS]
    gains = {}
    for below, kind in REASONS:
        above = names[names.index(below) + 1]
        gains[above, kind] = 100 * float(np.min(np.subtract(rungs[above].accuracy[kind], rungs[below].accuracy[kind])))
    return gains, record


def test_the_readme_states_the_records_smallest_gain_and_who_has_it():
    text = ladder_paragraph()
    gains, record = least_gains()
    (rung, kind), smallest = min(gains.items(), key=lambda item: item[1])
    stated = int(re.search(r"gains at least (\d+) points", text).group(1))
    assert stated <= smallest < stated + 1, (stated, smallest)
    assert f"the {rung}'s on {kind}" in text
    others = int(re.search(r"every other rung at least (\d+)", text).group(1))
    assert others <= sorted(gains.values())[1]
    assert f"ten seeds (0-9" in text and list(record.seeds) == list(range(10))


def test_the_readme_states_the_full_blocks_lowest_accuracy_as_a_bound():
    text = ladder_paragraph()
    _, record = least_gains()
    floor = int(re.search(r"the full block gets at least (\d+)%", text).group(1))
    last = record.rungs[-1]
    assert last.name == "full block"
    assert min(min(values) for values in last.accuracy.values()) * 100 >= floor
