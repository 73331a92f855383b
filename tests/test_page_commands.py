"""The shell commands of README.md and of the pages a learner follows run as written, top to bottom.

Every ```bash block of the pages below is cut into commands (``&&`` splits one line into several)
and run in page order in one empty folder, README first and twice over (a second pass must meet the
first one's files and still run), each checked to exit 0. Nothing is edited on the way but what
``SUBSTITUTED`` and ``SKIPPED`` list, each with its reason:

- a training command (``dates-train``, ``next-word-train``) is replaced by a tiny real run of the
  explorer tests' (``explore_runs.py``: 12 steps, snapshots when the command asks for them) written
  where the command would write (its ``--out``, else the next free ``runs/dates``, ``runs/dates-2`` ...),
  so the commands after it find a checkpoint where the page says;
- ``dates-explore --serve`` is started on any free port (the machine is shared) until it serves its
  page, which must then carry the run's training steps;
- set-up lines, and commands that train for minutes, are skipped.
"""
import argparse
import os
import pathlib
import re
import shlex
import shutil
import subprocess
import sys
import urllib.request

import pytest

from explore_runs import TINY, dates_run, next_word_run
from transformer.files.run_dir import next_free_run_folder
from transformer.models.config import DecoderOnlyConfig
from viz.served import DATES_EXPLORE, served

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGES = ["README.md", "docs/dates.md", "docs/seeing.md", "docs/explorer.md", "docs/next-word.md"]

SET_UP = "set-up: the tests run in the environment it makes"
SKIPPED = {
    "python3 -m venv .venv": SET_UP,
    ". .venv/bin/activate": SET_UP,
    "pip install -e .": SET_UP,
    'pip install -e ".[test]"': SET_UP,
    "python -m pytest -q": "the test suite itself",
    "attention-ladder": "trains nine rungs and the project's model on five seeds: about 3.7 minutes",
    "python examples/make_readme_images.py --seed 0": "trains the seed-0 model for real and redraws docs/images; "
                                                      "the commands it runs are the next block's, run here",
    "next-word-explore": "trains the attention ladder's rungs for the page: about 30 s of CPU",
    "next-word-explore --serve": "trains the attention ladder's rungs, then serves until stopped",
    "for seed in 0 1 2 3 4 5 6 7 8 9; do nice -n 10 next-word-train --snapshot-every 10 --seed $seed --no-progress "
    "--out runs/next-word-seed$seed; done": "trains ten next-word models for real",
    "python examples/recall_circuit_seeds.py runs/next-word-seed? --json docs/recall-circuit-seeds.json":
        "needs the ten real runs above (tests/test_recall_circuit_record.py checks the record it makes)",
}
TRAINING = ("dates-train", "next-word-train")        # replaced by a tiny run, unless resuming
SERVED = ("dates-explore --serve", "dates-explore --serve --port 0")
DRAWING = ("dates-attention-graph", "dates-backward-animation")     # exit 3 when Graphviz's dot is missing
CONSOLE_SCRIPTS = ("dates-", "next-word-", "attention-ladder")


def bash_blocks(page) -> list:
    """The ```bash blocks of ``page``; an unlabelled block that starts with one of our commands is
    an error here, so that every block of commands is labelled and run."""
    text = open(os.path.join(REPO, page), encoding="utf-8").read()
    blocks = re.findall(r"^```(\w*)\n(.*?)^```", text, flags=re.S | re.M)
    unlabelled = [body for language, body in blocks if not language and body.lstrip().startswith(CONSOLE_SCRIPTS)]
    assert not unlabelled, f"{page}: label this block of commands ```bash:\n{unlabelled[0]}"
    return [body for language, body in blocks if language == "bash"]


def without_comment(line) -> str:
    """``line`` up to its ``#`` comment (a ``#`` inside quotes is text), its spaces collapsed."""
    quote = None
    for at, char in enumerate(line):
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (at == 0 or line[at - 1].isspace()):
            line = line[:at]
            break
    return " ".join(line.split())


def commands(block) -> list:
    """A block's commands: comments dropped, continued lines joined, a for loop as one, ``&&`` split."""
    lines = [line for line in map(without_comment, block.replace("\\\n", " ").splitlines()) if line]
    text = "\n".join(lines)
    for loop in re.findall(r"^for .*?^done$", text, flags=re.S | re.M):
        text = text.replace(loop, loop.replace("\n", "; ").replace("do; ", "do "))
    return [part.strip() for line in text.splitlines() for part in line.split("&&")]


def page_commands(page) -> list:
    return [command for block in bash_blocks(page) for command in commands(block)]


def tiny_training(command):
    """Where ``command`` (a dates-train or next-word-train line) would write, a tiny real run."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--out")
    parser.add_argument("--architecture", default="encoder-decoder")
    parser.add_argument("--snapshot-every", type=int, default=0)
    args, _ = parser.parse_known_args(shlex.split(command)[1:])
    name = shlex.split(command)[0]
    folder = args.out or next_free_run_folder(os.path.join("runs", "dates" if name == "dates-train" else "next-word"))
    if name == "next-word-train":
        return next_word_run(pathlib.Path(folder), every=args.snapshot_every)
    config = DecoderOnlyConfig(num_layers=1, **TINY) if args.architecture == "decoder-only" else None
    return dates_run(pathlib.Path(folder), every=args.snapshot_every, config=config)


def serve(command):
    """``dates-explore --serve ...`` on a free port until it serves; the page it served."""
    args = [a for a in shlex.split(command)[1:] if a != "--serve"]
    if "--port" in args:
        del args[args.index("--port"):args.index("--port") + 2]
    with served(*args, script=DATES_EXPLORE) as (_, url):
        with urllib.request.urlopen(url, timeout=60) as response:
            return response.read().decode("utf-8")


def run(command, page):
    """Run one page command in the working folder; a failure names the page, the command and its output."""
    if command in SKIPPED:
        return "skipped"
    words = shlex.split(command)
    if words[0] in TRAINING and "--resume" not in words:
        return tiny_training(command)
    if command in SERVED:
        html = serve(command)
        assert '"snapshots":' in html, f"{page}: `{command}` served a page without the training steps"
        return "served"
    env = {**os.environ, "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")}
    done = subprocess.run(["bash", "-c", command], env=env, capture_output=True, text=True, timeout=600)
    allowed = (0, 3) if words[0] in DRAWING and shutil.which("dot") is None else (0,)
    assert done.returncode in allowed, (f"{page}: `{command}` exited {done.returncode}\n"
                                        f"{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return done.stdout


def test_every_page_has_commands_and_each_skip_names_a_command_of_a_page():
    found = {page: page_commands(page) for page in PAGES}
    assert all(found.values()), [page for page, listed in found.items() if not listed]
    everywhere = {command for listed in found.values() for command in listed}
    assert set(SKIPPED) <= everywhere, set(SKIPPED) - everywhere        # a stale skip hides nothing
    assert set(SERVED) <= everywhere


def test_the_pages_commands_run_top_to_bottom_and_the_readme_twice():
    """README (twice), then each page in the order the README links it, in one folder."""
    for page in ["README.md"] + PAGES:
        for command in page_commands(page):
            run(command, page)
