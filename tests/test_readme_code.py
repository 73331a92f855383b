"""Every ```python block of README.md runs as copied: each in a fresh interpreter, in an empty folder."""
import os
import re
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def python_blocks():
    text = open(os.path.join(REPO, "README.md"), encoding="utf-8").read()
    return re.findall(r"^```python\n(.*?)^```", text, flags=re.S | re.M)


def test_the_readme_has_python_blocks():
    assert len(python_blocks()) >= 3


@pytest.mark.parametrize("number", range(len(python_blocks())))
def test_a_readme_python_block_runs_as_copied(number, tmp_path):
    block = python_blocks()[number]
    env = {**os.environ, "PYTHONPATH": REPO}           # the package as the reader installed it
    done = subprocess.run([sys.executable, "-c", block], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, f"README python block {number + 1}:\n{block}\n{done.stderr}"
