"""The load benchmark's busy processes never outlive it (normal exit, exception, Ctrl-C,
SIGTERM, even SIGKILL of the benchmark), stop at their deadline, and the PyTorch
reference's SUMMARY line is parsed (or its absence reported in one clear error)."""
import importlib.util
import os
import signal
import subprocess
import sys
import textwrap

import pytest

from examples_loader import load_example
from processes import alive, wait_for, wait_until_gone

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(REPO, "examples")

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc to see live processes")


@pytest.fixture(scope="module")
def benchmark_load():
    return load_example("benchmark_load")


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_busy_processes_burn_cpu_and_are_gone_after_the_block(benchmark_load):
    with benchmark_load.BusyProcesses(2) as busy:
        pids = busy.pids
        assert len(pids) == 2 and all(alive(pid) for pid in pids)
        assert wait_for(lambda: all(cpu_seconds(pid) > 0.05 for pid in pids))   # spinning, not sleeping
        assert sorted(spinners_of(os.getpid())) == sorted(pids)
    assert wait_until_gone(pids, 0.5) == []


def test_an_exception_in_the_block_still_stops_them(benchmark_load):
    with pytest.raises(RuntimeError, match="boom"):
        with benchmark_load.BusyProcesses(2) as busy:
            pids = busy.pids
            raise RuntimeError("boom")
    assert wait_until_gone(pids, 0.5) == []


def test_zero_busy_processes_starts_nothing(benchmark_load):
    with benchmark_load.BusyProcesses(0) as busy:
        assert busy.pids == []


def test_a_busy_process_stops_by_itself_at_its_deadline(benchmark_load):
    busy = benchmark_load.BusyProcesses(1, seconds=0.5).__enter__()
    try:
        assert busy.processes[0].wait(timeout=120) == 0       # a bound: a busy machine starts it late
    finally:
        busy.stop()


def start_child():
    """A benchmark stand-in that starts two busy processes, prints their pids and sleeps."""
    code = textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {EXAMPLES!r})
        from benchmark_load import BusyProcesses
        with BusyProcesses(2) as busy:
            print(" ".join(map(str, busy.pids)), flush=True)
            time.sleep(60)
    """)
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    pids = [int(pid) for pid in child.stdout.readline().split()]
    assert len(pids) == 2 and all(alive(pid) for pid in pids)
    return child, pids


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_or_sigterm_of_the_benchmark_stops_its_busy_processes(signum):
    child, pids = start_child()
    child.send_signal(signum)
    child.wait(timeout=120)
    assert wait_until_gone(pids, 60) == []


def test_busy_processes_leave_when_the_benchmark_is_killed_outright():
    child, pids = start_child()
    child.kill()                                        # no cleanup code runs: they must notice themselves
    child.wait(timeout=120)
    assert wait_until_gone(pids, 60) == []              # a bound: on a busy machine a spinner looks late


def test_bad_counts_are_refused(benchmark_load):
    with pytest.raises(ValueError, match="count >= 0"):
        benchmark_load.BusyProcesses(-1)


# ------------------------------------------------------------- the PyTorch reference
def fake_reference(tmp_path, body):
    script = tmp_path / "fake_reference.py"
    script.write_text(textwrap.dedent(body))
    return str(script)


def test_the_reference_summary_is_parsed(benchmark_load, tmp_path):
    script = fake_reference(tmp_path, """
        import json, sys
        print("PyTorch 2.x, 2 threads: 40 steps")
        print("SUMMARY " + json.dumps({"median_step_ms": 51.5, "p90_step_ms": 60.0, "decode_dates_per_s": 500.0,
                                       "argv": sys.argv[1:]}))
    """)
    summary = benchmark_load.run_torch_reference(sys.executable, script, steps=40, skip=10)
    assert summary["median_step_ms"] == 51.5 and summary["decode_dates_per_s"] == 500.0
    argv = summary["argv"]
    assert argv[0] == "--step-summary"
    assert argv[argv.index("--steps") + 1] == "40" and argv[argv.index("--timing-skip") + 1] == "10"
    assert argv[argv.index("--torch-threads") + 1] == "2"      # the row's label: "PyTorch eager, 2 threads"


def options_of(script):
    """Every ``--option`` a script's argparse parser defines, read from its source (no import:
    the comparison script needs torch, which the tests never import)."""
    import ast
    with open(script) as f:
        tree = ast.parse(f.read())
    return {call.args[0].value for call in ast.walk(tree)
            if isinstance(call, ast.Call) and getattr(call.func, "attr", None) == "add_argument"
            and call.args and isinstance(call.args[0], ast.Constant) and str(call.args[0].value).startswith("--")}


def test_the_default_reference_is_the_repositorys_comparison_script(benchmark_load):
    script = benchmark_load.DEFAULT_TORCH_SCRIPT
    assert os.path.samefile(script, os.path.join(EXAMPLES, "compare_with_pytorch.py"))
    asked = [arg for arg in benchmark_load.torch_command("python", script, 60, 20)[2:] if arg.startswith("--")]
    assert asked and set(asked) <= options_of(script)


def test_a_reference_without_summary_is_one_clear_error(benchmark_load, tmp_path):
    script = fake_reference(tmp_path, """
        import sys
        print("ModuleNotFoundError: No module named 'torch'", file=sys.stderr)
        sys.exit(1)
    """)
    with pytest.raises(RuntimeError, match=r"no SUMMARY line \(exit 1\)[\s\S]*No module named 'torch'"):
        benchmark_load.run_torch_reference(sys.executable, script)


def test_the_torch_check_names_the_bad_option(benchmark_load, tmp_path):
    with pytest.raises(SystemExit, match="--torch-script"):
        benchmark_load.check_torch(sys.executable, str(tmp_path / "missing.py"))
    if importlib.util.find_spec("torch") is None:        # (minigrad never depends on torch)
        script = fake_reference(tmp_path, "print('hi')\n")
        with pytest.raises(SystemExit, match="--torch-python .* cannot import torch"):
            benchmark_load.check_torch(sys.executable, script)


def test_load_levels_are_parsed_or_refused():
    module = load_example("benchmark")
    assert module.load_levels("0,1,2") == [0, 1, 2]
    for bad in ("", "1,,2", "-1", "one", "99"):
        with pytest.raises(Exception, match="--load"):
            module.load_levels(bad)


def spinners_of(pid):
    """Busy processes started by the process ``pid`` that still run (their command line names it)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    argv = f.read().split(b"\0")
            except OSError:
                continue
            if len(argv) > 4 and b"deadline, parent" in argv[3] and argv[5] == str(pid).encode() and alive(entry):
                found.append(int(entry))
    return found


@pytest.mark.slow
def test_the_load_benchmark_reports_every_load_and_setting_and_leaves_no_busy_process(benchmark_load, capsys):
    results = benchmark_load.run_load_benchmark([0, 1], rounds=1, steps=2, decode_dates=50, max_block_seconds=5)
    out = capsys.readouterr().out
    for load in (0, 1):
        for variant in ("auto", 1, 2):
            row = results[load][variant]
            assert row["median_ms"] > 0 and row["p90_ms"] >= row["median_ms"] and row["dates_per_s"] > 0
    assert "-- 0 busy processes" in out and "-- 1 busy process" in out
    assert out.count("minigrad, threads auto") == 2 and "1 busy process vs none" in out
    assert spinners_of(os.getpid()) == []
