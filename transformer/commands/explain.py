"""dates-explain: one attention head step by step, as tables (``viz/walkthrough.py`` computes
and formats them)."""
import sys

from transformer.commands.console import Parser, console_script
from transformer.commands.model_options import add_model_arguments, model_from_args
from transformer.files.checkpoint import CheckpointError
from transformer.tasks.dates import DateError
from viz import walkthrough
from viz.inputs import on_numpy_twins, source_ids


@console_script
@on_numpy_twins
def main(argv=None) -> int:
    parser = Parser(prog="dates-explain", description=walkthrough.__doc__.split("\n")[0])
    parser.add_argument("date", nargs="?", default=walkthrough.DEFAULT_DATE, help="an ISO date (default: %(default)s)")
    add_model_arguments(parser, date_option=False)
    parser.add_argument("--head", type=int, default=0, help="which head of encoder layer 0 (default: %(default)s)")
    parser.add_argument("--max-dims", type=int, default=16, help="columns shown of wide tables (default: %(default)s)")
    parser.add_argument("--markdown", action="store_true", help="print markdown tables and headings")
    args = parser.parse_args(argv)
    if args.max_dims < 1:
        print(f"error: --max-dims must be at least 1, got {args.max_dims}", file=sys.stderr)
        return 2
    try:
        source_ids(args.date)              # a bad date fails before a model is built or announced
        chosen = model_from_args(args)
        steps = walkthrough.compute_walkthrough(chosen.model, args.date, args.head)
        steps.model_note = chosen.title_note
        text = walkthrough.format_walkthrough(steps, args.markdown, args.max_dims)
    except (DateError, ValueError, OSError, CheckpointError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    sys.stdout.write(text)
    return 0
