"""attention-ladder: train each rung, print the table of held-out accuracy per sentence kind,
one sentence each rung gets wrong and why, and the score matrices of the symmetric and the
asymmetric rung on one sentence.

    attention-ladder                   # about 2 minutes on two cores
    attention-ladder --json out.json   # also write the table as JSON
    attention-ladder --plot ladder.png # and draw it (the README's picture)
"""
import json
import sys

import numpy as np

from transformer.commands.console import EXIT_USAGE, Parser, console_script, path_argument
from transformer.files.output_file import PNG, OutputKind, add_force_option, atomic_output, check_output, write_output
from transformer.ladder.experiment import LadderConfig, LadderResult, run_ladder

# what --json writes, recognised by its first bytes (so --force replaces only a ladder table)
LADDER_JSON = OutputKind("attention-ladder JSON", lambda head, path: head.lstrip().startswith(b'{\n  "kinds"'))

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


def check_paths(args):
    """Before training: each output is free, or (``--force``) a file of its own kind."""
    if args.json:
        check_output(args.json, args.force, LADDER_JSON, "--json")
    if args.plot:
        check_output(args.plot, args.force, PNG, "--plot")


def write_outputs(result: LadderResult, args):
    """Each output whole or not at all (``transformer.files.output_file``)."""
    if args.json:
        write_output(args.json, json.dumps(result.to_json(), indent=2) + "\n", args.force, LADDER_JSON, "--json")
        print(f"\nwrote {args.json}")
    if args.plot:
        from viz.ladder import plot_ladder
        with atomic_output(args.plot) as tmp:
            plot_ladder(result).savefig(tmp, format="png", dpi=100)
        print(f"wrote {args.plot}")


def parse_args(argv):
    defaults = LadderConfig()
    parser = Parser(prog="attention-ladder", description=__doc__)
    parser.add_argument("--steps", type=int, default=defaults.steps, help="Adam steps per rung")
    parser.add_argument("--seed", type=int, default=defaults.seed, help="seed of the split, batches and weights")
    parser.add_argument("--jobs", type=int, default=defaults.jobs, choices=(1, 2),
                        help="rungs trained at once, one core each (the numbers do not depend on it)")
    parser.add_argument("--json", metavar="PATH", type=path_argument,
                        help="also write the table, ideas and wrong sentences as JSON")
    parser.add_argument("--plot", metavar="PNG", type=path_argument,
                        help="also draw the table and the two score matrices into PNG")
    add_force_option(parser)
    args = parser.parse_args(argv)
    if args.steps < 1:
        parser.error(f"--steps must be at least 1, got {args.steps}")
    return args


@console_script
def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        check_paths(args)                 # refused now, not after two minutes of training
    except (OSError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_USAGE
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
        write_outputs(result, args)
    except (OSError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_USAGE
    return 0
