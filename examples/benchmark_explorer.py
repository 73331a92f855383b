"""A typed input, from the click to the redrawn page, on the served explorers.

    python examples/benchmark_explorer.py                      # trains the default runs first
    nice -n 19 python examples/benchmark_explorer.py --next-word-checkpoint runs/next-word/model.npz \\
        --dates-checkpoint runs/dates/model.npz --inputs 8

For each checkpoint (a run given by its path, else the default run trained here first, into a
temporary folder, with ``next-word-train`` / ``dates-train`` and ``--snapshot-every 10``, as
docs/explorer.md trains them for the explorer), the script starts the explorer's server
(``next-word-explore --serve`` / ``dates-explore --serve``, on any free port, ended however the
script ends), opens the page in headless Chromium at 1280 x 800, and types N inputs that differ
from each other and from the page's own (held-out sentences of the language, round the sentence
kinds; held-out dates), first without the finite-difference check, then with it when the page
offers the switch (set without its change event, which would re-run the shown input at once).

Each input is timed three ways, all on the page's clock (``performance.now()``): the wall time
from the click on "run" (a real mouse click) to the redraw on screen (``body[data-loads]``
incremented, then the frame after it drawn: two animation frames); the server's part, the
browser's Resource Timing of the POST (request sent to the answer's first byte: the step on the
checkpoint and its JSON); and the page's own redraw (``data-draw-ms``). The times are taken in
the page, not by this script around Playwright's calls: on a busy machine Playwright's round
trips and polling added 50-450 ms of its own to each input. A table per page gives the first
input apart (it includes warm-up: the server's first step, the browser's first redraw) and the
median and range of the others, with the machine and the load average before and after.
"""
import argparse
import datetime
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from viz.browser import SKIP_REASON, open_page                      # noqa: E402
from viz.served import DATES_EXPLORE, NEXT_WORD_EXPLORE, command, served    # noqa: E402

WIDTH, HEIGHT = 1280, 800
TRAIN = {"next-word": ("dates_commands:next_word_train", "next-word-train"),
         "dates": ("dates_commands:train", "dates-train")}
EXPLORE = {"next-word": NEXT_WORD_EXPLORE, "dates": DATES_EXPLORE}
SERVER_WAIT = 1800          # seconds for a server to print its URL (next-word-explore trains the ladder's rungs)
REDRAW_WAIT = 300           # seconds for one input's redraw, on a machine however busy

# Set once the page is open: the time of each click on "run", and of the frame drawn after each redraw.
WATCH = """() => {
  const times = window.benchmarkTimes = {clicked: null, redrawn: null};
  document.getElementById("ask-run").addEventListener("click", () => {
    times.clicked = performance.now(); times.redrawn = null; }, true);
  new MutationObserver(() => requestAnimationFrame(() => requestAnimationFrame(() => {
    times.redrawn = performance.now(); }))).observe(document.body, {attributes: true, attributeFilter: ["data-loads"]});
}"""
# The POST's Resource Timing: from the request sent to the answer's first byte, in ms (None if absent).
SERVER_MS = """() => {
  const steps = performance.getEntriesByType("resource").filter(e => e.name.endsWith("/step"));
  performance.clearResourceTimings();
  const last = steps[steps.length - 1];
  return last && last.responseStart > 0 ? last.responseStart - last.requestStart : null;
}"""


# ---------------------------------------------------------------- the machine and the inputs
def machine() -> str:
    from benchmark_sizes import machine as described      # examples/: the benchmarks' machine description
    info = described()
    return f"{info['cpu']}, {info['cores']} cores"


def load_average() -> str:
    return "/".join(f"{value:.2f}" for value in os.getloadavg())


def next_word_inputs(n: int) -> list:
    """``n`` different held-out sentences of the language, taking the kinds in turn, none the page's own."""
    from transformer.tasks import language
    from viz.explorer.next_word import default_sentence
    by_kind = {}
    for example in language.Language().evaluation_set(per_kind=n):
        by_kind.setdefault(example.kind, []).append(" ".join(example.context))
    chosen, seen = [], {default_sentence()}
    for row in zip(*by_kind.values()):
        for sentence in row:
            if sentence not in seen and len(chosen) < n:
                chosen.append(sentence)
                seen.add(sentence)
    return chosen


def date_inputs(n: int) -> list:
    """The first ``n`` held-out dates (ISO), none the page's own."""
    from transformer.tasks.dates import held_out_ordinals
    days = (datetime.date.fromordinal(o).isoformat() for o in held_out_ordinals())
    return [day for day in days if day != "1845-01-05"][:n]


INPUTS = {"next-word": next_word_inputs, "dates": date_inputs}


def train_default(kind: str, folder: str, say=print) -> str:
    """Train ``kind``'s default run into ``folder`` (the command's defaults, attention snapshots every
    10 steps); its checkpoint's path."""
    script, name = TRAIN[kind]
    say(f"no --{kind}-checkpoint: training the default run ({name} --snapshot-every 10) into {folder} ...")
    start = time.perf_counter()
    result = subprocess.run(command(script, "--out", folder, "--snapshot-every", "10", "--no-progress"),
                            capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"{name} failed (exit {result.returncode}): {result.stderr.strip()[-500:]}")
    say(f"  trained in {time.perf_counter() - start:.0f} s")
    return os.path.join(folder, "model.npz")


# ---------------------------------------------------------------- the measurement
def type_inputs(page, inputs, check: bool, loads: int) -> list:
    """Type each input, click "run", wait for the redraw: one row per input (ms); ``loads`` is the
    page's ``data-loads`` before the first."""
    page.evaluate("on => { document.getElementById('check-toggle').checked = on; }", check)
    rows = []
    for text in inputs:
        page.fill("#ask-text", text)
        loads += 1
        page.click("#ask-run")
        page.wait_for_selector(f"body[data-loads='{loads}'], #ask-status[data-error=true]", state="attached",
                               timeout=REDRAW_WAIT * 1000)
        if page.get_attribute("body", "data-loads") != str(loads):
            raise RuntimeError(f"the server refused {text!r}: {page.inner_text('#ask-status')}")
        page.wait_for_function("() => window.benchmarkTimes.redrawn !== null", timeout=REDRAW_WAIT * 1000)
        wall_ms = page.evaluate("() => window.benchmarkTimes.redrawn - window.benchmarkTimes.clicked")
        rows.append({"text": text, "wall_ms": wall_ms, "server_ms": page.evaluate(SERVER_MS),
                     "draw_ms": float(page.get_attribute("body", "data-draw-ms"))})
    return rows


def measure(kind: str, checkpoint: str, n: int = 8, ladder_steps=None) -> dict:
    """Serve ``kind``'s explorer ("next-word" or "dates") on ``checkpoint``, type ``n`` inputs in
    the page, without and (when offered) with the check: {"modes": {name: rows}, ...}."""
    if SKIP_REASON is not None:
        raise RuntimeError(SKIP_REASON)
    inputs = INPUTS[kind](n)
    args = ["--checkpoint", checkpoint, "--no-check"]
    if ladder_steps is not None and kind == "next-word":
        args += ["--ladder-steps", str(ladder_steps)]
    result = {"page": kind, "checkpoint": checkpoint, "inputs": len(inputs), "load_before": load_average()}
    with served(*args, script=EXPLORE[kind], wait=SERVER_WAIT) as (_, url):
        with open_page(url, width=WIDTH, height=HEIGHT) as opened:
            page = opened.page
            page.evaluate(WATCH)
            modes = {"without the check": type_inputs(page, inputs, False, 0)}
            if page.is_enabled("#check-toggle"):
                modes["with the check"] = type_inputs(page, inputs, True, len(inputs))
    result.update(modes=modes, load_after=load_average())
    return result


# ---------------------------------------------------------------- the table
def _ms(values) -> str:
    values = [v for v in values if v is not None]
    if not values:
        return "-"
    if len(values) == 1:
        return f"{values[0]:.0f}"
    return f"{statistics.median(values):.0f} ({min(values):.0f}-{max(values):.0f})"


def table(result) -> str:
    names = {"next-word": "next-word-explore --serve", "dates": "dates-explore --serve"}
    lines = [f"{names[result['page']]} on {result['checkpoint']}: {result['inputs']} typed inputs each way, "
             f"headless Chromium {WIDTH} x {HEIGHT}",
             f"load average (1/5/15 min) before {result['load_before']}, after {result['load_after']}",
             f"{'':19} {'(ms)':16} {'first input':>11}   the others: median (min-max)"]
    parts = [("click to redraw", "wall_ms"), ("server's part", "server_ms"), ("page's redraw", "draw_ms")]
    for mode, rows in result["modes"].items():
        for i, (label, key) in enumerate(parts):
            values = [row[key] for row in rows]
            first = "-" if values[0] is None else f"{values[0]:.0f}"
            lines.append(f"{mode if i == 0 else '':19} {label:16} {first:>11}   {_ms(values[1:])}")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--next-word-checkpoint", metavar="PATH", help="a next-word run's model.npz "
                        "(default: train the default run first)")
    parser.add_argument("--dates-checkpoint", metavar="PATH", help="a date run's model.npz "
                        "(default: train the default run first)")
    parser.add_argument("--inputs", type=int, default=8, metavar="N", help="inputs typed each way (default: 8)")
    parser.add_argument("--ladder-steps", type=int, default=None, metavar="N",
                        help="next-word-explore's --ladder-steps (default: its own)")
    args = parser.parse_args(argv)
    if args.inputs < 1:
        parser.error(f"--inputs must be at least 1, got {args.inputs}")
    if SKIP_REASON is not None:
        print(f"error: {SKIP_REASON}", file=sys.stderr)
        return 2
    now = datetime.datetime.now(datetime.timezone.utc)
    print(f"machine: {machine()}; Python {platform.python_version()}; {now:%Y-%m-%d %H:%M} UTC")
    given = {"next-word": args.next_word_checkpoint, "dates": args.dates_checkpoint}
    with tempfile.TemporaryDirectory(prefix="benchmark-explorer-") as scratch:
        for kind, checkpoint in given.items():
            if checkpoint is None:
                checkpoint = train_default(kind, os.path.join(scratch, kind))
            elif not os.path.exists(checkpoint):
                print(f"error: no checkpoint at {checkpoint}", file=sys.stderr)
                return 2
            print()
            print(table(measure(kind, checkpoint, args.inputs, args.ladder_steps)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
