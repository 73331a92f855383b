"""dates-explore and next-word-explore: one attention step of a model, forward and backward, in
one self-contained HTML page, or served on 127.0.0.1 (``--serve``) to run any typed input.

The page and the server are ``viz.explorer`` (see its package docstring); here are the two
command lines, which differ in the model they load and the input they start from, and share
the rest: the serve options, the page's path, and the end (write or serve, and what to say).
"""
import os
import sys
import time
from typing import NamedTuple

from transformer.commands.console import Parser, console_script, path_argument, sigterm_as_ctrl_c
from transformer.commands.model_options import add_model_arguments, model_from_args
from transformer.files.checkpoint import CheckpointError
from transformer.files.output_file import HTML, add_force_option, write_output
from transformer.files.run_dir import default_checkpoint
from transformer.files.trained_model import load_model
from transformer.tasks.dates import DateError
from transformer.training.snapshots import SnapshotError, snapshots_beside
from viz.attention_graph import KINDS, find_attention_module
from viz.explorer import next_word
from viz.explorer.build import (DEFAULT_PAGE, build_page_data, check_port, graph_module, page_out, page_title,
                                serve_explorer)
from viz.explorer.ladder_rungs import ladder_rungs
from viz.explorer.page import page_html
from viz.explorer.subject import InputError, subject_for
from viz.explorer.training_steps import snapshot_data
from viz.inputs import on_numpy_twins, source_ids

BAD_INPUT = (DateError, InputError, ValueError, OSError, CheckpointError, SnapshotError)


@console_script
@on_numpy_twins
def dates_main(argv=None) -> int:
    parser = Parser(prog="dates-explore", description="One attention step of the date model, "
                    "forward and backward, in one self-contained HTML page.")
    add_model_arguments(parser)
    parser.add_argument("--kind", choices=KINDS, default=None,
                        help="which attention the step's graph shows (default: when the checkpoint's run recorded "
                             "attention snapshots, the kind of the head that changed most over training, where the "
                             "heatmaps open; else decoder-self, the one kind a decoder-only model has)")
    parser.add_argument("--layer", type=int, default=None,
                        help="its layer, from 0 (default: that head's layer with snapshots, else 0)")
    add_page_options(parser, DEFAULT_PAGE)
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
        data = build_page_data(chosen.model, args.date, kind, layer, not args.no_check, view)
        page = Page(chosen.model, data, page_title(name, args.date, chosen.trained), kind, layer)
        return show(page, args, start, "a date, YYYY-MM-DD", snapshots,
                    "a training-step slider over them (↑ / ↓)",
                    graph_note=f"{name}, which holds the head that changed most over training"
                    if view and args.kind is None and args.layer is None else None)
    except BAD_INPUT as error:
        return bad_input(error)


@console_script
@on_numpy_twins
def next_word_main(argv=None) -> int:
    args = next_word_arguments(argv)
    try:
        check_port(args.port, args.serve)         # a taken port is said before minutes of training
        checkpoint = args.checkpoint or default_checkpoint(next_word.DEFAULT_RUN)
        trained = args.checkpoint is not None or os.path.exists(checkpoint)
        model = load_model(checkpoint, task="next-word") if trained else next_word.untrained_model(checkpoint)
        sentence = args.sentence if args.sentence is not None else next_word.default_sentence()
        subject = subject_for(model, sentence)
        if args.layer is not None:                    # a bad layer fails before the snapshots are read
            find_attention_module(model, "decoder-self", args.layer)
        if not args.serve:                            # before the ladder's rungs are trained for the page
            args.out = page_out(args.out, args.force, next_word.DEFAULT_PAGE)
        snapshots = snapshots_beside(checkpoint) if trained else None
        start = time.perf_counter()
        view = snapshot_data(model, snapshots) if snapshots else None
        _, layer = graph_module(model, None, args.layer, view, default=("decoder-self", model.config.num_layers - 1))
        name, _ = find_attention_module(model, "decoder-self", layer)
        rungs = None
        if args.ladder_steps:           # trained once, then kept beside the run
            run_folder = os.path.dirname(checkpoint) if trained else None
            rungs = (args.ladder_steps, ladder_rungs(args.ladder_steps, run_folder))
        data = build_page_data(model, subject, "decoder-self", layer, not args.no_check, view, rungs)
        page = Page(model, data, page_title(name, subject.text, trained), "decoder-self", layer, rungs)
        code = show(page, args, start, "a sentence of the language, e.g. " + next_word.default_sentence(),
                    snapshots, "every layer and head over the training steps (▶, ↑ / ↓)",
                    graph_note=reader_note(name, view) if view and args.layer is None else None)
    except BAD_INPUT as error:
        return bad_input(error)
    if trained and not snapshots and not args.serve:
        print(f"no attention snapshots beside {checkpoint}: train with --snapshot-every 10 to watch it learn")
    return code


def next_word_arguments(argv):
    parser = Parser(prog="next-word-explore", description="the next-word model in the explorer, "
                    "watched while it learned.")
    parser.add_argument("--checkpoint", metavar="PATH", type=path_argument,
                        help=f"a next-word checkpoint (default: the newest finished run's, "
                             f"{next_word.DEFAULT_RUN}/model.npz or {next_word.DEFAULT_RUN}-N/model.npz, else an "
                             "untrained model); its run's attention_snapshots.npz is shown when there")
    parser.add_argument("--sentence", default=None,
                        help="the words the step runs on (default: the recall probe asked about the second name)")
    parser.add_argument("--layer", type=int, default=None,
                        help="the layer of the step's graph (default: when the run recorded attention snapshots, "
                             "the layer of the recall circuit's reader (else of the head that changed most over "
                             "training), where the heatmaps open; "
                             "else the last)")
    parser.add_argument("--ladder-steps", type=int, default=next_word.LADDER_STEPS, metavar="N",
                        help="train each rung of the attention ladder N steps to show them on the sentence "
                             "(default: %(default)s; 0: no ladder)")
    add_page_options(parser, next_word.DEFAULT_PAGE)
    args = parser.parse_args(argv)
    if args.ladder_steps < 0:
        parser.error(f"--ladder-steps must be at least 0, got {args.ladder_steps}")
    return args


# ------------------------------------------------------------- what both commands share
def add_page_options(parser, default_page):
    parser.add_argument("--out", default=None, type=path_argument,
                        help=f"the HTML file to write (default: {default_page}; numbered -2, -3 ... when taken)")
    parser.add_argument("--no-check", action="store_true",
                        help="skip the finite-difference check of the gradients (its overlay is then off)")
    add_force_option(parser)
    parser.add_argument("--serve", action="store_true",
                        help="serve the page on 127.0.0.1 instead of writing it: type your own input, and the step, "
                             "its values and every head's weights are recomputed on the checkpoint (Ctrl-C stops)")
    parser.add_argument("--port", type=int, default=8642, help="the server's port with --serve (default: %(default)s; "
                        "0: any free port)")


class Page(NamedTuple):
    """What a command shows: the page's data and title, and the model and step the server reruns."""
    model: object
    data: dict
    title: str
    kind: str
    layer: int
    rungs: tuple = None


def show(page, args, start, placeholder, snapshots, snapshots_note, graph_note=None) -> int:
    """Serve the page (``--serve``, until Ctrl-C) or write it to ``args.out`` and say what was written."""
    if args.serve:
        with sigterm_as_ctrl_c():           # SIGTERM ends the server as Ctrl-C does: one line, exit 130
            return serve_explorer(page.model, page.data, page.title, page.kind, page.layer, args.port, placeholder,
                                  page.rungs)
    path = write_output(args.out, page_html(page.data, page.title), args.force, HTML)
    seconds = time.perf_counter() - start
    size = os.path.getsize(path) / 1e6
    print(f"wrote {path}  ({size:.1f} MB, built in {seconds:.1f} s after loading the model; "
          "open it in a browser, no server needed)")
    if snapshots:
        print(f"with the attention snapshots of {snapshots}: {snapshots_note}")
    if graph_note:
        print(f"the step's graph: {graph_note}")
    return 0


def reader_note(name, view) -> str:
    """What the next-word page's graph holds: the recall circuit's reader when the run formed one."""
    if view.get("circuit"):
        return f"{name}, which holds the recall circuit's reader"
    return f"{name}, which holds the head that changed most over training"


def bad_input(error) -> int:
    print(f"error: {error}", file=sys.stderr)
    return 2
