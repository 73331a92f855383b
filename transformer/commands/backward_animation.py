"""dates-backward-animation: the backward pass as an animation (``viz/backward_animation.py``
draws it), of an expression over a few leaves or of one attention step of the date model."""
import argparse
import hashlib
import os
import re
import sys

from transformer.commands.attention_graph import EXIT_CODES_HELP
from transformer.commands.console import Parser, console_script, path_argument
from transformer.commands.model_options import add_model_arguments, model_from_args
from transformer.files.checkpoint import CheckpointError
from transformer.files.output_file import add_force_option, free_default
from transformer.tasks.dates import DateError
from viz import attention_graph, backward_animation
from viz.animation_output import MAX_GIF_HEIGHT, write_animation
from viz.inputs import on_numpy_twins, source_ids
from viz.render import EXIT_DOT_MISSING

MODEL_OPTIONS = ("checkpoint", "untrained", "seed", "d_model", "heads", "layers")


def _model_options_given(args) -> list:
    """The --attention-only options given on the command line (ignored silently otherwise)."""
    given = [f"--{name.replace('_', '-')}" for name in MODEL_OPTIONS if getattr(args, name) not in (None, False)]
    return given + ["--date"] * (args.date != backward_animation.DEFAULT_DATE) + ["--layer"] * (args.layer != 0)


@console_script
@on_numpy_twins
def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    try:
        _check_arguments(args)
        root, options, title = _animated_root(args)
        frames = backward_animation.backward_frames(root, rankdir=args.rankdir, title=title, **options)
        formats = tuple(args.format or ("gif", "html"))
        out = args.out or free_default(default_out(args), tuple(f".{fmt}" for fmt in formats + ("dot",)), args.force)
        paths = write_animation(frames, out, formats=formats, dpi=args.dpi, force=args.force,
                                max_height=args.max_height)
    except (DateError, ValueError, OSError, CheckpointError, RuntimeError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if paths.message:              # no `dot`: the frames' .dot was written and the hint printed
        print(f"wrote {', '.join(paths)}  ({len(frames)} frames, not rendered)")
        return EXIT_DOT_MISSING
    print(f"wrote {', '.join(paths)}  ({len(frames)} frames, one per op backward processed)")
    return 0


def _parser():
    parser = Parser(prog="dates-backward-animation", description=backward_animation.__doc__.split("\n")[0],
                    epilog=EXIT_CODES_HELP)
    parser.add_argument("--expr", default=None,
                        help=f"an expression over --var leaves, Tensor methods allowed (default: {backward_animation.DEFAULT_EXPR})")
    parser.add_argument("--var", action="append", metavar="NAME=1,2",
                        help=f"a leaf and its values, repeatable (default: {' '.join(backward_animation.DEFAULT_VARS)})")
    parser.add_argument("--attention", choices=attention_graph.KINDS, help="animate one attention step of the date model instead")
    attention = parser.add_argument_group("with --attention")
    attention.add_argument("--layer", type=int, default=0, help="layer index, from 0 (default: %(default)s)")
    add_model_arguments(attention, default_date=backward_animation.DEFAULT_DATE)
    parser.add_argument("--out", type=path_argument, default=None,
                        help="output path without extension (default: named after what is animated, e.g. "
                             f"{default_out(argparse.Namespace(attention=None, expr=None))} or "
                             f"{default_out(argparse.Namespace(attention='decoder-self', layer=0))}; "
                             "numbered -2, -3 ... when taken)")
    parser.add_argument("--format", action="append", choices=["gif", "html"], help="default: both")
    parser.add_argument("--rankdir", choices=["TB", "LR"], default="TB")
    parser.add_argument("--dpi", type=int, default=72, help="resolution of the GIF frames (default: 72)")
    parser.add_argument("--max-height", type=int, default=MAX_GIF_HEIGHT, metavar="PX",
                        help="scale the GIF down to at most PX pixels tall (default: %(default)s; the HTML "
                             "page keeps full size)")
    add_force_option(parser)
    return parser


OPERATOR_WORDS = (("**", "pow"), ("*", "mul"), ("+", "add"), ("-", "sub"), ("/", "div"), ("@", "matmul"))
MAX_NAME = 60


def default_out(args) -> str:
    """The default output stem, named after what is animated, so that animating another expression
    or another attention does not meet the previous one's files: runs/viz/backward_a_mul_b_add_a_tanh_sum,
    runs/viz/backward_decoder-self_layer0."""
    if args.attention:
        name = f"{args.attention}_layer{args.layer}"
    else:
        name = args.expr or backward_animation.DEFAULT_EXPR
        for operator, word in OPERATOR_WORDS:
            name = name.replace(operator, f" {word} ")
        name = re.sub(r"[^A-Za-z0-9.]+", "_", name).replace(".", "_").strip("_")
        name = re.sub(r"_+", "_", name)
        if len(name) > MAX_NAME:     # a long expression: its start and a hash of the whole
            name = name[:MAX_NAME - 9] + "_" + hashlib.sha1((args.expr or "").encode()).hexdigest()[:8]
    return os.path.join("runs", "viz", f"backward_{name}")


def _check_arguments(args):
    """A ValueError naming the first combination of options that cannot be animated."""
    if args.attention and (args.expr or args.var):
        raise ValueError("give either --attention or --expr/--var, not both")
    model_options = _model_options_given(args)
    if model_options and not args.attention:
        raise ValueError(f"{', '.join(model_options)} need --attention KIND "
                         "(they choose the model and the step to animate)")
    if not 20 <= args.dpi <= 300:
        raise ValueError(f"--dpi must be between 20 and 300, got {args.dpi}")
    if args.max_height < 100:
        raise ValueError(f"--max-height must be at least 100 (pixels), got {args.max_height}")


def _animated_root(args):
    """(root tensor, backward_frames options, title): one attention step of the date model, or the expression."""
    if args.attention:
        source_ids(args.date)          # a bad date fails before a model is built
        chosen = model_from_args(args)
        return backward_animation.attention_root(chosen.model, args.date, args.attention, args.layer, not chosen.trained)
    variables = dict(backward_animation.parse_var(v) for v in (args.var or backward_animation.DEFAULT_VARS))
    expr = args.expr or backward_animation.DEFAULT_EXPR
    return backward_animation.expression_root(expr, variables), {}, expr
