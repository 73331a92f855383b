"""attention-ladder: train each rung on each seed, print the table of held-out accuracy per
sentence kind (the mean over the seeds and their range), how much each rung gains on the one
before, the pull statistic on the swap kind, one sentence each rung gets wrong and why, and
the score matrices of the symmetric and the asymmetric rung on one sentence.

    attention-ladder                      # nine rungs and the project's model on seeds 0-4: about 4 min (384 s of CPU)
    attention-ladder --seed 0             # one seed: a fifth of that
    attention-ladder --json out.json      # also write the table as JSON
    attention-ladder --plot ladder.png    # and draw it (one dot per seed)
    attention-ladder --rungs positions --without blend   # one rung, trained without a kind:
                                                          # what that kind costs it on the others
"""
import json
import os
import sys

import numpy as np

from transformer.commands.console import EXIT_USAGE, Parser, console_script, path_argument
from transformer.files.output_file import PNG, OutputKind, add_force_option, atomic_output, check_output, write_output
from transformer.ladder.experiment import CANDIDATES, PULL_KIND, LadderConfig, LadderResult, run_ladder
from transformer.ladder.rungs import PROJECTS_MODEL, RUNGS
from transformer.tasks.language import KINDS
from viz.ladder import plot_ladder

# what --json writes, recognised by its first bytes (so --force replaces only a ladder table)
LADDER_JSON = OutputKind("attention-ladder JSON", lambda head, path: head.lstrip().startswith(b'{\n  "kinds"'))

SYMMETRY_KIND = "swap"          # the kind whose score matrices are printed
MAX_SEEDS = 20
# what --eager costs, measured (docs/tracing.md, "The trainers trace their step")
LADDER_EAGER_COST = ("Traced, the ladder took 0.90x the eager CPU time (--seed 0: 54 against 60 s, 3 "
                     "alternating pairs on a quiet 2-vCPU Intel Xeon).")


def percent_range(values) -> str:
    """'mean (lowest-highest)' in percent: '97.5 (95-100)'; one seed: '97.5'."""
    values = 100 * np.asarray(values, dtype=float)
    if len(values) == 1:
        return f"{values[0]:5.1f}"
    return f"{values.mean():5.1f} ({values.min():3.0f}-{values.max():3.0f})"


def format_table(result: LadderResult) -> str:
    """Rows: rungs; columns: sentence kinds; cells: held-out next-word accuracy in percent,
    the mean over the seeds and (several seeds) the lowest and highest."""
    width = max(len(r.name) for r in result.rungs)
    cell = len(percent_range([0.0] * len(result.seeds)))
    header = f"{'rung':<{width}}  " + "  ".join(f"{k:>{cell}}" for k in result.kinds)
    lines = [header, "-" * len(header)]
    for r in result.rungs:
        lines.append(f"{r.name:<{width}}  " + "  ".join(f"{percent_range(r.accuracy[k]):>{cell}}"
                                                          for k in result.kinds))
    return "\n".join(lines)


def gains(result: LadderResult) -> list:
    """For each rung after the first: (rung, kind, least gain over the seeds, mean gain), on the
    kind whose least gain over the one before is largest."""
    rows = []
    for before, after in zip(result.rungs, result.rungs[1:]):
        best = max(result.kinds, key=lambda k: min(np.subtract(after.accuracy[k], before.accuracy[k])))
        gain = np.subtract(after.accuracy[best], before.accuracy[best])
        rows.append((after.name, best, float(gain.min()), float(gain.mean())))
    return rows


def format_gains(result: LadderResult) -> str:
    lines = []
    for name, kind, least, mean in gains(result):
        # the project's model is not a rung: it is compared with the ladder's top (docs/ladder.md)
        after = " (the project's model, against the top rung)" if name == PROJECTS_MODEL.name else ""
        lines.append(f"{name:>14} on {kind:<7} {100 * mean:+6.1f} points (at least {100 * least:+.1f} on every seed)"
                     + after)
    return "\n".join(lines)


def format_pull(result: LadderResult, statistic: str = "pull") -> str:
    """Per rung that has scores: how often the other animal out-pulls the asked one (``pull``; or,
    ``self_pull``, the thing of the asked colour out-pulls the colour word), and how often the
    rung is right in each case (means over the seeds)."""
    def mean(values):
        values = [v for v in values if v is not None]
        return f"{100 * np.mean(values):5.1f}%" if values else "   -  "
    other = "other out-pulls" if statistic == "pull" else "thing out-pulls"
    lines = [f"{'rung':>14}  {other}  right when it does  right when not"
             + ("  weight on itself" if statistic == "self_pull" else "")]
    for r in result.rungs:
        stats = getattr(r, statistic)
        if stats:
            lines.append(f"{r.name:>14}  {mean(stats['out_pulls']):>15}  {mean(stats['right_when_out_pulls']):>18}"
                         f"  {mean(stats['right_when_not']):>14}"
                         + (f"  {mean(stats['own_weight']):>16}" if "own_weight" in stats else ""))
    return "\n".join(lines)


def format_candidates(result: LadderResult) -> str:
    """Per rung: how often its answer is one of the two words the answer is chosen from (order:
    the two names; recall: the two places): below 100%, it names other words too."""
    kinds = [k for k in (*CANDIDATES, "recall_seen") if k in result.rungs[0].candidates]
    lines = [f"{'rung':>14}  " + "  ".join(f"{k:>16}" for k in kinds)]
    for r in result.rungs:
        lines.append(f"{r.name:>14}  " + "  ".join(f"{percent_range(r.candidates[k]):>16}" for k in kinds))
    return "\n".join(lines)


def format_examples(result: LadderResult) -> str:
    lines = []
    for r in result.rungs:
        if not r.example:
            lines.append(f"{r.name}: every held-out sentence right")
            continue
        e = r.example
        lines.append(f"{r.name} (seed {e['seed']}): {e['context']} [{e['predicted']}]  (right: {e['answer']})\n"
                     f"    {e['reason']}")
    return "\n".join(lines)


def format_pair(result: LadderResult) -> str:
    """The minimal pair (the same words in another order) and each rung's two predictions."""
    first = result.rungs[0].pair
    lines = [f"  A: {first[0][0]} [{first[0][2]}]", f"  B: {first[1][0]} [{first[1][2]}]"]
    for r in result.rungs:
        (_, a, right_a), (_, b, right_b) = r.pair
        verdict = "the same word twice" if a == b else ("both right" if (a, b) == (right_a, right_b) else "")
        lines.append(f"{r.name:>14}: A -> {a:<8} B -> {b:<8} {verdict}")
    return "\n".join(lines)


def format_scores(result: LadderResult, kind: str = SYMMETRY_KIND) -> str:
    """The raw attention scores (before the causal mask) of the shared-map and separate-maps
    rungs on one sentence (first seed), and how far each is from its transpose."""
    words = result.probes[kind]
    lines = [f"scores on: {' '.join(words[1:])}"]
    for r in result.rungs:
        if r.name not in ("shared map", "separate maps") or kind not in r.scores:
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


def parse_seeds(text: str) -> tuple:
    """'0-4' -> (0, 1, 2, 3, 4); '0,3,7' -> (0, 3, 7); ValueError with the reason otherwise."""
    bounds = []
    for part in text.split(","):
        low, dash, high = part.strip().partition("-")
        if not low.isdigit() or (dash and not high.isdigit()):
            raise ValueError(f"--seeds takes whole numbers >= 0 like 0-4 or 0,3,7, got {text!r}")
        bounds.append((int(low), int(high) if dash else int(low)))
    # counted from the bounds: a range as wide as 0-100000000 is refused without being built
    count = sum(max(0, high - low + 1) for low, high in bounds)
    if count > MAX_SEEDS:
        raise ValueError(f"--seeds names {count:,} seeds; at most {MAX_SEEDS}")
    seeds = [seed for low, high in bounds for seed in range(low, high + 1)]
    if not seeds or len(set(seeds)) != len(seeds):
        raise ValueError(f"--seeds must name each seed once, got {text!r}")
    if max(seeds) >= 2 ** 32:
        raise ValueError(f"a seed must be below 2**32, got {max(seeds)}")
    return tuple(seeds)


def rung_name(rung) -> str:
    """How --rungs names a rung: 'separate maps' -> 'separate-maps'."""
    return rung.name.replace(" ", "-")


def parse_rungs(text: str) -> list:
    """'positions,heads' -> their indices in RUNGS, in ladder order; ValueError naming the choices."""
    names = [rung_name(rung) for rung in RUNGS]
    wanted = [part.strip().lower().replace(" ", "-") for part in text.split(",") if part.strip()]
    if not wanted:
        raise ValueError(f"--rungs names no rung; name some of {', '.join(names)}, or leave it out for all of them")
    unknown = [name for name in wanted if name not in names]
    if unknown:
        raise ValueError(f"--rungs: unknown rung {unknown[0]!r}; the rungs are {', '.join(names)}")
    return sorted({names.index(name) for name in wanted})


def parse_without(text: str) -> tuple:
    """'blend,swap' -> the language's kinds without them; ValueError naming the kinds."""
    dropped = {part.strip().lower() for part in text.split(",") if part.strip()}
    if not dropped:
        raise ValueError(f"--without names no sentence kind; name some of {', '.join(KINDS)}, or leave it out")
    unknown = sorted(dropped - set(KINDS))
    if unknown:
        raise ValueError(f"--without: unknown sentence kind {unknown[0]!r}; the kinds are {', '.join(KINDS)}")
    kinds = tuple(kind for kind in KINDS if kind not in dropped)
    if not kinds:
        raise ValueError("--without leaves no sentence kind to train on")
    return kinds


def check_paths(args):
    """Before training: each output is free, or (``--force``) a file of its own kind."""
    if args.json:
        check_output(args.json, args.force, LADDER_JSON, "--json")
    if args.plot:
        check_output(args.plot, args.force, PNG, "--plot")


def write_outputs(result: LadderResult, args, draw):
    """Each output whole or not at all (``transformer.files.output_file``); ``draw(result)`` -> the
    picture (a matplotlib Figure)."""
    if args.json:
        write_output(args.json, json.dumps(result.to_json(), indent=2) + "\n", args.force, LADDER_JSON, "--json")
        print(f"\nwrote {args.json}")
    if args.plot:
        with atomic_output(args.plot) as tmp:
            draw(result).savefig(tmp, format="png", dpi=100)
        print(f"wrote {args.plot}")


def parse_args(argv):
    defaults = LadderConfig()
    parser = Parser(prog="attention-ladder", description=__doc__)
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--seeds", default="0-4", help="seeds to train every rung on: 0-4 or 0,3,7")
    which.add_argument("--seed", type=int, help="one seed only (the same as --seeds N)")
    parser.add_argument("--steps", type=int, default=defaults.steps, help="Adam steps per rung")
    parser.add_argument("--jobs", type=int, default=defaults.jobs, choices=(1, 2),
                        help="trainings at once, one core each (the numbers do not depend on it)")
    parser.add_argument("--eager", action="store_true",
                        help="each training step through the eager engine instead of replaying its recorded "
                             f"program (minigrad.trace, docs/tracing.md): the same numbers, bit for bit. {LADDER_EAGER_COST}")
    parser.add_argument("--rungs", metavar="NAMES", default=None,
                        help="only these rungs, e.g. positions,heads (default: all of them: "
                             + ", ".join(rung_name(rung) for rung in RUNGS) + ")")
    parser.add_argument("--without", metavar="KINDS", default=None,
                        help="train and score on the language without these sentence kinds, e.g. blend "
                             "(what a kind costs a rung on the others)")
    parser.add_argument("--json", metavar="PATH", type=path_argument,
                        help="also write the table (every seed), ideas, wrong sentences, statistics and the minimal "
                             "pair as JSON")
    parser.add_argument("--plot", metavar="PNG", type=path_argument,
                        help="also draw the table (one dot per seed) and the pull statistic into PNG")
    add_force_option(parser)
    args = parser.parse_args(argv)
    if args.steps < 1:
        parser.error(f"--steps must be at least 1, got {args.steps}")
    try:
        args.seeds = parse_seeds(args.seeds if args.seed is None else str(args.seed))
    except ValueError as error:
        message = str(error)
        if args.seed is not None:
            message = f"--seed must be a whole number >= 0, got {args.seed}"
        parser.error(message)
    try:
        # `is None`, not falsiness: an empty --rungs "" is a mistake to refuse, not "all of them"
        args.rungs = parse_rungs(args.rungs) if args.rungs is not None else list(range(len(RUNGS)))
        args.kinds = parse_without(args.without) if args.without is not None else KINDS
    except ValueError as error:
        parser.error(str(error))
    if args.json and args.plot and os.path.realpath(args.json) == os.path.realpath(args.plot):
        parser.error("--json and --plot name the same file: the picture would replace the table")
    return args


def progress(run):
    print(f"  {RUNGS[run.index].name}, seed {run.seed}: {run.seconds:.0f} s", flush=True)


def main(argv=None) -> int:
    """``attention-ladder``: the ladder's command with its picture (``viz.ladder.plot_ladder``)."""
    return command(draw=plot_ladder)(argv)


def command(draw=None):
    """The ``attention-ladder`` console script; ``draw(result)`` makes the picture ``--plot`` writes."""
    @console_script
    def main(argv=None) -> int:
        return run(argv, draw)
    return main


def run(argv, draw) -> int:
    args = parse_args(argv)
    if args.plot and draw is None:
        print("error: --plot needs a drawing function: run attention-ladder (transformer.commands.ladder.main)",
              file=sys.stderr)
        return EXIT_USAGE
    try:
        check_paths(args)                 # refused now, not after minutes of training
    except (OSError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_USAGE
    config = LadderConfig(seeds=args.seeds, steps=args.steps, jobs=args.jobs, kinds=args.kinds, eager=args.eager)
    seeds = ", ".join(map(str, config.seeds))
    count = len(args.rungs)
    without = f", without {args.without}" if args.without else ""
    print(f"training {count} rung{'s' * (count > 1)} on seed{'s' * (len(config.seeds) > 1)} {seeds}{without}, "
          f"{config.steps} steps each, {config.jobs} at a time (CPU seconds of each training as it ends) ...",
          flush=True)
    result = run_ladder(config, rungs=args.rungs, progress=progress)
    print(f"\nheld-out next-word accuracy per sentence kind, % (mean over {len(result.seeds)} seed"
          f"{'s (lowest-highest)' if len(result.seeds) > 1 else ''}); {result.seconds:.0f} s wall, "
          f"{result.cpu_seconds:.0f} s CPU in training\n")
    print(format_table(result))
    if len(result.rungs) > 1:
        print("\neach rung against the one before, on the kind it gains most on\n")
        print(format_gains(result))
    if any(r.pull for r in result.rungs):
        print(f"\nthe pull statistic on all held-out {PULL_KIND} sentences (the last row of the weights; "
              "mean over the seeds)\n")
        print(format_pull(result))
    if any(r.self_pull for r in result.rungs):
        print("\nthe self-pull statistic on the held-out colour sentences scored (the last row: the thing of "
              "the asked colour against the colour word itself; mean over the seeds)\n")
        print(format_pull(result, "self_pull"))
    if any(k in result.kinds for k in CANDIDATES):
        print("\nhow often the answer is one of the two words it is chosen from (order: the two names; "
              "recall: the two places), and (recall_seen) a place the asked name is stated at in some "
              "training sentence, %\n")
        print(format_candidates(result))
    print("\none held-out sentence each rung gets wrong [its prediction]\n")
    print(format_examples(result))
    if "order" in result.kinds:
        print("\na minimal pair: the same words in another order (first seed)\n")
        print(format_pair(result))
    if SYMMETRY_KIND in result.probes and any(r.name in ("shared map", "separate maps") for r in result.rungs):
        print()
        print(format_scores(result))
    try:
        write_outputs(result, args, draw)
    except (OSError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_USAGE
    return 0
