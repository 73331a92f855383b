"""The size benchmark: its FLOP count, its alternating rounds (a real minigrad process, a stand-in
for PyTorch), the page and plot it writes, and its one-line refusals."""
import ast
import os
import stat
import subprocess
import sys

import pytest

from examples_loader import load_example

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(REPO, "examples")


@pytest.fixture(scope="module")
def sizes():
    return load_example("benchmark_sizes")


def test_the_flop_count_is_the_products_of_a_step(sizes):
    # one Linear (x @ W over B*T rows) counted by hand: forward 2*M*N*K, backward twice that
    d, rows = 64, 128 * 19
    assert sizes.step_flops(d, 0, 4 * d) == 3 * 2 * rows * d * 68          # no layers: the output layer alone
    # the default model: 2.94 GFLOP, and every size's count grows as layers x d^2
    assert abs(sizes.step_flops(64, 2, 256) / 1e9 - 2.938) < 1e-3
    assert 2 * sizes.step_flops(64, 2, 256) < sizes.step_flops(64, 4, 256) + sizes.step_flops(64, 0, 256) + 1


def fake_torch(tmp_path, median=100.0, fail=False):
    """An executable standing in for a Python with torch: prints a SUMMARY line (or fails)."""
    script = tmp_path / "fake_python"
    body = "echo 'Traceback: no torch' >&2; exit 1" if fail else (
        f"echo 'SUMMARY {{\"first_step_ms\": 900.0, \"median_step_ms\": {median}, \"p10_step_ms\": 1.0, "
        f"\"p90_step_ms\": 2.0, \"median_step_cpu_ms\": 3.0}}'")
    script.write_text("#!/bin/sh\n" + body + "\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return str(script)


def test_rounds_alternate_and_the_ratio_is_per_round(sizes, tmp_path):
    said = []
    rows = sizes.run_sizes(fake_torch(tmp_path, median=1e6), quick=True, sizes=[(16, 2, 1, 32)], say=said.append)
    row = rows[0]
    assert row["rounds"] == 1 and row["errors"] == [] and len(row["ratios"]) == 1
    assert 0 < row["minigrad_median_step_ms"] < 1e6 and row["torch_median_step_ms"] == 1e6
    assert row["ratio"] == pytest.approx(row["minigrad_median_step_ms"] / 1e6)
    assert row["minigrad_first_step_ms"] > 0 and row["minigrad_median_step_cpu_ms"] > 0
    assert "d_model  16 round 1" in said[0]


def test_a_failing_reference_is_reported_not_raised(sizes, tmp_path):
    rows = sizes.run_sizes(fake_torch(tmp_path, fail=True), quick=True, sizes=[(16, 2, 1, 32)], say=lambda s: None)
    assert rows[0]["rounds"] == 0 and "no SUMMARY line (exit 1)" in rows[0]["errors"][0]
    assert "no torch" in rows[0]["errors"][0]


def example_rows(sizes):
    row = sizes.size_row((64, 4, 2, 256), 10, 2, {
        "minigrad": [{"first_step_ms": 900, "median_step_ms": 30, "median_step_cpu_ms": 55, "load_average": 0.5,
                      "foreign": 0.01}, {"first_step_ms": 800, "median_step_ms": 32, "median_step_cpu_ms": 56,
                                         "load_average": 0.7, "foreign": 0.02}],
        "torch": [{"first_step_ms": 300, "median_step_ms": 50, "median_step_cpu_ms": 99, "load_average": 0.6,
                   "foreign": 0.0}, {"first_step_ms": 310, "median_step_ms": 40, "median_step_cpu_ms": 80,
                                     "load_average": 0.9, "foreign": 0.03}]})
    return [row]


def test_the_page_holds_the_measured_rows_the_machine_and_the_loaded_target(sizes):
    rows = example_rows(sizes)
    assert rows[0]["ratios"] == [30 / 50, 32 / 40] and rows[0]["ratio"] == pytest.approx((0.6 + 0.8) / 2)
    info = {"cpu": "Some CPU", "cores": 2, "mhz": 2450.0, "flags": ["avx", "avx2", "fma"], "python": "3.x",
            "numpy": "2.x", "blas": "openblas", "numba": "0.x"}
    loaded = {"quiet, two workers": [{"median_step_ms": 31.0}], "quiet, one worker": [{"median_step_ms": 55.0}],
              "one busy process beside it": [{"median_step_ms": 58.0, "foreign": 0.0},
                                             {"error": "took more than 600 s"}]}
    import datetime
    page = sizes.render_page(rows, loaded, info, (150.0, 156.8), datetime.datetime(2026, 11, 27, 3, 0),
                             "python examples/benchmark.py --sizes", "2.x")
    assert "2026-11-27 03:00 UTC" in page and "Some CPU, 2 cores" in page and "avx2" in page
    assert "| 64 | 4 | 2 | 256 | 2.94 | 31.0 ms | 45.0 ms | **0.70x** | 0.60 0.80 |" in page
    assert "150 GFLOP/s measured" in page and "157 GFLOP/s from the clock" in page
    assert "| one busy process beside it | 58.0 ms | 1 | 0.00-0.00 |" in page
    assert "56 / 90 ms" in page and "Not quiet" not in page        # medians 55.5 and 89.5
    assert "**1.05x** (target <= 1.1x: met)" in page


def test_a_busy_machine_is_said_on_the_page(sizes):
    rows = example_rows(sizes)
    rows[0]["foreign"] = [0.02, 0.45]
    info = {"cpu": "C", "cores": 2, "mhz": None, "flags": [], "python": "3", "numpy": "2", "blas": "b", "numba": "0"}
    import datetime
    page = sizes.render_page(rows, {}, info, (20.0, None), datetime.datetime(2026, 1, 1), "cmd", "2")
    assert "**Not quiet:** other processes used up to 45% of the CPUs" in page and "from the clock" not in page


def test_the_plot_is_written_atomically(sizes, tmp_path):
    path = tmp_path / "images" / "speed_by_size.png"
    sizes.write_plot(example_rows(sizes), str(path))
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [p.name for p in path.parent.iterdir()] == ["speed_by_size.png"]


def test_the_reference_is_asked_only_for_options_it_has(sizes):
    with open(sizes.TORCH_STEP) as f:
        tree = ast.parse(f.read())
    options = {call.args[0].value for call in ast.walk(tree)
               if isinstance(call, ast.Call) and getattr(call.func, "attr", None) == "add_argument"}
    asked = [a for a in sizes.torch_command("python", (64, 4, 2, 256), 10, 2)[2:] if a.startswith("--")]
    assert set(asked) <= options


@pytest.mark.parametrize("argv, message", [(["--sizes"], "--sizes needs --torch-python"),
                                           (["--write-docs"], "--write-docs goes with --sizes")])
def test_bad_options_are_one_line_and_exit_2(argv, message):
    result = subprocess.run([sys.executable, os.path.join(EXAMPLES, "benchmark.py"), *argv],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and message in result.stderr and "Traceback" not in result.stderr


def test_a_reference_python_without_torch_is_one_clear_error(sizes, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        sizes.run_size_benchmark(fake_torch(tmp_path, fail=True), quick=True, say=lambda s: None)
    assert exit_.value.code == 2 and "cannot import torch" in capsys.readouterr().err
