"""The command line of ``dates-explore`` (see the package docstring)."""
import errno
import os
import socket
import sys
import time

from transformer.commands.console import Parser, console_script, path_argument
from transformer.files.output_file import HTML, add_force_option, check_output, free_default, write_output
from transformer.training.snapshots import attention_modules

from ..attention_graph import KINDS, find_attention_module
from ..inputs import UNTRAINED, add_model_arguments, model_from_args, on_numpy_twins, source_ids
from .attention_maps import attention_maps
from .page import page_html
from .step import explore_step
from .subject import as_subject
from .training_steps import snapshot_data


def step_data(model, subject, kind, layer, check=True, rungs=None) -> dict:
    """What the page redraws for one input (a date or sentence, text or ``subject.py`` object):
    the step, every module's attention, the model's prediction, the check, and with ``rungs``
    (``ladder_rungs.train_rungs``) the ladder's rungs on the same sentence."""
    subject = as_subject(model, subject)
    record = explore_step(model, subject, kind, layer)
    data = {"date": subject.text, "input": {"kind": subject.kind, "text": subject.text},
            "prediction": subject.prediction(model), "step": record.to_json(),
            "attention": attention_maps(model, subject)}
    if check:
        from .check import TOLERANCE, check_gradients
        data["check"] = check_gradients(model, subject, kind, layer, record)
        data["check_tolerance"] = TOLERANCE
    if rungs:
        from .ladder_rungs import ladder_data
        data["ladder"] = ladder_data(rungs[1], subject.words, rungs[0])
    return data


def build_page_data(model, date, kind, layer, check=True, snapshots=None, rungs=None) -> dict:
    """Everything the page shows: ``step_data`` for the input, and the attention snapshots of the
    run (``snapshots``: ``training_steps.snapshot_data`` of their file) for the training-step grid,
    slider and curves."""
    data = step_data(model, date, kind, layer, check, rungs)
    if snapshots:
        data["snapshots"] = snapshots
    return data


def graph_module(model, kind=None, layer=None, snapshots=None, default=("decoder-self", 0)) -> tuple:
    """(kind, layer) of the step's graph. Given neither, and the run has snapshots
    (``snapshot_data``), the module where the heatmaps open (``opening_module``), so the graph and
    the heatmaps show one module; else ``default``. A kind or layer given always wins (the other
    then takes its default)."""
    if kind is None and layer is None and snapshots:
        top = opening_module(snapshots)
        return next((k, n) for name, k, n, _ in attention_modules(model) if name == top)
    return kind or default[0], default[1] if layer is None else layer


def opening_module(snapshots) -> str:
    """The module the heatmaps open on: a next-word run's recall-circuit reader, else the head
    that changed most over training (``explorer.js`` opens on the same)."""
    circuit = snapshots.get("circuit")
    return circuit["reader"]["module"] if circuit else snapshots["changes"][0]["module"]


DEFAULT_PAGE = os.path.join("runs", "viz", "explorer.html")


def page_out(out, force, default=DEFAULT_PAGE) -> str:
    """The page's path: ``out`` (--out), else ``default``, numbered when an earlier page holds it;
    checked before the page is built (an existing --out needs ``force``)."""
    if out is None:
        stem, extension = os.path.splitext(default)
        out = free_default(stem, (extension,), force) + extension
    check_output(out, force, kind=HTML)
    return out


def serve_explorer(model, data, title, kind, layer, port, placeholder, rungs=None) -> int:
    """The page for ``data`` on a local server (``server.py``) that runs every typed input's step
    on ``model``; until Ctrl-C, which ``console_script`` turns into one line and exit 130."""
    from .server import Explorer, serve
    data["live"] = {"endpoint": "/step", "placeholder": placeholder}
    explorer = Explorer(page_html(data, title), lambda text, check: step_data(model, text, kind, layer, check, rungs))
    serve(explorer, port, say=lambda line: print(line, flush=True))
    return 0


def add_serve_options(parser):
    parser.add_argument("--serve", action="store_true",
                        help="serve the page on 127.0.0.1 instead of writing it: type your own input, and the step, "
                             "its values and every head's weights are recomputed on the checkpoint (Ctrl-C stops)")
    parser.add_argument("--port", type=int, default=8642, help="the server's port with --serve (default: %(default)s; "
                        "0: any free port)")


def check_port(port, serve=False):
    """A port out of range, and with ``serve`` one we cannot listen on (another server holds it),
    refused before the command spends any time: the server binds it only once the page is built."""
    if not 0 <= port <= 65535:
        raise ValueError(f"--port must be between 0 and 65535, got {port}")
    if serve and port:
        from .server import HOST
        with socket.socket() as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)     # as the server binds it
            try:
                probe.bind((HOST, port))
            except OSError as error:
                why = ("the port is taken (another explorer or server is using it)"
                       if error.errno == errno.EADDRINUSE else error.strerror or str(error))
                raise ValueError(f"cannot serve on {HOST}:{port}: {why}; choose another with --port N, "
                                 "or --port 0 for any free one") from None


def page_title(module_name, date, trained) -> str:
    return f"one attention step: {module_name} on {date}" + ("" if trained else f" ({UNTRAINED})")


def write_explorer(model, out, date="1845-01-05", kind=None, layer=None, trained=True, check=True,
                   force=True, snapshots=None, rungs=None) -> str:
    """Write the page to ``out`` (a path ending in .html), atomically, and return the path.
    ``snapshots``: the run's attention snapshots file, shown under a training-step slider; the
    step's graph is on ``kind`` and ``layer`` (``graph_module`` when not given).

    An existing page there is replaced only with ``force``; anything else never (``check_output``).
    """
    view = snapshot_data(model, snapshots) if snapshots else None
    kind, layer = graph_module(model, kind, layer, view)
    return _write_page(model, out, date, kind, layer, trained, check, force, view, rungs)


def _write_page(model, out, date, kind, layer, trained, check, force, view, rungs=None) -> str:
    """``write_explorer`` with the snapshots already read (``view``) and the module chosen."""
    name, _ = find_attention_module(model, kind, layer)
    check_output(out, force, kind=HTML)
    page = page_html(build_page_data(model, date, kind, layer, check, view, rungs), page_title(name, date, trained))
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
    parser.add_argument("--kind", choices=KINDS, default=None,
                        help="which attention the step's graph shows (default: when the checkpoint's run recorded "
                             "attention snapshots, the kind of the head that changed most over training, where the "
                             "heatmaps open; else decoder-self, the one kind a decoder-only model has)")
    parser.add_argument("--layer", type=int, default=None,
                        help="its layer, from 0 (default: that head's layer with snapshots, else 0)")
    parser.add_argument("--out", default=None, type=path_argument,
                        help=f"the HTML file to write (default: {DEFAULT_PAGE}; numbered -2, -3 ... when taken)")
    parser.add_argument("--no-check", action="store_true",
                        help="skip the finite-difference check of the gradients (its overlay is then off)")
    add_force_option(parser)
    add_serve_options(parser)
    args = parser.parse_args(argv)
    try:
        source_ids(args.date)              # a bad date fails before a model is built or announced
        check_port(args.port, args.serve)  # a taken port is said before a model is loaded
        notes = []                         # which model: said once its page may be written
        chosen = model_from_args(args, say=notes.append)
        if args.kind is not None or args.layer is not None:       # a bad choice fails before the snapshots are read
            find_attention_module(chosen.model, *graph_module(chosen.model, args.kind, args.layer))
        if not args.serve:
            args.out = page_out(args.out, args.force)
        for note in notes:
            print(note, file=sys.stderr)
        snapshots = snapshots_beside(chosen.source) if chosen.trained else None
        start = time.perf_counter()
        view = snapshot_data(chosen.model, snapshots) if snapshots else None
        kind, layer = graph_module(chosen.model, args.kind, args.layer, view)
        name, _ = find_attention_module(chosen.model, kind, layer)
        if args.serve:
            data = build_page_data(chosen.model, args.date, kind, layer, not args.no_check, view)
            return serve_explorer(chosen.model, data, page_title(name, args.date, chosen.trained), kind,
                                  layer, args.port, "a date, YYYY-MM-DD")
        path = _write_page(chosen.model, args.out, args.date, kind, layer, chosen.trained, not args.no_check,
                           args.force, view)
        seconds = time.perf_counter() - start
    except (DateError, ValueError, OSError, CheckpointError, SnapshotError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    size = os.path.getsize(path) / 1e6
    print(f"wrote {path}  ({size:.1f} MB, built in {seconds:.1f} s after loading the model; "
          "open it in a browser, no server needed)")
    if snapshots:
        print(f"with the attention snapshots of {snapshots}: a training-step slider over them (↑ / ↓)")
    if view and args.kind is None and args.layer is None:
        print(f"the step's graph: {name}, which holds the head that changed most over training")
    return 0
