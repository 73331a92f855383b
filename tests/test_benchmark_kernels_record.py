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
    bits = benchmark_kernels.machine_info()["vector_bits"]
    before = json.loads(verdicts_copy.read_text())
    benchmark_kernels.run_kernel_benchmarks(quick=True, record=True, names=("relu", "minigrad.ops.elementwise.relu_backward"))
    after = json.loads(verdicts_copy.read_text())
    mine_before, mine_after = (registry.record_for_width(record, bits) for record in (before, after))
    named = {"minigrad.ops.elementwise.relu", "minigrad.ops.elementwise.relu_backward"}
    assert set(mine_after["kernels"]) == set(mine_before["kernels"])
    for key, verdict in mine_before["kernels"].items():
        if key not in named:
            assert mine_after["kernels"][key] == verdict, key      # every other verdict as it was recorded
    for key in named:
        assert set(mine_after["kernels"][key]) == {"shape", "kernel_us", "numpy_us", "speedup"}
        assert mine_after["kernels"][key]["kernel_us"] > 0
    assert mine_after["machine"] == mine_before["machine"] and mine_after["date"] == mine_before["date"]
    assert mine_after["partial_records"][-1]["kernels"] == sorted(named)
    for width in {"256", "512"} - {str(bits)}:                   # the other width's record untouched
        theirs_after, theirs_before = (registry.record_for_width(record, int(width)) for record in (after, before))
        assert theirs_after["kernels"] == theirs_before["kernels"]
    printed = capsys.readouterr().out
    assert "relu 128x19x256" in printed and "softmax" not in printed     # nothing else was timed


def _row(key, kernel_us):
    return {"key": key, "shape": "3", "kernel": {"median_us": kernel_us}, "numpy": {"median_us": 10.0},
            "speedup": 10.0 / kernel_us}


def test_a_machine_of_another_vector_width_gets_a_record_of_its_own():
    avx2 = benchmark_kernels.verdicts({"vector_bits": 256}, [_row("a", 5.0), _row("b", 20.0)])
    avx512 = benchmark_kernels.recorded_file(avx2, {"vector_bits": 512}, [_row("a", 5.0), _row("b", 2.0)])
    assert {key: avx512[key] for key in avx2} == avx2                      # the main record as it was
    assert avx512["other_vector_widths"]["512"]["kernels"]["b"]["kernel_us"] == 2.0
    assert registry.record_for_width(avx512, 256)["kernels"]["b"]["kernel_us"] == 20.0
    assert registry.record_for_width(avx512, 512)["kernels"]["b"]["kernel_us"] == 2.0
    assert registry.record_for_width(avx512, 128) is avx512                # a width never measured: the main one
    again = benchmark_kernels.recorded_file(avx512, {"vector_bits": 512}, [_row("b", 3.0)], names=("b",))
    assert again["other_vector_widths"]["512"]["kernels"]["a"]["kernel_us"] == 5.0     # kept
    assert again["other_vector_widths"]["512"]["kernels"]["b"]["kernel_us"] == 3.0
    assert again["kernels"] == avx2["kernels"]
    main_again = benchmark_kernels.recorded_file(avx512, {"vector_bits": 256}, [_row("a", 1.0), _row("b", 1.0)])
    assert main_again["other_vector_widths"] == avx512["other_vector_widths"]   # a new main record keeps the others
    with pytest.raises(ValueError, match="no verdicts of 128-bit vectors"):
        benchmark_kernels.recorded_file(avx512, {"vector_bits": 128}, [_row("a", 1.0)], names=("a",))


def test_the_registry_reads_the_record_of_its_vector_width(tmp_path):
    avx2 = benchmark_kernels.verdicts({"vector_bits": 256}, [_row("k", 20.0)])
    both = benchmark_kernels.recorded_file(avx2, {"vector_bits": 512}, [_row("k", 2.0)])
    path = tmp_path / "measured.json"
    path.write_text(json.dumps(both))
    assert registry.read_verdicts(str(path), 512)["k"]["kernel_us"] == 2.0
    assert registry.read_verdicts(str(path), 256)["k"]["kernel_us"] == 20.0
    both["other_vector_widths"]["512"]["kernels"]["k"]["numpy_us"] = "fast"    # checked as the main one is
    path.write_text(json.dumps(both))
    with pytest.raises(registry.Unreadable):
        registry.read_verdicts(str(path), 512)
    both["other_vector_widths"]["512"]["kernels"] = {}          # a kernel its width never measured:
    path.write_text(json.dumps(both))
    assert registry.read_verdicts(str(path), 512)["k"]["kernel_us"] == 20.0     # the main record's verdict


def test_an_unknown_kernel_name_is_one_line_and_exit_2_before_anything_is_timed(verdicts_copy):
    result = subprocess.run([sys.executable, os.path.join(REPO, "examples", "benchmark_kernels.py"),
                             "--record", "softplux"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1 and "no registered kernel named softplux" in result.stderr
    assert "relu" in result.stderr                                     # it lists the names there are
