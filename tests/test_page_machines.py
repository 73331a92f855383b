"""A step count of the default date runs names its machine wherever the pages give one.

Seed 0's default date run stops at step 192 with AVX-512 and at 210 with AVX2 (the decoder-only one
at 303 and 332): the Numba kernels and OpenBLAS add float32 sums in another order on another vector
width (docs/dates.md). A page that said "210 steps" with no machine beside it disagreed with one
that said 192; so every paragraph that gives one of these step counts (a table together with the
paragraph that introduces it) names the vector width it was measured with.
"""
import os
import re

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# history.md keeps each day's words; early_stopping.md's step counts are of its experiments (other
# schedules, seeds 1 and 2), on the machine its sections name
OTHER_RUNS = {"history.md", "early_stopping.md"}
PAGES = ["README.md"] + sorted(os.path.join("docs", name) for name in os.listdir(os.path.join(REPO, "docs"))
                               if name.endswith(".md") and name not in OTHER_RUNS)
DATE_RUN_STEPS = r"(?:192|210|303|332)"
STEP_COUNT = re.compile(rf"\bsteps? {DATE_RUN_STEPS}\b|\b{DATE_RUN_STEPS} steps\b|\| {DATE_RUN_STEPS} / ")
MACHINE = re.compile(r"AVX2|AVX-512")


def paragraphs(text) -> list:
    """The page's paragraphs; a table is joined to the paragraph before it, which says what it measured."""
    found = []
    for paragraph in re.split(r"\n\s*\n", text):
        if paragraph.lstrip().startswith("|") and found:
            found[-1] += "\n\n" + paragraph
        else:
            found.append(paragraph)
    return found


def unlabelled_step_counts(text) -> list:
    return [STEP_COUNT.search(p).group(0) for p in paragraphs(text) if STEP_COUNT.search(p) and not MACHINE.search(p)]


def test_the_check_finds_an_unlabelled_count_and_accepts_a_labelled_one():
    assert unlabelled_step_counts("The default date run (seed 0, 210 steps) opens on ...") == ["210 steps"]
    assert unlabelled_step_counts("It stops at step 192 with AVX-512 and at step 210 with AVX2.") == []
    assert unlabelled_step_counts("On the AVX-512 VM:\n\n| run | steps |\n|---|---|\n| ed | 192 / 7.7 s |") == []


@pytest.mark.parametrize("page", PAGES)
def test_every_date_run_step_count_names_its_machine(page):
    text = open(os.path.join(REPO, page), encoding="utf-8").read()
    assert unlabelled_step_counts(text) == [], f"{page}: name the machine (AVX2 or AVX-512) beside these"
