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
    assert "voting with its value, W_v x: {'rock': 'paper', 'paper': 'scissors', 'scissors': 'rock'}" in text
    assert re.search(r"layer 0 head \d binds .* layer 1 head \d reads the asked place .* recall at 95% from step \d+", text)


@pytest.mark.slow
def test_re_executing_the_notebook_prints_its_committed_numbers(tmp_path, monkeypatch):
    committed = nbformat.read(NOTEBOOK, as_version=4)
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
