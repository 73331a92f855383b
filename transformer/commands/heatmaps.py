"""dates-heatmaps and dates-plot-training: attention heatmaps of one date and a run's training
curves as PNG files (``viz/heatmaps.py`` draws them with matplotlib)."""
import os
import sys

from transformer.commands.console import Parser, console_script, path_argument
from transformer.commands.model_options import add_model_arguments, model_from_args
from transformer.files.checkpoint import CheckpointError
from transformer.files.output_file import add_force_option, check_outputs, free_default
from transformer.files.run_dir import LOG_NAME, default_checkpoint
from transformer.tasks.dates import DateError
from viz import heatmaps
from viz.inputs import attention_kinds, is_decoder_only, on_numpy_twins, source_ids


@console_script
@on_numpy_twins
def main(argv=None) -> int:
    parser = Parser(prog="dates-heatmaps",
                    description="Attention heatmaps (every layer and head) for one date.")
    add_model_arguments(parser)
    parser.add_argument("--out-dir", type=path_argument, default=None,
                        help="folder for the PNGs (default: runs/viz/heatmaps; numbered -2, -3 ... when it exists)")
    parser.add_argument("--prefix", default="attention", help="file name prefix (default: %(default)s)")
    add_force_option(parser)
    args = parser.parse_args(argv)
    try:
        source_ids(args.date)              # a bad date fails before a model is built or announced
        notes = []                         # which model: said once its pictures may be written
        chosen = model_from_args(args, say=notes.append)
        args.out_dir = args.out_dir or free_default(os.path.join("runs", "viz", "heatmaps"), force=args.force)
        check_outputs(heatmaps.heatmap_paths(args.out_dir, args.prefix, attention_kinds(chosen.model),
                                    is_decoder_only(chosen.model)).values(), args.force, "--out-dir or --prefix")
        for note in notes:
            print(note, file=sys.stderr)
        saved = heatmaps.save_attention_heatmaps(chosen.model, args.date, args.out_dir, args.prefix,
                                        untrained=not chosen.trained, force=args.force)
    except (DateError, ValueError, OSError, CheckpointError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print("wrote " + ", ".join(s.path for s in saved.values()))
    return 0


@console_script
def curves_main(argv=None) -> int:
    parser = Parser(prog="dates-plot-training",
                    description="Loss and held-out exact-match curves from a training log.")
    parser.add_argument("log", nargs="?", default=None,
                        help="the JSON-lines log written by dates-train (default: the newest finished run's, "
                             "runs/dates/train_log.jsonl or runs/dates-N/train_log.jsonl)")
    parser.add_argument("--out", type=path_argument, default=None,
                        help="output PNG (default: runs/viz/training_curves.png; numbered -2, -3 ... when taken)")
    add_force_option(parser)
    args = parser.parse_args(argv)
    try:
        log = args.log or os.path.join(os.path.dirname(default_checkpoint()), LOG_NAME)
        out = args.out or free_default(os.path.join("runs", "viz", "training_curves"), (".png",), args.force) + ".png"
        saved = heatmaps.plot_training_curves(log, out, force=args.force)
    except (ValueError, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(f"wrote {saved.path}")
    return 0
