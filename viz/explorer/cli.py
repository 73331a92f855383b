"""The command line of ``dates-explore`` (see the package docstring)."""
import os
import sys
import time

from transformer.commands.console import Parser, console_script, path_argument
from transformer.files.output_file import HTML, add_force_option, check_output, write_output

from ..attention_graph import KINDS, find_attention_module
from ..inputs import UNTRAINED, add_model_arguments, model_from_args, on_numpy_twins, source_ids
from .attention_maps import attention_maps
from .page import page_html
from .step import explore_step
from .training_steps import snapshot_data


def build_page_data(model, date, kind, layer, check=True, snapshots=None) -> dict:
    """Everything the page shows for one date: the step, every module's attention, the check,
    and the attention snapshots of the run (``snapshots``: their file) for the training-step slider."""
    record = explore_step(model, date, kind, layer)
    data = {"date": date, "step": record.to_json(), "attention": attention_maps(model, date)}
    if snapshots:
        data["snapshots"] = snapshot_data(model, snapshots)
    if check:
        from .check import TOLERANCE, check_gradients
        data["check"] = check_gradients(model, date, kind, layer, record)
        data["check_tolerance"] = TOLERANCE
    return data


def page_title(module_name, date, trained) -> str:
    return f"one attention step: {module_name} on {date}" + ("" if trained else f" ({UNTRAINED})")


def write_explorer(model, out, date="1845-01-05", kind="encoder-self", layer=0, trained=True, check=True,
                   force=True, snapshots=None) -> str:
    """Write the page to ``out`` (a path ending in .html), atomically, and return the path.
    ``snapshots``: the run's attention snapshots file, shown under a training-step slider.

    An existing page there is replaced only with ``force``; anything else never (``check_output``).
    """
    name, _ = find_attention_module(model, kind, layer)
    check_output(out, force, kind=HTML)
    page = page_html(build_page_data(model, date, kind, layer, check, snapshots), page_title(name, date, trained))
    return write_output(out, page, force, HTML)


@console_script
@on_numpy_twins
def main(argv=None) -> int:
    from transformer.files.checkpoint import CheckpointError
    from transformer.tasks.dates import DateError
    from transformer.training.snapshots import SnapshotError, snapshots_beside

    parser = Parser(prog="dates-explore", description="One attention step of the date model, "
                    "forward and backward, in one self-contained HTML page.")
    add_model_arguments(parser)
    parser.add_argument("--kind", choices=KINDS, default="decoder-self",
                        help="which attention (default: %(default)s, the one kind a decoder-only model has)")
    parser.add_argument("--layer", type=int, default=0, help="layer index, from 0 (default: %(default)s)")
    parser.add_argument("--out", default=os.path.join("runs", "viz", "explorer.html"), type=path_argument,
                        help="the HTML file to write (default: %(default)s)")
    parser.add_argument("--no-check", action="store_true",
                        help="skip the finite-difference check of the gradients (its overlay is then off)")
    add_force_option(parser)
    args = parser.parse_args(argv)
    try:
        source_ids(args.date)              # a bad date fails before a model is built or announced
        check_output(args.out, args.force, kind=HTML)
        chosen = model_from_args(args)
        find_attention_module(chosen.model, args.kind, args.layer)
        snapshots = snapshots_beside(chosen.source) if chosen.trained else None
        start = time.perf_counter()
        path = write_explorer(chosen.model, args.out, args.date, args.kind, args.layer, chosen.trained,
                              check=not args.no_check, force=args.force, snapshots=snapshots)
        seconds = time.perf_counter() - start
    except (DateError, ValueError, OSError, CheckpointError, SnapshotError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    size = os.path.getsize(path) / 1e6
    print(f"wrote {path}  ({size:.1f} MB, built in {seconds:.1f} s after loading the model; "
          "open it in a browser, no server needed)")
    if snapshots:
        print(f"with the attention snapshots of {snapshots}: a training-step slider over them (↑ / ↓)")
    return 0
