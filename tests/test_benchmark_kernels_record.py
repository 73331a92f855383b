"""``examples/benchmark_kernels.py --record NAME...``: a new op's verdicts are recorded without
re-measuring (and so rewriting) every other kernel's. The real verdicts file is never touched:
the tests record into a copy."""
import json
import os
import shutil
import subprocess
import sys

import pytest

from minigrad.kernels import registry

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "examples"))
import benchmark_kernels  # noqa: E402


@pytest.fixture
def verdicts_copy(tmp_path, monkeypatch):
    copy = tmp_path / "measured.json"
    shutil.copyfile(registry.MEASURED, copy)
    monkeypatch.setattr(registry, "MEASURED", str(copy))
    return copy


def test_recording_named_kernels_rewrites_only_their_verdicts(verdicts_copy, capsys):
    before = json.loads(verdicts_copy.read_text())
    benchmark_kernels.run_kernel_benchmarks(quick=True, record=True, names=("relu", "minigrad.ops.elementwise.relu_backward"))
    after = json.loads(verdicts_copy.read_text())
    named = {"minigrad.ops.elementwise.relu", "minigrad.ops.elementwise.relu_backward"}
    assert set(after["kernels"]) == set(before["kernels"])
    for key, verdict in before["kernels"].items():
        if key not in named:
            assert after["kernels"][key] == verdict, key      # every other verdict as it was recorded
    for key in named:
        assert set(after["kernels"][key]) == {"shape", "kernel_us", "numpy_us", "speedup"}
        assert after["kernels"][key]["kernel_us"] > 0
    assert after["machine"] == before["machine"] and after["date"] == before["date"]
    assert after["partial_records"][-1]["kernels"] == sorted(named)
    printed = capsys.readouterr().out
    assert "relu 128x19x256" in printed and "softmax" not in printed     # nothing else was timed


def test_an_unknown_kernel_name_is_one_line_and_exit_2_before_anything_is_timed(verdicts_copy):
    result = subprocess.run([sys.executable, os.path.join(REPO, "examples", "benchmark_kernels.py"),
                             "--record", "softplux"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1 and "no registered kernel named softplux" in result.stderr
    assert "relu" in result.stderr                                     # it lists the names there are
