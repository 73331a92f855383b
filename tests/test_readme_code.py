"""Every ```python block of README.md and of the docs pages it links runs as copied: each in a fresh
interpreter, in an empty folder."""
import os
import re
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# pages whose python blocks are pieces of files a reader writes, not programs: tests/test_adding_an_op.py
# builds the doc's op from them
FRAGMENTS = {"docs/adding-an-op.md"}


def pages():
    """README.md and every docs page it links to (but the fragments)."""
    readme = open(os.path.join(REPO, "README.md"), encoding="utf-8").read()
    linked = sorted(set(re.findall(r"\]\((docs/[\w.-]+\.md)\)", readme)) - FRAGMENTS)
    return ["README.md"] + linked


def python_blocks():
    blocks = []
    for page in pages():
        text = open(os.path.join(REPO, page), encoding="utf-8").read()
        blocks += re.findall(r"^```python\n(.*?)^```", text, flags=re.S | re.M)
    return blocks


def test_the_pages_have_python_blocks():
    assert "docs/engine.md" in pages()
    assert len(python_blocks()) >= 3


@pytest.mark.parametrize("number", range(len(python_blocks())))
def test_a_readme_python_block_runs_as_copied(number, tmp_path):
    block = python_blocks()[number]
    env = {**os.environ, "PYTHONPATH": REPO}           # the package as the reader installed it
    done = subprocess.run([sys.executable, "-c", block], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=900)    # an upper bound only: a block that trains takes ~30 s quiet, minutes loaded
    assert done.returncode == 0, f"README python block {number + 1}:\n{block}\n{done.stderr}"
