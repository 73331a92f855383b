"""``attention-ladder``: train each rung, print the table of held-out accuracy per sentence kind,
one sentence each rung gets wrong and why, and the score matrices of the symmetric and the
asymmetric rung on one sentence.

    attention-ladder                   # about 2 minutes on two cores
    attention-ladder --json out.json   # also write the table as JSON
    attention-ladder --plot ladder.png # and draw it (the README's picture)
"""
import json
import os
import sys
import tempfile

import numpy as np

from ..console import EXIT_USAGE, Parser, console_script
from ..output_folder import make_output_folder
from .experiment import LadderConfig, LadderResult, run_ladder

SYMMETRY_KIND = "swap"          # the kind whose score matrices are printed


def format_table(result: LadderResult) -> str:
    """Rows: rungs; columns: sentence kinds; cells: held-out next-word accuracy in percent."""
    width = max(len(r.name) for r in result.rungs)
    header = f"{'rung':<{width}}  " + "  ".join(f"{k:>7}" for k in result.kinds) + "  seconds"
    lines = [header, "-" * len(header)]
    for r in result.rungs:
        cells = "  ".join(f"{100 * r.accuracy[k]:6.1f}%" for k in result.kinds)
        lines.append(f"{r.name:<{width}}  {cells}  {r.seconds:7.1f}")
    return "\n".join(lines)


def format_examples(result: LadderResult) -> str:
    lines = []
    for r in result.rungs:
        if not r.example:
            lines.append(f"{r.name}: every held-out sentence right")
            continue
        e = r.example
        lines.append(f"{r.name}: {e['context']} [{e['predicted']}]  (right: {e['answer']})\n    {e['reason']}")
    return "\n".join(lines)


def format_scores(result: LadderResult, kind: str = SYMMETRY_KIND) -> str:
    """The raw attention scores (before the causal mask) of the shared-map and separate-maps
    rungs on one sentence, and how far each is from its transpose."""
    words = result.probes[kind]
    lines = [f"scores on: {' '.join(words[1:])}"]
    for r in result.rungs:
        if r.name not in ("shared map", "separate maps"):
            continue
        scores = r.scores[kind]
        asymmetry = float(np.abs(scores - scores.T).max())
        lines.append(f"\n{r.name}: max |S - Sᵀ| = {asymmetry:.3g}")
        lines.append(matrix_text(scores, words))
    return "\n".join(lines)


def matrix_text(matrix: np.ndarray, words) -> str:
    width = max(6, max(len(w) for w in words))
    rows = [" " * width + " " + " ".join(f"{w[:6]:>6}" for w in words)]
    for word, row in zip(words, matrix):
        rows.append(f"{word:>{width}} " + " ".join(f"{v:6.1f}" for v in row))
    return "\n".join(rows)


def write_json(result: LadderResult, path: str):
    """Write atomically: a crash never leaves half a file under ``path``."""
    folder = os.path.dirname(os.path.abspath(path))
    make_output_folder(folder, "--json")
    if os.path.isdir(path):
        raise ValueError(f"--json {path} is a folder; give a file name such as {os.path.join(path, 'ladder.json')}")
    handle, temporary = tempfile.mkstemp(dir=folder, prefix=".ladder-", suffix=".json.tmp")
    try:
        with os.fdopen(handle, "w") as out:
            json.dump(result.to_json(), out, indent=2)
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise


def parse_args(argv):
    defaults = LadderConfig()
    parser = Parser(prog="attention-ladder", description=__doc__)
    parser.add_argument("--steps", type=int, default=defaults.steps, help="Adam steps per rung")
    parser.add_argument("--seed", type=int, default=defaults.seed, help="seed of the split, batches and weights")
    parser.add_argument("--jobs", type=int, default=defaults.jobs, choices=(1, 2),
                        help="rungs trained at once, one core each (the numbers do not depend on it)")
    parser.add_argument("--json", metavar="PATH", help="also write the table, ideas and wrong sentences as JSON")
    parser.add_argument("--plot", metavar="PNG", help="also draw the table and the two score matrices into PNG")
    args = parser.parse_args(argv)
    if args.steps < 1:
        parser.error(f"--steps must be at least 1, got {args.steps}")
    return args


@console_script
def main(argv=None) -> int:
    args = parse_args(argv)
    config = LadderConfig(seed=args.seed, steps=args.steps, jobs=args.jobs)
    print(f"training 7 rungs, {config.steps} steps each, {config.jobs} at a time ...", flush=True)
    result = run_ladder(config)
    print(f"\nheld-out next-word accuracy per sentence kind ({result.seconds:.0f} s wall)\n")
    print(format_table(result))
    print("\none held-out sentence each rung gets wrong [its prediction]\n")
    print(format_examples(result))
    print()
    print(format_scores(result))
    try:
        if args.json:
            write_json(result, args.json)
            print(f"\nwrote {args.json}")
        if args.plot:
            from viz.ladder import plot_ladder
            plot_ladder(result, args.plot)
            print(f"wrote {args.plot}")
    except (OSError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_USAGE
    return 0
