"""The notebooks run top to bottom (nbclient, a real Jupyter kernel), so they cannot rot.

Each cell has a time limit; a cell that raises fails the test with the cell's
traceback. The committed files must also carry their outputs (executed in
order), so they read on GitHub without running. The kernel runs in a
temporary folder, so files a notebook writes (``../runs/viz/...``) stay out of
the checkout. Without Graphviz's ``dot`` every graph cell must still run and show
the graph's DOT source with the install hint.
"""
import os
import re
import shutil
import time

import pytest

nbformat = pytest.importorskip("nbformat", reason="pip install -e '.[test]' installs nbformat")
nbclient = pytest.importorskip("nbclient", reason="pip install -e '.[test]' installs nbclient")

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NOTEBOOKS = os.path.join(REPO, "notebooks")
CELL_TIMEOUT_S = 600        # a hang guard: a busy 2-core machine with a cold Numba cache is slow
INSTALL_HINT = "apt-get install graphviz"


def run_notebook(name, tmp_path, monkeypatch, path=None):
    """Execute the notebook in ``tmp_path/notebooks`` (the package importable from the checkout)."""
    notebook = nbformat.read(os.path.join(NOTEBOOKS, name), as_version=4)
    folder = tmp_path / "notebooks"
    folder.mkdir()
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [REPO, os.environ.get("PYTHONPATH")])))
    if path is not None:
        monkeypatch.setenv("PATH", path)          # the kernel inherits it
    client = nbclient.NotebookClient(notebook, timeout=CELL_TIMEOUT_S, kernel_name="python3",
                                     resources={"metadata": {"path": str(folder)}})
    start = time.perf_counter()
    client.execute()            # raises CellExecutionError naming the cell that failed
    return notebook, time.perf_counter() - start


def outputs(notebook, kind):
    return [out for cell in notebook.cells if cell.cell_type == "code" for out in cell.outputs
            if kind in out.get("data", {}) or out.get("name") == kind]


def graph_outputs(notebook, dot_installed):
    """The cells' drawn graphs: SVGs with `dot`, else their DOT source with the install hint."""
    if dot_installed:
        return outputs(notebook, "image/svg+xml")
    return [out for out in outputs(notebook, "text/html")
            if "digraph" in out["data"]["text/html"] and INSTALL_HINT in out["data"]["text/html"]]


@pytest.mark.parametrize("name", ["autograd_from_the_inside.ipynb", "date_transformer.ipynb",
                                  "higher_order_autograd.ipynb"])
def test_committed_notebooks_keep_their_outputs_in_order(name):
    notebook = nbformat.read(os.path.join(NOTEBOOKS, name), as_version=4)
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert [cell.execution_count for cell in code] == list(range(1, len(code) + 1))
    assert outputs(notebook, "image/svg+xml"), "the graphs must be drawn in the saved notebook"
    assert not [out for cell in code for out in cell.outputs if out.output_type == "error"]


# what only the machine that ran a notebook has: a path of its own, or a warning it printed
ABSOLUTE_PATH = re.compile(r"(?:^|[\s'\"(=])(?:/(?:home|root|tmp|work|Users|usr|opt|var|private|mnt)/|[A-Z]:\\)")
WARNING = re.compile(r"\b\w*Warning: ")


def readable_outputs(notebook):
    """Each code cell's printed and displayed text (streams, text/plain, text/html, errors)."""
    for number, cell in enumerate((c for c in notebook.cells if c.cell_type == "code"), start=1):
        for out in cell.outputs:
            texts = [out.get("text", ""), *out.get("traceback", [])]
            texts += [out.get("data", {}).get(kind, "") for kind in ("text/plain", "text/html")]
            yield number, "".join("".join(text) if isinstance(text, list) else text for text in texts)


@pytest.mark.parametrize("name", sorted(name for name in os.listdir(NOTEBOOKS) if name.endswith(".ipynb")))
def test_committed_outputs_show_no_machine_path_and_no_warning(name):
    notebook = nbformat.read(os.path.join(NOTEBOOKS, name), as_version=4)
    for number, text in readable_outputs(notebook):
        for pattern in (ABSOLUTE_PATH, WARNING):
            found = pattern.search(text)
            assert not found, f"code cell {number} of {name} shows {text[max(0, found.start() - 60):found.end() + 60]!r}"


@pytest.mark.parametrize("dot", ["with dot", "without dot"])
def test_autograd_notebook_runs(dot, tmp_path, monkeypatch, request):
    dot_installed = dot == "with dot" and shutil.which("dot") is not None
    if dot == "with dot" and not dot_installed:
        pytest.skip("Graphviz's `dot` is not installed (apt-get install graphviz | brew install graphviz)")
    path = None if dot_installed else request.getfixturevalue("path_without_dot")
    notebook, seconds = run_notebook("autograd_from_the_inside.ipynb", tmp_path, monkeypatch, path)
    text = "".join(out["text"] for out in outputs(notebook, "stdout"))
    assert "dy/dx = [7.]" in text and "gradcheck caught it" in text
    assert len(graph_outputs(notebook, dot_installed)) == 3
    animation = tmp_path / "runs" / "viz" / "notebook_backward"
    if dot_installed:
        assert os.path.getsize(f"{animation}.gif") > 0 and os.path.getsize(f"{animation}.html") > 0
    else:
        assert f"{animation}.dot" in text.replace("../", f"{tmp_path}/") and INSTALL_HINT in text
        assert open(f"{animation}.dot", encoding="utf-8").read().count("digraph") == 4


def test_higher_order_notebook_runs(tmp_path, monkeypatch):
    dot_installed = shutil.which("dot") is not None
    notebook, seconds = run_notebook("higher_order_autograd.ipynb", tmp_path, monkeypatch)
    text = "".join(out["text"] for out in outputs(notebook, "stdout"))
    assert "gradgradcheck: True" in text and "d/dx [x * d/dy (x + y)] = 1.0" in text
    assert "wide R^1000 -> R: jacrev" in text and "-> jacrev" in text.split("tall")[0]
    assert "-> jacfwd" in text.split("tall")[1]
    speedups = [float(x) for x in re.findall(r"-> jac(?:rev|fwd) (\d+)x faster", text)]
    assert len(speedups) == 2 and min(speedups) >= 10, speedups     # each mode wins its side by 10x or more
    assert len(graph_outputs(notebook, dot_installed)) == 1
    # the date model: one Hessian-vector product against central differences of the loss (small h)
    hvp = float(re.search(r"dᵀHd = ([\d.]+)", text).group(1))
    central = float(re.search(r"h = 1e-05: ([\d.]+)", text).group(1))
    assert abs(hvp - central) <= 1e-4 * abs(central), (hvp, central)


@pytest.mark.slow
def test_date_transformer_notebook_runs_and_trains_a_good_model(tmp_path, monkeypatch):
    dot_installed = shutil.which("dot") is not None
    notebook, seconds = run_notebook("date_transformer.ipynb", tmp_path, monkeypatch)
    text = "".join(out["text"] for out in outputs(notebook, "stdout"))
    assert "[65, 1, 6, 7, 6, 62, 1, 1, 62, 3, 0, 66]" in text and "held-out exact match" in text
    assert len(graph_outputs(notebook, dot_installed)) == 1                 # one attention step
    assert len(outputs(notebook, "image/png")) == 5          # positions, curves, three heatmaps
    committed = nbformat.read(os.path.join(NOTEBOOKS, "date_transformer.ipynb"), as_version=4)
    assert_prints_its_committed_numbers(committed, notebook)


NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:e[-+]?\d+)?")
CLOCK = re.compile(r"in [\d.]+ s\b")          # the only number that depends on how busy the machine is


def printed_numbers(cell) -> list:
    """Every number a cell prints or shows as text (the walkthrough's tables), but the clock's."""
    text = "".join(out.get("text", "") + out.get("data", {}).get("text/markdown", "") for out in cell.outputs)
    return NUMBER.findall(CLOCK.sub("", text))


def assert_prints_its_committed_numbers(committed, fresh):
    """Each code cell of ``fresh`` (executed now) prints the numbers the committed notebook shows,
    where this machine rounds floats as the committed run's did (its first cell says how)."""
    from transformer.parallel.threads import arithmetic
    code = lambda notebook: [cell for cell in notebook.cells if cell.cell_type == "code"]   # noqa: E731
    first = "".join(out.get("text", "") for out in code(committed)[0].outputs)
    rounded_by = re.search(r"floats rounded by: (.*)", first).group(1).strip()
    if rounded_by != arithmetic():
        pytest.skip(f"ran and trained; the committed run's floats were rounded by {rounded_by}, this machine's by "
                    f"{arithmetic()}: its numbers would differ, so they are compared only there")
    for number, (old, new) in enumerate(zip(code(committed), code(fresh)), start=1):
        assert printed_numbers(old) == printed_numbers(new), (
            f"code cell {number} prints other numbers than the committed notebook: re-execute it and commit")
