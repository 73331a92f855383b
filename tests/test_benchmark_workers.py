"""The workers benchmark (examples/benchmark_workers.py): its alternation, its report with every
figure it names (a real run of one timed pair: the figures' sizes depend on the machine, so only
their presence and sign are checked), and its one-line refusal."""
import os
import re
import subprocess
import sys

import pytest

from examples_loader import load_example

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(REPO, "examples")
SCRIPT = os.path.join(EXAMPLES, "benchmark_workers.py")


@pytest.fixture(scope="module")
def workers():
    return load_example("benchmark_workers")


def test_alternate_times_each_setting_once_a_pair_in_swapped_order(workers):
    calls = []
    a, b = workers.alternate(lambda: calls.append("a"), lambda: calls.append("b"), pairs=3, warm=1)
    assert calls == ["a", "b", "b", "a", "a", "b", "b", "a"]
    assert a >= 0 and b >= 0


def test_the_report_gives_every_figure_and_the_prediction(workers, capsys):
    assert workers.main(["--pairs", "1"]) == 0
    out = capsys.readouterr().out
    one, two = (float(x) for x in re.search(r"one worker / two workers: +([\d.]+) / ([\d.]+) ms", out).groups())
    python = float(re.search(r"\(O = ([\d.]+) ms holds the GIL\)", out).group(1))
    scaling = float(re.search(r"\(P = ([\d.]+)x\)", out).group(1))
    predicted = float(re.search(r"O \+ \(T1 - O\) / P = ([\d.]+) ms", out).group(1))
    assert min(one, two, python, scaling) > 0
    assert predicted == pytest.approx(python + (one - python) / scaling, rel=0.01, abs=0.11)


def test_a_bad_pair_count_is_one_line_and_exit_2():
    done = subprocess.run([sys.executable, SCRIPT, "--pairs", "0"], capture_output=True, text=True)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].endswith("--pairs must be at least 1, got 0")
