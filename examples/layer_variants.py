"""What the two-layer rung's training aids buy: train each variant of
``transformer/ladder/layer_variants.py`` (the rung less one aid) on the ladder's budget and
batches, and score every kind:

    python examples/layer_variants.py --seeds 0-9 --json docs/layer-variants.json --force

A training takes 15-30 s of CPU, two at a time. docs/ladder.md ("What makes two layers
trainable") reads the record; the rung itself is in the ladder's record (``attention-ladder``).
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

VARIANTS_JSON = OutputKind("layer variants JSON", lambda head, path: head.lstrip().startswith(b'{\n  "variants"'))


def parse_variants(text) -> tuple:
    from transformer.ladder.layer_variants import LAYER_VARIANTS
    if text is None:
        return tuple(LAYER_VARIANTS)
    wanted = [w.strip() for w in text.split(";") if w.strip()]
    unknown = [w for w in wanted if w not in LAYER_VARIANTS]
    if unknown or not wanted:
        raise ValueError(f"--variants: unknown variant {unknown[0] if unknown else text!r}; the variants are "
                         f"{'; '.join(LAYER_VARIANTS)}")
    return tuple(wanted)


def train_one(task):
    """(variant name, seed, config) -> (the same, accuracy per kind, CPU seconds): one BLAS thread."""
    from threadpoolctl import threadpool_limits
    from transformer.ladder.experiment import score, train_rung
    from transformer.ladder.layer_variants import LAYER_VARIANTS
    from transformer.tasks.language import Language
    name, seed, config = task
    with threadpool_limits(limits=1, user_api="blas"):
        start = time.process_time()
        language = Language(seed=seed, kinds=config.kinds)
        model = train_rung(LAYER_VARIANTS[name], config, language, seed)
        accuracy, _ = score(model, language.evaluation_set(per_kind=config.eval_per_kind))
        return name, seed, accuracy, round(time.process_time() - start, 1)


def main(argv=None) -> int:
    parser = Parser(prog="examples/layer_variants.py", description=__doc__)
    parser.add_argument("--seeds", default="0-9", help="seeds: 0-4 or 0,3,7")
    parser.add_argument("--variants", default=None, help="only these, separated by ';' (default: all)")
    parser.add_argument("--jobs", type=int, default=2, choices=(1, 2), help="trainings at once, one core each")
    parser.add_argument("--json", metavar="PATH", required=True, help="write the record here")
    add_force_option(parser)
    args = parser.parse_args(argv)
    try:
        seeds, names = parse_seeds(args.seeds), parse_variants(args.variants)
        check_output(args.json, args.force, VARIANTS_JSON, "--json")
    except (ValueError, OSError) as error:
        parser.error(str(error))
    from transformer.ladder.experiment import LadderConfig, worker_pool
    from transformer.parallel.threads import arithmetic
    config = LadderConfig(seeds=seeds)
    done = {}
    pool = worker_pool(args.jobs)
    try:
        tasks = [(name, seed, config) for seed in seeds for name in names]
        for name, seed, accuracy, seconds in pool.imap_unordered(train_one, tasks, chunksize=1):
            done[name, seed] = accuracy, seconds
            print(f"  {name}, seed {seed}: " + ", ".join(f"{k} {100 * v:.1f}" for k, v in accuracy.items())
                  + f"; {seconds:.0f} s", flush=True)
        pool.close()
    finally:
        pool.terminate()
        pool.join()
    record = {"variants": {name: {"accuracy": {kind: [done[name, s][0][kind] for s in seeds] for kind in config.kinds},
                                  "seconds": [done[name, s][1] for s in seeds]} for name in names},
              "seeds": list(seeds), "steps": config.steps, "kinds": list(config.kinds), "arithmetic": arithmetic()}
    write_output(args.json, json.dumps(record, indent=2) + "\n", args.force, VARIANTS_JSON, "--json")
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
