"""Ctrl-C reaches the suite's children however the suite was started (``conftest.py``).

A script that starts ``python -m pytest -q &`` hands it SIGINT ignored; before the suite took
Ctrl-C's default back, every test that presses Ctrl-C in a child failed that way, with
``'finished' == 'interrupted'`` or a child that slept on, and the failures looked like load."""
import os
import signal
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_a_child_of_the_suite_is_stopped_by_ctrl_c():
    child = subprocess.run([sys.executable, "-c", "import signal; signal.raise_signal(signal.SIGINT); print('lost')"],
                           capture_output=True, text=True, timeout=600)
    assert child.stdout == "" and child.returncode == -signal.SIGINT, (child.returncode, child.stdout)


def ctrl_c_ignored():
    """In the child before it starts: SIGINT ignored, as a background job of a shell script has it."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def test_the_suite_started_with_ctrl_c_ignored_still_passes_it_on(tmp_path):
    test = f"{os.path.abspath(__file__)}::test_a_child_of_the_suite_is_stopped_by_ctrl_c"
    suite = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", test], cwd=tmp_path,
                           capture_output=True, text=True, timeout=600, preexec_fn=ctrl_c_ignored)
    assert suite.returncode == 0, suite.stdout[-3000:] + suite.stderr[-2000:]
