"""What the sources teach, measured on the ladder: a value space of its own, predicting at every
position, and the heads of the blend kind each on its own part.

    python examples/ladder_sources.py --seeds 0-9 --keep runs/ladder-sources --json docs/ladder-sources.json --force
    python examples/ladder_sources.py --seeds 0 --variants heads,heads-values-keys --json /tmp/two.json
    python examples/ladder_sources.py --picture docs/images/blend_heads.png --force

The first trains variants of ``transformer/ladder/variants.py`` (by default all six) on every
seed with the ladder's budget (2,500 steps each; a heads rung takes about 16 s of CPU, a full
block about twice that) and writes their held-out accuracy, learning curves and the heads'
roles; ``--keep`` lets an interrupted run resume. The JSON file keeps one record per arithmetic
(BLAS kernels and vector width, which round the floats and so the path training takes): a run
replaces this machine's record and leaves the others'. The AVX2 record on an AVX-512 machine:
prefix the command with ``NUMBA_CPU_NAME=haswell OPENBLAS_CORETYPE=Haswell MINIGRAD_VECTOR_BYTES=32``.
The second trains the heads rung on seed 0 and draws each head's weights on a blend sentence,
labelled with what it reads. docs/ladder.md ("What the sources teach, measured") reads both.
"""
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from transformer.commands.console import Parser                                      # noqa: E402
from transformer.commands.ladder import parse_seeds                                    # noqa: E402
from transformer.files.output_file import PNG, OutputKind, add_force_option, check_output, write_output  # noqa: E402

# the records' file as this script writes it (or, before it kept one record per machine, one record)
SOURCES_JSON = OutputKind("ladder sources JSON",
                          lambda head, path: head.lstrip().startswith((b'{\n  "command"', b'{\n  "config"')))


def parse_variants(text) -> tuple:
    """'heads,full-block' -> those variants' names in the record's order; ValueError naming the choices."""
    from transformer.ladder.variants import VARIANT_NAMES, variant_option
    if text is None:
        return VARIANT_NAMES
    options = {variant_option(name): name for name in VARIANT_NAMES}
    wanted = [part.strip().lower() for part in text.split(",") if part.strip()]
    unknown = [w for w in wanted if w not in options]
    if unknown or not wanted:
        raise ValueError(f"--variants: unknown variant {unknown[0] if unknown else text!r}; "
                         f"the variants are {', '.join(options)}")
    return tuple(name for name in VARIANT_NAMES if variant_option(name) in wanted)


def parse_args(argv):
    parser = Parser(prog="examples/ladder_sources.py", description=__doc__)
    parser.add_argument("--seeds", default="0-4", help="seeds to train every variant on: 0-4 or 0,3,7")
    parser.add_argument("--jobs", type=int, default=2, choices=(1, 2), help="trainings at once, one core each")
    parser.add_argument("--json", metavar="PATH", help="train the variants and write their record here")
    parser.add_argument("--variants", metavar="NAMES", default=None,
                        help="only these variants, e.g. heads,heads-values-keys (default: all six of "
                             "transformer/ladder/variants.py)")
    parser.add_argument("--keep", metavar="FOLDER", help="write each training's numbers here as it ends and reuse "
                        "them when run again (to resume an interrupted run)")
    parser.add_argument("--picture", metavar="PNG", help="train the heads rung on seed 0 and draw its heads here")
    add_force_option(parser)
    args = parser.parse_args(argv)
    if not args.json and not args.picture:
        parser.error("say what to make: --json PATH (the variants over the seeds) and/or --picture PNG")
    try:
        args.seeds = parse_seeds(args.seeds)
        args.variants = parse_variants(args.variants)
        if args.json:
            check_output(args.json, args.force, SOURCES_JSON, "--json")
        if args.picture:
            check_output(args.picture, args.force, PNG, "--picture")
    except (OSError, ValueError) as error:
        parser.error(str(error))
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    from transformer.ladder import LadderConfig
    if args.json:
        from transformer.ladder.variants import keep_record, run_variants
        config = LadderConfig(seeds=args.seeds, jobs=args.jobs)
        print(f"training {len(args.variants)} variants on seeds {', '.join(map(str, args.seeds))}, {config.steps} steps each ...",
              flush=True)
        record = run_variants(config, names=args.variants, keep=args.keep, progress=lambda run: print(f"  {run.variant}, seed {run.seed}: "
                                                                  f"{run.seconds:.0f} s", flush=True))
        command = "python examples/ladder_sources.py " + " ".join(argv if argv is not None else sys.argv[1:])
        write_output(args.json, keep_record(args.json, record, command), args.force, SOURCES_JSON, "--json")
        print(f"wrote {args.json}, the record of {record['arithmetic']} ({record['seconds']:.0f} s)")
    if args.picture:
        from viz.blend_heads import save_blend_heads
        save_blend_heads(args.picture, LadderConfig(seeds=(0,)))
        print(f"wrote {args.picture}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
