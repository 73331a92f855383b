"""dates-attention-graph: the computation graph of one attention step (``viz/attention_graph.py``
draws it with graphviz), forward and with ``--backward`` its gradients."""
import sys
import time

from transformer.commands.console import EXIT_CODES, Parser, console_script, path_argument
from transformer.commands.model_options import add_model_arguments, model_from_args
from transformer.files.checkpoint import CheckpointError
from transformer.files.output_file import add_force_option, check_outputs, free_default
from transformer.tasks.dates import DateError
from viz import attention_graph
from viz.inputs import attention_kinds, on_numpy_twins, source_ids
from viz.render import EXIT_DOT_MISSING, render

EXIT_CODES_HELP = (EXIT_CODES[:-1] + f", {EXIT_DOT_MISSING} Graphviz's `dot` is not installed, so only the .dot "
                   "source was written (one line says how to install it).")


@console_script
@on_numpy_twins
def main(argv=None) -> int:
    parser = Parser(prog="dates-attention-graph", description=attention_graph.__doc__.split("\n")[0],
                    epilog=EXIT_CODES_HELP)
    add_model_arguments(parser)
    parser.add_argument("--kind", choices=attention_graph.KINDS, default=None,
                        help="which attention (default: encoder-self; a decoder-only model's only kind is decoder-self)")
    parser.add_argument("--layer", type=int, default=0, help="layer index, from 0 (default: %(default)s)")
    parser.add_argument("--backward", action="store_true", help="also show the gradients of sum(output)")
    parser.add_argument("--out", type=path_argument, default=None,
                        help="output path without extension (default: named after the step drawn, e.g. "
                             f"{attention_graph.default_out('1845-01-05', 'decoder-self', 0)}; numbered -2, -3 ... when taken)")
    parser.add_argument("--format", action="append", choices=["svg", "png", "pdf"],
                        help="rendered format, repeatable (default: svg); the .dot is always written")
    parser.add_argument("--rankdir", choices=["TB", "LR"], default="TB")
    parser.add_argument("--no-clusters", action="store_true", help="do not box the ops of each sub-module")
    parser.add_argument("--max-depth", type=int, default=None, metavar="N",
                        help="draw only the last N ops before the output (e.g. 7: from the mask on)")
    parser.add_argument("--output-of", metavar="NAME",
                        help="draw the graph only up to the tensor with this name (e.g. weights)")
    add_force_option(parser)
    args = parser.parse_args(argv)
    if args.max_depth is not None and args.max_depth < 1:
        print(f"error: --max-depth must be at least 1, got {args.max_depth}", file=sys.stderr)
        return 2
    try:
        source_ids(args.date)              # a bad date fails before a model is built or announced
        formats = tuple(args.format or ["svg"])
        notes = []                         # which model: said once its picture may be written
        chosen = model_from_args(args, say=notes.append)
        kind = args.kind or attention_kinds(chosen.model)[0]
        attention_graph.find_attention_module(chosen.model, kind, args.layer)      # what is asked is checked before where it goes
        extensions = tuple(f".{fmt}" for fmt in formats + ("dot",))
        out = args.out or free_default(attention_graph.default_out(args.date, kind, args.layer), extensions, args.force)
        check_outputs([out + extension for extension in extensions], args.force)
        for note in notes:
            print(note, file=sys.stderr)
        start = time.perf_counter()
        graph, _ = attention_graph.build_attention_graph(chosen.model, args.date, kind, args.layer, args.backward,
                                         not args.no_clusters, args.rankdir, untrained=not chosen.trained,
                                         max_depth=args.max_depth, output_of=args.output_of)
        built = time.perf_counter()
        paths = render(graph, out, formats=formats, force=args.force)
        done = time.perf_counter()
    except (DateError, ValueError, OSError, CheckpointError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if paths.message:              # no `dot`: the .dot was written and render said how to install it
        print(f"wrote {', '.join(paths)}  (not rendered)")
        return EXIT_DOT_MISSING
    print(f"wrote {', '.join(paths)}  (graph built in {built - start:.2f} s, including the forward pass; "
          f"rendered in {done - built:.2f} s)")
    return 0
