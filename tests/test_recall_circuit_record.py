"""The recall circuit's claim over ten next-word seeds, as the docs state it, against the
committed record: ``docs/recall-circuit-seeds.json`` is what ``examples/recall_circuit_seeds.py
runs/next-word-seed? --json docs/recall-circuit-seeds.json`` writes from ten runs of
``next-word-train --snapshot-every 10 --seed N`` (N = 0-9), once per kind of arithmetic (AVX-512,
and AVX2 as ``NUMBA_CPU_NAME=haswell OPENBLAS_CORETYPE=Haswell MINIGRAD_VECTOR_BYTES=32`` makes it).
The claim must hold on every run; the docs' sentences and table must be the ones the record makes;
the recall section names the circuit's parts, never one seed's heads. (tests/test_recall_circuit.py
re-trains one seed and checks it gives the record's numbers.)"""
import json
import os
import re
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "examples"))
from recall_circuit_seeds import claims, markdown_table  # noqa: E402

RECORD = os.path.join(REPO, "docs", "recall-circuit-seeds.json")
SEEDS = list(range(10))


def record():
    with open(RECORD, encoding="utf-8") as f:
        return json.load(f)


def runs():
    return [(machine, run) for machine, found in record()["machines"].items() for run in found]


def page(name) -> str:
    with open(os.path.join(REPO, "docs", name), encoding="utf-8") as f:
        return " ".join(f.read().split())          # one line: a sentence may wrap anywhere


def recall_section() -> str:
    text = open(os.path.join(REPO, "docs", "explorer.md"), encoding="utf-8").read()
    return text.split("## The recall circuit forming", 1)[1].split("\n## ", 1)[0]


def test_the_record_holds_ten_seeds_per_machine_and_the_command_that_makes_it():
    made = record()
    assert made["command"] == "python examples/recall_circuit_seeds.py runs/next-word-seed? --json docs/recall-circuit-seeds.json"
    assert made["machines"] and all([run["seed"] for run in found] == SEEDS for found in made["machines"].values())


@pytest.mark.parametrize("machine, run", runs(), ids=lambda x: x if isinstance(x, str) else f"seed{x['seed']}")
def test_on_every_run_both_parts_form_before_recall_is_learned(machine, run):
    assert None not in (run["binder_step"], run["reader_step"], run["recall_step"]), run
    assert run["binder_step"] < run["recall_step"] and run["reader_step"] < run["recall_step"], run
    assert all(step is not None and step <= run["binder_step"] for step in run["place_steps"])
    assert run["binding"] >= 0.5 and run["reading"] >= 0.5


def test_the_docs_state_the_claims_the_record_makes():
    text = page("explorer.md")
    for sentence in claims(record()):
        assert sentence in text, f"docs/explorer.md should say, from the record: {sentence}"


def test_the_docs_table_is_the_records_avx512_runs():
    text = open(os.path.join(REPO, "docs", "explorer.md"), encoding="utf-8").read()
    shown = [found for machine, found in record()["machines"].items() if machine.endswith("64-byte vectors")]
    assert shown, "the docs show the AVX-512 runs' table"
    assert markdown_table(shown[0]) in text


def test_the_recall_section_names_the_parts_not_one_seeds_heads():
    next_word = page("next-word.md")
    recall_paragraph = next_word[next_word.index("Recall is the last kind learned"):][:1500]
    for text in (recall_section(), recall_paragraph):
        assert not re.search(r"\bheads? \d", text), re.search(r".{60}\bheads? \d.{20}", text).group(0)
    assert "the binder" in recall_section() and "the reader" in recall_section()
