"""Which of the full block's ten parts does recall need? Train the full block with one part
taken away at a time (``transformer/ladder/full_block_parts.py``), the ladder's budget and
batches, and score every kind:

    python examples/full_block_parts.py --seeds 0-4 --json docs/full-block-parts.json --force
    python examples/full_block_parts.py --seeds 12 --parts none,lr-3e-3 --json /tmp/seed12.json

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


def parse_parts(text) -> tuple:
    from transformer.ladder.full_block_parts import PARTS
    if text is None:
        return PARTS
    choices = {option(part): part for part in (NONE,) + PARTS}
    wanted = [w.strip().lower() for w in text.split(",") if w.strip()]
    unknown = [w for w in wanted if w not in choices]
    if unknown or not wanted:
        raise ValueError(f"--parts: unknown part {unknown[0] if unknown else text!r}; the parts are "
                         f"{', '.join(choices)}")
    return tuple(choices[w] for w in wanted)


def kept_path(folder, part, seed):
    """Where ``--keep`` keeps one training's numbers (None without ``--keep``)."""
    return folder and os.path.join(folder, f"{option(part)}-seed-{seed}.json")


def train_one(task):
    """(part, seed, config) -> (part, seed, accuracy per kind, CPU seconds): one BLAS thread, as the ladder."""
    from threadpoolctl import threadpool_limits
    from transformer.ladder.experiment import score, train_rung
    from transformer.ladder.full_block_parts import full_block_without
    from transformer.tasks.language import Language
    part, seed, config = task
    with threadpool_limits(limits=1, user_api="blas"):
        start = time.process_time()
        language = Language(seed=seed, kinds=config.kinds)
        model = train_rung(full_block_without(*(() if part == NONE else (part,))), config, language, seed)
        accuracy, _ = score(model, language.evaluation_set(per_kind=config.eval_per_kind))
        return part, seed, accuracy, round(time.process_time() - start, 1)


def main(argv=None) -> int:
    parser = Parser(prog="examples/full_block_parts.py", description=__doc__)
    parser.add_argument("--seeds", default="0-4", help="seeds: 0-4 or 0,3,7")
    parser.add_argument("--parts", default=None, help="only these parts, e.g. none,layer-norm (default: all ten)")
    parser.add_argument("--jobs", type=int, default=2, choices=(1, 2), help="trainings at once, one core each")
    parser.add_argument("--json", metavar="PATH", required=True, help="write the record here")
    parser.add_argument("--keep", metavar="FOLDER", help="keep each training's numbers here and reuse them")
    add_force_option(parser)
    args = parser.parse_args(argv)
    try:
        seeds, parts = parse_seeds(args.seeds), parse_parts(args.parts)
        check_output(args.json, args.force, PARTS_JSON, "--json")
        if args.keep:
            os.makedirs(args.keep, exist_ok=True)
    except (ValueError, OSError) as error:
        parser.error(str(error))
    from transformer.ladder.experiment import LadderConfig, worker_pool
    from transformer.parallel.threads import arithmetic
    config = LadderConfig(seeds=seeds)
    done = {}
    for part in parts:
        for seed in seeds:
            kept = kept_path(args.keep, part, seed)
            if kept and os.path.exists(kept):
                with open(kept) as file:
                    done[part, seed] = tuple(json.load(file))
    tasks = [(part, seed, config) for seed in seeds for part in parts if (part, seed) not in done]
    pool = worker_pool(args.jobs)
    try:
        for part, seed, accuracy, seconds in pool.imap_unordered(train_one, tasks, chunksize=1):
            done[part, seed] = accuracy, seconds
            if args.keep:
                write_output(kept_path(args.keep, part, seed), json.dumps([accuracy, seconds]), True)
            print(f"  without {part}, seed {seed}: " + ", ".join(f"{k} {100 * v:.1f}" for k, v in accuracy.items())
                  + f"; {seconds:.0f} s", flush=True)
        pool.close()
    finally:
        pool.terminate()
        pool.join()
    record = {"parts": {part: {"accuracy": {kind: [done[part, s][0][kind] for s in seeds] for kind in config.kinds},
                               "seconds": [done[part, s][1] for s in seeds]} for part in parts},
              "seeds": list(seeds), "steps": config.steps, "kinds": list(config.kinds), "arithmetic": arithmetic()}
    write_output(args.json, json.dumps(record, indent=2) + "\n", args.force, PARTS_JSON, "--json")
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
