"""The attention notebook: its committed outputs are complete, and (slow) re-executing it
gives the same numbers as the committed outputs, in every cell, within the time budget.

A change to a kernel, an optimizer or the language that moves any printed number makes the
second test fail until the notebook is re-run and committed. The time budget is checked as CPU
time (the kernel's and its workers'), which a busy machine does not inflate the way it does wall
time: 300 s of CPU is at most 150 s on two cores (``jupyter nbconvert --execute
--to notebook --inplace notebooks/attention_from_next_word.ipynb``).
"""
import os
import re
import resource
import time

import pytest

from transformer.parallel.threads import arithmetic

nbformat = pytest.importorskip("nbformat", reason="pip install -e '.[test]' installs nbformat")
nbclient = pytest.importorskip("nbclient", reason="pip install -e '.[test]' installs nbclient")

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NOTEBOOK = os.path.join(REPO, "notebooks", "attention_from_next_word.ipynb")
PICTURES = 10                  # every picture drawn by its own cell
NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:e[-+]?\d+)?")
CLOCK = re.compile(r"trained in \d+ s|[\d.]+ s wall")      # the only numbers that depend on the machine


def code_cells(notebook):
    return [cell for cell in notebook.cells if cell.cell_type == "code"]


def printed(cell) -> str:
    return "".join(out.get("text", "") for out in cell.outputs if out.get("name") == "stdout")


def numbers(cell) -> list:
    """Every number the cell prints, in order, except the clock's."""
    return NUMBER.findall(CLOCK.sub("", printed(cell)))


def pictures(notebook) -> int:
    return sum("image/png" in out.get("data", {}) for cell in code_cells(notebook) for out in cell.outputs)


def test_the_committed_notebook_keeps_its_outputs_in_order():
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    code = code_cells(notebook)
    assert [cell.execution_count for cell in code] == list(range(1, len(code) + 1))
    assert pictures(notebook) == PICTURES
    assert not [out for cell in code for out in cell.outputs if out.output_type == "error"]
    text = "".join(printed(cell) for cell in code)
    assert "all three equal" in text and "(exactly 0)" in text
    assert "third row, / sqrt(2): [0.248 0.248 0.503]" in text
    assert committed_arithmetic(notebook).endswith("-byte vectors")
    assert "voting with its value, W_v x: {'rock': 'paper', 'paper': 'scissors', 'scissors': 'rock'}" in text
    assert re.search(r"the binder, layer 0 heads? [\d, and]+, binds .* layer 1 head \d reads the asked place .* recall at "
                     r"95% from step \d+", text)


def committed_arithmetic(notebook) -> str:
    """What rounded the committed run's floats, as its first cell printed it."""
    return re.search(r"floats rounded by: (.*)", printed(code_cells(notebook)[0])).group(1).strip()


@pytest.mark.slow
def test_re_executing_the_notebook_prints_its_committed_numbers(tmp_path, monkeypatch):
    committed = nbformat.read(NOTEBOOK, as_version=4)
    if committed_arithmetic(committed) != arithmetic():
        pytest.skip(f"the committed run's floats were rounded by {committed_arithmetic(committed)}; this machine's "
                    f"by {arithmetic()}: its numbers would differ (re-execute the notebook here to compare)")
    fresh = nbformat.read(NOTEBOOK, as_version=4)
    folder = tmp_path / "notebooks"
    folder.mkdir()
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [REPO, os.environ.get("PYTHONPATH")])))
    client = nbclient.NotebookClient(fresh, timeout=600, kernel_name="python3",
                                     resources={"metadata": {"path": str(folder)}})
    start, cpu_start = time.perf_counter(), children_cpu()
    client.execute()                    # and shuts the kernel down, so its CPU time is counted
    seconds, cpu = time.perf_counter() - start, children_cpu() - cpu_start
    for number, (old, new) in enumerate(zip(code_cells(committed), code_cells(fresh)), start=1):
        assert numbers(old) == numbers(new), (f"code cell {number} prints other numbers than the committed "
                                              f"notebook: re-run it and commit\n--- committed\n{printed(old)}"
                                              f"\n--- now\n{printed(new)}")
    assert pictures(fresh) == PICTURES
    text = "".join(printed(cell) for cell in code_cells(fresh))
    difference = float(re.search(r"from central differences: ([\d.e+-]+)", text).group(1))
    assert difference < 1e-6
    assert cpu <= 300, f"the notebook took {cpu:.0f} s of CPU ({seconds:.0f} s wall)"


def children_cpu() -> float:
    """CPU seconds of this process's finished children and their finished children."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def test_the_notebook_trains_seed_0_of_the_committed_ladder_runs():
    """The notebook's ladder is seed 0 of docs/ladder-run.json and its positions-without-blend line
    seed 0 of the ablation's record (tests/test_ladder_lessons.py checks the lessons on those
    records; re-executing the notebook, above, re-trains seed 0 of both)."""
    import dataclasses

    from transformer.commands.ladder import format_table
    from transformer.ladder import LadderResult

    def record(name):
        return LadderResult.load(os.path.join(REPO, "docs", name))

    def first_seed(result):
        rungs = [dataclasses.replace(r, accuracy={k: v[:1] for k, v in r.accuracy.items()}) for r in result.rungs]
        return dataclasses.replace(result, seeds=result.seeds[:1], rungs=rungs)

    ladder, alone = record("ladder-run.json"), record("ladder-positions-without-blend.json")
    assert ladder.seeds[0] == alone.seeds[0] == 0
    text = "".join(printed(cell) for cell in code_cells(nbformat.read(NOTEBOOK, as_version=4)))
    assert format_table(first_seed(ladder)) in text
    positions = [r.name for r in ladder.rungs].index("positions")
    assert (f"positions on colour, seed 0: {100 * ladder.rungs[positions].accuracy['colour'][0]:.1f}% with blend in "
            f"the language, {100 * alone.rungs[0].accuracy['colour'][0]:.1f}% without it") in text


def test_the_notebooks_recall_run_forms_the_circuit_before_recall_is_learned():
    """Seed 0 of tests/test_recall_circuit.py's claim, on the committed notebook's printed run
    (re-executing the notebook, above, trains it again and must print the same numbers): both
    heads before recall reaches 95%, and before them a shortcut that kept recall below 95%."""
    text = "".join(printed(cell) for cell in code_cells(nbformat.read(NOTEBOOK, as_version=4)))
    found = re.search(r"binds \(each place on its own name ([\d.]+)\) from step (\d+); layer 1 head \d reads the "
                      r"asked place \(([\d.]+)\) from step (\d+); recall at 95% from step (\d+)", text)
    binding, binder, reading, reader, recall = (float(x) for x in found.groups())
    assert binder <= recall and reader <= recall and binding >= 0.5 and reading >= 0.5
    shortcut = re.search(r"from step (\d+) to step (\d+) the reader read one place whichever name was asked: "
                         r"[a-z]+, [a-z]+; held-out recall meanwhile (\d+)%-(\d+)%", text)
    assert shortcut and int(shortcut.group(2)) <= recall and int(shortcut.group(4)) < 95
