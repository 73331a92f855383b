"""docs/tracing.md prints a traced step; the block must be what today's code prints."""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_the_documented_step_is_what_the_command_prints():
    with open(os.path.join(ROOT, "docs", "tracing.md"), encoding="utf-8") as f:
        doc = f.read()
    block = re.search(r"```\n(def step.*?)```", doc, re.S).group(1)
    printed = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "print_trace.py")],
                             capture_output=True, text=True, timeout=600, check=True).stdout
    assert printed == block
