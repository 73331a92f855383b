"""The notebooks' committed figures and texts say what today's code draws and prints.

The figures a notebook's text is about are drawn again from the cell that draws them (no training
needed) and checked for what a reader would notice: every vector the text names inside the axes,
the mask convention the graph states. Re-executing a whole notebook, numbers included, is the slow
test of tests/test_notebooks.py and tests/test_attention_notebook.py.
"""
import os
import re

import numpy as np
import pytest

nbformat = pytest.importorskip("nbformat", reason="pip install -e '.[test]' installs nbformat")

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NOTEBOOKS = os.path.join(REPO, "notebooks")


def code_cell(name, marker):
    """The one code cell of notebook ``name`` whose source contains ``marker``."""
    notebook = nbformat.read(os.path.join(NOTEBOOKS, name), as_version=4)
    found = [cell for cell in notebook.cells if cell.cell_type == "code" and marker in cell.source]
    assert len(found) == 1, f"{name}: {len(found)} cells contain {marker!r}"
    return found[0]


def run_figure_cell(source):
    """Execute a figure cell's source with the notebook's names (numpy, pyplot on Agg); its figure."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    plt.close("all")
    exec(compile(source.replace("plt.show()", ""), "<cell>", "exec"), {"np": np, "plt": plt})
    return plt.gcf()


def test_the_squash_figure_draws_every_vector_the_text_names_inside_its_axes():
    from viz.picture_facts import figure_facts, points_outside
    facts = figure_facts(run_figure_cell(code_cell("attention_from_next_word.ipynb", "def squash(").source))
    named = [name for ax in facts for name, _ in ax["points"]]
    assert named.count("bride") == named.count("ring") == 3          # the words, key space, query space
    assert points_outside(facts) == []


def svg_texts(svg: str) -> list:
    """The texts an SVG drawn by Graphviz shows (its <text> elements), unescaped."""
    import html
    return [html.unescape(text) for text in re.findall(r"<text[^>]*>([^<]*)</text>", svg)]


def test_the_date_notebooks_graph_is_the_one_todays_code_draws():
    """The graph cell of the date notebook needs no training: draw it again, compare every text."""
    import shutil
    if shutil.which("dot") is None:
        pytest.skip("Graphviz's `dot` is not installed (apt-get install graphviz | brew install graphviz)")
    import tempfile

    from transformer.models.config import ModelConfig
    from transformer.training.dates import DateTrainer
    from transformer.training.trainer import TrainConfig
    from viz.attention_graph import build_attention_graph
    from viz.details import convention
    cell = code_cell("date_transformer.ipynb", "build_attention_graph(")
    committed = next(out["data"]["image/svg+xml"] for out in cell.outputs if "image/svg+xml" in out.get("data", {}))
    names = {"ModelConfig": ModelConfig, "DateTrainer": DateTrainer, "TrainConfig": TrainConfig,
             "build_attention_graph": build_attention_graph, "tempfile": tempfile}
    exec(compile(cell.source.replace("print(", "(lambda *a, **k: None)("), "<cell>", "exec"), names)
    today = names["graph"].pipe(format="svg").decode()
    assert svg_texts(committed) == svg_texts(today), "re-execute notebooks/date_transformer.ipynb and commit it"
    meaning = convention("mask", np.zeros((1, 1), bool))[1]
    assert meaning in " ".join(svg_texts(committed))


def test_the_date_notebooks_text_states_the_graphs_convention():
    notebook = nbformat.read(os.path.join(NOTEBOOKS, "date_transformer.ipynb"), as_version=4)
    text = " ".join(cell.source for cell in notebook.cells if cell.cell_type == "markdown")
    assert "dark = True = may attend" in " ".join(text.split())
    assert "dark cells are filled" not in text


def test_the_translation_exercise_labels_rows_by_what_they_write_and_answers_all_three():
    cell = code_cell("attention_from_next_word.ipynb", "writing the '1' of 1845")
    printed = "".join(out.get("text", "") for out in cell.outputs if out.get("name") == "stdout")
    for number in ("(1) row '<sos> → J'", "(2) yes", "(3) row '␣ → 1'"):
        assert number in printed, printed
    # the answer to (3): the year's first digit, not the month's '1' (the same character)
    first, month = re.search(r"puts ([\d.]+) of its weight on the year's first digit .* and ([\d.]+) on the month's",
                             printed).groups()
    assert float(first) > 0.5 > float(month)


def printed(cell):
    return "".join(out.get("text", "") for out in cell.outputs if out.get("name") == "stdout")


def as_read(program):
    """A printed program's lines as a reader takes them: the alignment of the comments aside."""
    return [" ".join(line.split()) for line in program.strip().splitlines()]


def test_the_printed_step_in_the_autograd_notebook_is_what_todays_trace_prints():
    import contextlib
    import io
    cell = code_cell("autograd_from_the_inside.ipynb", "minigrad.trace(")
    today = io.StringIO()
    with contextlib.redirect_stdout(today):
        exec(compile(cell.source, "<cell>", "exec"), {"np": np})
    assert as_read(printed(cell)) == as_read(today.getvalue()), \
        "today's trace prints another step: re-execute notebooks/autograd_from_the_inside.ipynb and commit it"


def test_the_printed_step_reads_as_the_notebook_says():
    """The markdown before the cell tells the reader what to find: one line per op, the backward
    rules in the reverse order of the forward ops, the sums of a tensor used twice, the .grad adds."""
    notebook = nbformat.read(os.path.join(NOTEBOOKS, "autograd_from_the_inside.ipynb"), as_version=4)
    index = next(i for i, c in enumerate(notebook.cells) if c.cell_type == "code" and "minigrad.trace(" in c.source)
    text, program = notebook.cells[index - 1].source, printed(notebook.cells[index])
    assert "docs/tracing.md" in text
    forward, backward = program.split("# forward\n")[1].split("# backward\n")
    ops = re.findall(r"^\s+(t\d+) = (\w+)\(", forward, re.M)
    assert [name for name, _ in ops] == [f"t{i}" for i in range(len(ops))]                 # one line per op
    assert "SelfAttentionCore" in [op for _, op in ops]
    rules = re.findall(r"= (\w+)\.backward\(g_(t\d+)\)", backward)
    no_gradient = {"ArrayFunction"}                                                  # integer targets
    assert rules == [(op, name) for name, op in reversed(ops) if op not in no_gradient]  # every rule, in reverse
    last = ops[-1][0]
    assert f"g_{last} = ones_like({last})" in text and f"g_{last} = ones_like({last})" in program
    sums = re.findall(r"^\s+g_(t\d+) = g_\1 \+ g_\1_0$", backward, re.M)
    assert sums and all(f"`{name}`" in text for name in sums)                        # the sums the text names
    assert "g_t8 = g_t8 + g_t8_0" in text and "g_t8 = g_t8 + g_t8_0" in program
    parameters = set(re.findall(r"\b(\w+_(?:weight|bias))\b", forward))
    assert sorted(re.findall(r"^\s+(\w+)\.grad \+= g_\1$", backward, re.M)) == sorted(parameters)  # each .grad


def printed_by(cell) -> str:
    return "".join(out.get("text", "") for out in cell.outputs if out.get("name") == "stdout")


def markdown_between(name, first, last) -> str:
    """The notebook's Markdown from the heading ``first`` up to the heading ``last``, on one line."""
    notebook = nbformat.read(os.path.join(NOTEBOOKS, name), as_version=4)
    text = "\n".join(cell.source for cell in notebook.cells if cell.cell_type == "markdown")
    return " ".join(text[text.index(first):text.index(last)].split())


def test_the_next_word_notebook_prints_the_recall_claims_of_the_ten_seed_record():
    """Its table and claims over seeds are the committed record's as today's code states them,
    and its recall text speaks of the binder and the reader, never of one seed's heads."""
    import json
    import sys
    sys.path.insert(0, os.path.join(REPO, "examples"))
    from recall_circuit_seeds import claims, markdown_table
    with open(os.path.join(REPO, "docs", "recall-circuit-seeds.json"), encoding="utf-8") as file:
        record = json.load(file)
    printed = printed_by(code_cell("attention_from_next_word.ipynb", "print(markdown_table(runs))"))
    for sentence in claims(record):
        assert sentence in printed, f"re-execute the notebook: it should print {sentence!r}"
    avx2 = [runs for machine, runs in record["machines"].items() if machine.endswith("32-byte vectors")]
    assert avx2 and markdown_table(avx2[0]) in printed
    text = markdown_between("attention_from_next_word.ipynb", "## The recall circuit forming",
                            "## What the sources teach, measured")
    assert not re.search(r"\bheads? \d", text), re.search(r".{60}\bheads? \d.{20}", text).group(0)
    assert "seeds 0-4" not in text and "the binder" in text.lower() and "the reader" in text.lower()


def test_the_next_word_notebooks_recall_run_is_seed_0_of_the_record():
    """The notebook trains seed 0 with the command's defaults: what it prints of the circuit is the
    record's seed-0 run on the arithmetic the notebook was run with (its first cell prints it)."""
    import json
    with open(os.path.join(REPO, "docs", "recall-circuit-seeds.json"), encoding="utf-8") as file:
        machines = json.load(file)["machines"]
    made_with = printed_by(code_cell("attention_from_next_word.ipynb", "floats rounded by")).split(": ", 1)[1].strip()
    run = next(run for run in machines[made_with] if run["seed"] == 0)
    printed = printed_by(code_cell("attention_from_next_word.ipynb", "circuit = measure_recall_circuit(snapshots)"))
    assert f"stopped at step {run['last_step']}" in printed
    from viz.recall_circuit import heads_text
    assert (f"the binder, layer 0 {heads_text(run['binder_heads'])}, binds (each place on its own name "
            f"{run['binding']:.2f}) from step {run['binder_step']}; layer 1 head {run['reader_head']} reads the "
            f"asked place ({run['reading']:.2f}) from step {run['reader_step']}; recall at 95% from step "
            f"{run['recall_step']}") in printed, printed


def test_the_next_word_notebook_prints_the_sources_record_the_docs_state():
    from transformer.ladder.variants import load_record
    from transformer.ladder.variants_table import accuracy_table, roles_table
    record = load_record(os.path.join(REPO, "docs", "ladder-sources.json"))
    printed = printed_by(code_cell("attention_from_next_word.ipynb", "print(roles_table(sources))"))
    assert accuracy_table(record, [v["name"] for v in record["variants"]]) in printed
    assert roles_table(record) in printed
    text = markdown_between("attention_from_next_word.ipynb", "## What the sources teach, measured", "![")
    seeds = record["config"]["seeds"]
    assert f"seeds {seeds[0]}-{seeds[-1]}" in text and "seeds 0-4" not in text
