"""Which of the full block's ten parts does recall need? Train the full block with one part
taken away at a time (``transformer/ladder/full_block_parts.py``), the ladder's budget and
batches, and score every kind:

    python examples/full_block_parts.py --seeds 0-4 --json docs/full-block-parts.json --force
    python examples/full_block_parts.py --seeds 12 --parts none,lr-3e-3 --json /tmp/seed12.json
    python examples/full_block_parts.py --seeds 0-2 --cumulative --parts embedding-scale,xavier-init --json /tmp/c.json
    python examples/full_block_parts.py --seeds 3,4 --parts embedding-scale+xavier-init --json /tmp/both.json

A row may remove several parts at once (``a+b``); ``--cumulative`` takes the parts away one more at a
time: the first row removes the first part, the next the first two, and so on (``--parts`` gives the
order), to find how little of the block recall needs; such rows are named "a + b + ...".

A training takes about 30 s of CPU; the ten parts on five seeds, two at a time, about 13 minutes
on two quiet cores. ``none`` is the full block itself. ``--keep FOLDER`` writes each training's
numbers there as it ends and reuses them when run again (an interrupted run resumes). docs/ladder.md ("What the full block's
parts buy") reads the record.
"""
import json
import os
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from transformer.commands.console import Parser                                      # noqa: E402
from transformer.commands.ladder import parse_seeds                                    # noqa: E402
from transformer.files.output_file import OutputKind, add_force_option, check_output, write_output  # noqa: E402

PARTS_JSON = OutputKind("full block parts JSON", lambda head, path: head.lstrip().startswith(b'{\n  "parts"'))
NONE = "none"                   # the full block with nothing removed


def option(part: str) -> str:
    """How --parts names a part: 'W_o and biases' -> 'w_o-and-biases'."""
    return part.lower().replace(" ", "-")


def parse_parts(text, cumulative=False) -> tuple:
    """--parts -> a tuple of rows, each a tuple of the parts it removes: one row per entry ('a+b' removes
    both), or with ``cumulative`` one more part each row."""
    from transformer.ladder.full_block_parts import PARTS
    if text is None:
        rows = tuple((part,) for part in PARTS)
    else:
        rows = tuple(tuple(named_part(w) for w in entry.split("+") if named_part(w) != NONE)
                     for entry in text.split(",") if entry.strip())
        if not rows:
            raise ValueError(f"--parts: name some parts; the parts are {', '.join(map(option, (NONE,) + PARTS))}")
    if cumulative:
        if any(len(row) != 1 for row in rows):
            raise ValueError("--cumulative takes single parts, one after the other (no 'none', no 'a+b')")
        return tuple(tuple(part for (part,) in rows[:n]) for n in range(1, len(rows) + 1))
    return rows


def row_name(removed) -> str:
    """How the record names a row: 'none', one part, or 'a + b + c'."""
    return " + ".join(removed) or NONE


def named_part(word) -> str:
    """'layer-norm' -> 'layer norm' (or NONE); ValueError naming the choices."""
    from transformer.ladder.full_block_parts import PARTS
    choices = {option(part): part for part in (NONE,) + PARTS}
    if word.strip().lower() not in choices:
        raise ValueError(f"--parts: unknown part {word.strip()!r}; the parts are {', '.join(choices)}")
    return choices[word.strip().lower()]


def kept_path(folder, removed, seed):
    """Where ``--keep`` keeps one training's numbers (None without ``--keep``)."""
    name = "+".join(option(part) for part in removed) or NONE
    return folder and os.path.join(folder, f"{name}-seed-{seed}.json")


def train_one(task):
    """(removed parts, seed, config) -> (the same, seed, accuracy per kind, CPU seconds): one BLAS thread, as
    the ladder."""
    from threadpoolctl import threadpool_limits
    from transformer.ladder.experiment import score, train_rung
    from transformer.ladder.full_block_parts import full_block_without
    from transformer.tasks.language import Language
    removed, seed, config = task
    with threadpool_limits(limits=1, user_api="blas"):
        start = time.process_time()
        language = Language(seed=seed, kinds=config.kinds)
        model = train_rung(full_block_without(*removed), config, language, seed)
        accuracy, _ = score(model, language.evaluation_set(per_kind=config.eval_per_kind))
        return removed, seed, accuracy, round(time.process_time() - start, 1)


def main(argv=None) -> int:
    parser = Parser(prog="examples/full_block_parts.py", description=__doc__)
    parser.add_argument("--seeds", default="0-4", help="seeds: 0-4 or 0,3,7")
    parser.add_argument("--parts", default=None,
                        help="only these parts, e.g. none,layer-norm; 'a+b' removes both at once (default: all ten)")
    parser.add_argument("--cumulative", action="store_true",
                        help="remove the parts one more at a time, in the order --parts gives")
    parser.add_argument("--jobs", type=int, default=2, choices=(1, 2), help="trainings at once, one core each")
    parser.add_argument("--json", metavar="PATH", required=True, help="write the record here")
    parser.add_argument("--keep", metavar="FOLDER", help="keep each training's numbers here and reuse them")
    add_force_option(parser)
    args = parser.parse_args(argv)
    try:
        seeds, rows = parse_seeds(args.seeds), parse_parts(args.parts, args.cumulative)
        check_output(args.json, args.force, PARTS_JSON, "--json")
        if args.keep:
            os.makedirs(args.keep, exist_ok=True)
    except (ValueError, OSError) as error:
        parser.error(str(error))
    from transformer.ladder.experiment import LadderConfig, worker_pool
    from transformer.parallel.threads import arithmetic
    config = LadderConfig(seeds=seeds)
    done = {}
    for removed in rows:
        for seed in seeds:
            kept = kept_path(args.keep, removed, seed)
            if kept and os.path.exists(kept):
                with open(kept) as file:
                    done[removed, seed] = tuple(json.load(file))
    tasks = [(removed, seed, config) for seed in seeds for removed in rows if (removed, seed) not in done]
    pool = worker_pool(args.jobs)
    try:
        for removed, seed, accuracy, seconds in pool.imap_unordered(train_one, tasks, chunksize=1):
            done[removed, seed] = accuracy, seconds
            if args.keep:
                write_output(kept_path(args.keep, removed, seed), json.dumps([accuracy, seconds]), True)
            print(f"  without {row_name(removed)}, seed {seed}: " + ", ".join(f"{k} {100 * v:.1f}" for k, v in accuracy.items())
                  + f"; {seconds:.0f} s", flush=True)
        pool.close()
    finally:
        pool.terminate()
        pool.join()
    record = {"parts": {row_name(removed): {"accuracy": {kind: [done[removed, s][0][kind] for s in seeds]
                                                         for kind in config.kinds},
                                            "seconds": [done[removed, s][1] for s in seeds]} for removed in rows},
              "seeds": list(seeds), "steps": config.steps, "kinds": list(config.kinds), "arithmetic": arithmetic()}
    write_output(args.json, json.dumps(record, indent=2) + "\n", args.force, PARTS_JSON, "--json")
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
