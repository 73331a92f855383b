"""Settings shared by every test (and inherited by the subprocesses tests start).

OpenBLAS's results differ in the last bits between one and two threads at the
model's shapes. Training uses one BLAS thread by default (``transformer/parallel/threads.py``),
but a user's ``MINIGRAD_BLAS_THREADS`` would reach the tests that compare two runs
bit for bit (resume equals an uninterrupted run), so the suite pins one thread; the
thread tests set ``MINIGRAD_BLAS_THREADS`` themselves with monkeypatch, and
test_repeatable_runs.py runs without it, as a user would.

Every test runs in an empty working folder of its own (``empty_working_folder``; module and
session fixtures in one made for the session): what a user has in the folder the suite is
started from (``runs/`` after the README's commands) never changes a result, and a command a
test runs with its default output paths writes there, not into the repository.

Graphviz's ``dot`` is optional: tests that render skip with a one-line reason
without it (``@pytest.mark.needs_dot``, or a ``skipif`` of their own), and ``path_without_dot``
gives a PATH on which every program but ``dot`` is still found, so the no-dot
behaviour is tested on machines that have it (CI runs the whole suite both ways).

Ctrl-C works in the suite however it was started. A shell script that starts it in the background
(``python -m pytest -q &``) hands it SIGINT ignored, Python then installs no KeyboardInterrupt
handler, and every child inherits the ignored SIGINT: the tests that press Ctrl-C in a child
(``signal.raise_signal``, ``send_signal(SIGINT)``) would see it lost. So the suite takes back
Ctrl-C's default, as a command typed in a terminal has it, and its children get it from exec.
"""
import os
import shutil
import signal

import pytest

os.environ["MINIGRAD_BLAS_THREADS"] = "1"

if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)



@pytest.fixture(scope="session", autouse=True)
def _session_working_folder(tmp_path_factory):
    """Session and module fixtures run before the per-test folder exists: this one is theirs."""
    start = os.getcwd()
    os.chdir(tmp_path_factory.mktemp("session-cwd"))
    try:
        yield
    finally:
        os.chdir(start)


@pytest.fixture(autouse=True)
def empty_working_folder(_session_working_folder, tmp_path_factory, monkeypatch):
    """Each test starts in an empty folder of its own (``monkeypatch.chdir`` in a test still works)."""
    folder = tmp_path_factory.mktemp("cwd")
    monkeypatch.chdir(folder)
    return folder


def pytest_configure(config):
    config.addinivalue_line("markers", "needs_dot: renders with Graphviz's `dot`; skipped where it is not installed")


def pytest_runtest_setup(item):
    if item.get_closest_marker("needs_dot") and shutil.which("dot") is None:
        pytest.skip("Graphviz's `dot` is not installed (apt-get install graphviz | brew install graphviz)")


@pytest.fixture
def path_without_dot(tmp_path_factory):
    """A PATH like the current one where ``dot`` is not found (folders holding it are mirrored by symlinks)."""
    mirror_root = tmp_path_factory.mktemp("path-without-dot")
    folders = []
    for number, folder in enumerate(p for p in os.environ.get("PATH", "").split(os.pathsep) if p):
        if not os.path.exists(os.path.join(folder, "dot")):
            folders.append(folder)
            continue
        mirror = mirror_root / str(number)
        mirror.mkdir()
        for name in os.listdir(folder):
            if name != "dot":
                os.symlink(os.path.join(folder, name), mirror / name)
        folders.append(str(mirror))
    path = os.pathsep.join(folders)
    assert shutil.which("dot", path=path) is None
    return path
