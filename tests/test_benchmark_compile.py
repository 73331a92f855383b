"""The size benchmark's torch.compile column: a third process in each round, its compile time apart
from its steady step, and a one-line reason when it cannot compile.

Without torch, a stand-in Python plays the reference: it keeps a file in the inductor cache folder
the benchmark hands it, so its first compile is slow and the later ones fast, as inductor's are.
With a Python with torch named by ``MINIGRAD_TORCH_PYTHON``, ``examples/torch_step.py --compile``
itself runs (a tiny model; the first compile takes a minute on two cores).
"""
import datetime
import json
import os
import stat
import subprocess
import sys

import pytest

from examples_loader import load_example

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(REPO, "examples")
TORCH_PYTHON = os.environ.get("MINIGRAD_TORCH_PYTHON")
TINY = (16, 2, 1, 32)


@pytest.fixture(scope="module")
def sizes():
    return load_example("benchmark_sizes")


def stand_in(tmp_path, compile_error=None, has_compile=True):
    """An executable standing in for a Python with torch. Eager: a 100 ms step. ``--compile``: an
    80 ms step, its first step 60 s with an empty $TORCHINDUCTOR_CACHE_DIR and 2 s once it holds a
    file (or the one-line error SUMMARY torch_step.py prints when compiling fails)."""
    script = tmp_path / "python-with-torch"
    compiled = (f"echo 'SUMMARY {json.dumps({'error': compile_error})}'; exit 1" if compile_error else
                'if [ -e "$TORCHINDUCTOR_CACHE_DIR/kernels" ]; then first=2000; else first=60000; fi\n'
                '  touch "$TORCHINDUCTOR_CACHE_DIR/kernels"\n'
                '  echo "SUMMARY {\\"first_step_ms\\": $first, \\"median_step_ms\\": 80.0, \\"p10_step_ms\\": 1.0, '
                '\\"p90_step_ms\\": 2.0, \\"median_step_cpu_ms\\": 150.0}"')
    probe = "exit 0" if has_compile else "echo 'AssertionError: torch 1.13.1 has no torch.compile' >&2; exit 1"
    script.write_text(f"""#!/bin/sh
case "$*" in
  -c*torch.compile*) {probe} ;;
  -c*) echo 2.x ;;
  *--compile*) {compiled} ;;
  *) echo 'SUMMARY {{"first_step_ms": 300.0, "median_step_ms": 100.0, "p10_step_ms": 1.0, "p90_step_ms": 2.0, "median_step_cpu_ms": 190.0}}' ;;
esac
""")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return str(script)


def test_compile_joins_each_round_and_its_compile_time_stays_out_of_the_step(sizes, tmp_path):
    said = []
    rows = sizes.run_sizes(stand_in(tmp_path), sizes=[TINY], say=said.append, compiled=True)   # 2 rounds
    row = rows[0]
    assert row["rounds"] == row["compiled_rounds"] == 2 and row["errors"] == []
    assert row["compiled_median_step_ms"] == 80.0 and row["torch_median_step_ms"] == 100.0
    assert row["compiled_ratio"] == pytest.approx(row["minigrad_median_step_ms"] / 80.0)
    assert row["compile_empty_cache_ms"] == 60000 and row["compile_cached_ms"] == 2000     # a cache of the sweep's
    assert "torch.compile 80.0 ms" in said[0] and "PyTorch eager 100.0 ms" in said[0]
    printed = []
    sizes.print_rows(rows, (100.0, None), printed.append)
    assert any("torch.compile: 80.0 ms warm" in line and "60.0 s from scratch, 2.0 s with the cache filled" in line
               for line in printed), printed


def test_a_failed_compile_is_one_line_and_the_other_columns_are_measured(sizes, tmp_path):
    why = "torch.compile failed: InductorError: CppCompileError: C++ compile error"
    rows = sizes.run_sizes(stand_in(tmp_path, compile_error=why), quick=True, sizes=[TINY], say=lambda s: None,
                           compiled=True)
    row = rows[0]
    assert row["compiled_error"] == why and row["rounds"] == 1 and row["torch_median_step_ms"] == 100.0
    printed = []
    sizes.print_rows(rows, (100.0, None), printed.append)
    assert f"{TINY[0]:>7} torch.compile: failed: {why}" in printed
    page = render(sizes, rows)
    assert f"| {TINY[0]} | failed: {why} |" in page and "## torch.compile beside them" in page


def test_without_compile_there_is_no_third_process_and_no_section(sizes, tmp_path):
    rows = sizes.run_sizes(stand_in(tmp_path, compile_error="never asked"), quick=True, sizes=[TINY],
                           say=lambda s: None)
    assert "compiled_error" not in rows[0] and "compiled_rounds" not in rows[0]
    assert "torch.compile" not in render(sizes, rows)


def render(sizes, rows):
    info = {"cpu": "C", "cores": 2, "mhz": None, "flags": [], "python": "3", "numpy": "2", "blas": "b", "numba": "0"}
    return sizes.render_page(rows, {}, info, (100.0, None), datetime.datetime(2026, 1, 1), "cmd", "2")


def test_the_page_has_a_compile_table_from_the_measured_rows(sizes):
    blocks = {who: [{"first_step_ms": first, "median_step_ms": step, "median_step_cpu_ms": cpu, "load_average": 1.0,
                     "foreign": 0.3} for first, step, cpu in values]
              for who, values in {"minigrad": [(900, 50, 95), (800, 54, 99)], "torch": [(120, 70, 140), (110, 66, 130)],
                                  "compiled": [(75000, 80, 150), (7000, 84, 160)]}.items()}
    row = sizes.size_row((64, 4, 2, 256), 40, 10, blocks)
    assert row["compiled_ratios"] == [50 / 80, 54 / 84]
    page = render(sizes, [row])
    assert "| 64 | 82.0 ms | **0.63x** | 0.62 0.64 | 75.0 s | 7.0 s | 155 ms | 2 |" in page
    assert "**Not quiet:** other processes used up to 30% of the CPUs" in page


def test_a_torch_without_compile_leaves_the_column_out_with_the_reason(sizes, tmp_path):
    assert sizes.has_torch_compile(stand_in(tmp_path)) is None
    assert sizes.has_torch_compile(stand_in(tmp_path, has_compile=False)) == \
        "AssertionError: torch 1.13.1 has no torch.compile"


def test_the_compiled_reference_is_asked_only_for_options_it_has(sizes):
    import ast
    with open(sizes.TORCH_STEP) as f:
        tree = ast.parse(f.read())
    options = {call.args[0].value for call in ast.walk(tree)
               if isinstance(call, ast.Call) and getattr(call.func, "attr", None) == "add_argument"}
    asked = [a for a in sizes.torch_command("python", (64, 4, 2, 256), 10, 2, compiled=True)[2:] if a.startswith("--")]
    assert "--compile" in asked and set(asked) <= options


@pytest.mark.parametrize("argv, message", [
    (["--sizes", "--torch-python", "x", "--d-models", "32"], "--d-models wants some of 64,128,256,512"),
    (["--d-models", "64"], "--d-models and --no-compile go with --sizes"),
    (["--no-compile"], "--d-models and --no-compile go with --sizes"),
    (["--sizes", "--torch-python", "x", "--d-models", "64", "--write-docs"], "leave out --d-models")])
def test_bad_size_options_are_one_line_and_exit_2(argv, message):
    result = subprocess.run([sys.executable, os.path.join(EXAMPLES, "benchmark.py"), *argv],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and message in result.stderr and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith("benchmark.py: error: ")    # after the usage: one line


def torch_step(tmp_path, *extra, env=None):
    command = [TORCH_PYTHON, os.path.join(EXAMPLES, "torch_step.py"), "--d-model", "16", "--heads", "2",
               "--layers", "1", "--d-ff", "32", "--batch", "8", "--steps", "4", "--skip", "1", "--compile", *extra]
    environment = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor"), **(env or {})}
    result = subprocess.run(command, capture_output=True, text=True, timeout=900, env=environment)
    line = [line for line in result.stdout.splitlines() if line.startswith("SUMMARY ")]
    assert line, result.stdout + result.stderr
    return result, json.loads(line[-1][len("SUMMARY "):])


needs_torch = pytest.mark.skipif(not TORCH_PYTHON, reason="set MINIGRAD_TORCH_PYTHON to a Python with torch "
                                                          "(pip install torch in a venv of its own)")


@needs_torch
@pytest.mark.slow
def test_torch_step_compiles_and_reports_the_compile_apart(tmp_path):
    result, summary = torch_step(tmp_path)
    assert result.returncode == 0 and summary["compiled"] is True
    assert summary["first_step_ms"] > 3 * summary["median_step_ms"] > 0      # the first step holds the compile


@needs_torch
@pytest.mark.slow
def test_torch_step_says_in_one_line_why_it_could_not_compile(tmp_path):
    result, summary = torch_step(tmp_path, env={"CXX": str(tmp_path / "no-such-compiler")})
    assert result.returncode == 1 and list(summary) == ["error"]
    assert summary["error"].startswith("torch.compile failed: ") and "\n" not in summary["error"]


@pytest.mark.parametrize("has_compile", [True, False])
def test_the_sweep_asks_for_compile_only_where_torch_has_it(sizes, tmp_path, monkeypatch, has_compile):
    asked, said = {}, []
    monkeypatch.setattr(sizes, "peak_gflops", lambda info: (100.0, None))
    monkeypatch.setattr(sizes, "run_sizes", lambda python, quick, sizes, say, compiled: asked.update(
        sizes=sizes, compiled=compiled) or [])
    sizes.run_size_benchmark(stand_in(tmp_path, has_compile=has_compile), say=said.append, d_models=[64],
                             loaded=False)
    assert asked == {"sizes": [(64, 4, 2, 256)], "compiled": has_compile}
    left_out = "torch.compile column left out: AssertionError: torch 1.13.1 has no torch.compile"
    assert (left_out in said) is not has_compile
    assert any("and torch.compile (inductor) ==" in line for line in said) is has_compile
