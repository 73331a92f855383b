"""``next-word-explore``: the next-word model in the explorer, watched while it learned.

    next-word-train --snapshot-every 10                 # records attention while it trains
    next-word-explore                                   # -> runs/viz/next-word.html
    next-word-explore --serve                           # type your own sentence in the page

The page is ``dates-explore``'s (one file, no server, no network): one attention step of the
model on a sentence, forward and backward, and every layer and head at once, over the run's
recorded training steps (a play button, each kind's held-out accuracy and the loss as
curves) on probe sentences that tell circuits apart (the recall and swap sentences asked
both ways); it opens on the head whose weights changed most over training. Below, the
attention ladder's rungs on the same sentence.
"""
import os
import sys
import time

from transformer.commands.console import Parser, console_script, path_argument
from transformer.files.output_file import HTML, add_force_option, write_output

from ..inputs import UNTRAINED, on_numpy_twins
from .cli import add_serve_options, build_page_data, check_port, graph_module, page_out, page_title, serve_explorer
from .page import page_html
from .training_steps import snapshot_data

DEFAULT_RUN = os.path.join("runs", "next-word")
DEFAULT_PAGE = os.path.join("runs", "viz", "next-word.html")
LADDER_STEPS = 600          # Adam steps per rung trained for the page (attention-ladder trains 2,500)


def default_sentence() -> str:
    """The recall probe asked about the second name: the place stated first is the wrong answer,
    so a model that has learned a 'first place' shortcut gets it wrong and one that recalls does not."""
    from transformer.tasks import language
    recall = next(e for e in language.Language().evaluation_set(per_kind=1) if e.kind == "recall")
    *facts, asked = recall.combination
    return " ".join(language.make_example("recall", (*facts, 1 - asked)).context)


def parse_args(argv):
    parser = Parser(prog="next-word-explore", description=__doc__.split("\n")[0].split(": ", 1)[1])
    parser.add_argument("--checkpoint", metavar="PATH", type=path_argument,
                        help=f"a next-word checkpoint (default: the newest finished run's, {DEFAULT_RUN}/model.npz "
                             f"or {DEFAULT_RUN}-N/model.npz, else an untrained model); its run's "
                             "attention_snapshots.npz is shown when there")
    parser.add_argument("--sentence", default=None,
                        help="the words the step runs on (default: the recall probe asked about the second name)")
    parser.add_argument("--layer", type=int, default=None,
                        help="the layer of the step's graph (default: when the run recorded attention snapshots, "
                             "the layer of the head that changed most over training, where the heatmaps open; "
                             "else the last)")
    parser.add_argument("--ladder-steps", type=int, default=LADDER_STEPS, metavar="N",
                        help="train each rung of the attention ladder N steps to show them on the sentence "
                             "(default: %(default)s; 0: no ladder)")
    parser.add_argument("--out", default=None, type=path_argument,
                        help=f"the HTML file to write (default: {DEFAULT_PAGE}; numbered -2, -3 ... when taken)")
    parser.add_argument("--no-check", action="store_true",
                        help="skip the finite-difference check of the gradients (its overlay is then off)")
    add_force_option(parser)
    add_serve_options(parser)
    args = parser.parse_args(argv)
    if args.ladder_steps < 0:
        parser.error(f"--ladder-steps must be at least 0, got {args.ladder_steps}")
    return args


@console_script
@on_numpy_twins
def main(argv=None) -> int:
    from transformer.files.checkpoint import CheckpointError
    from transformer.files.run_dir import default_checkpoint
    from transformer.training.snapshots import SnapshotError, snapshots_beside
    from transformer.files.trained_model import load_model

    from ..attention_graph import find_attention_module
    from .ladder_rungs import ladder_rungs
    from .subject import InputError, subject_for

    args = parse_args(argv)
    try:
        check_port(args.port, args.serve)         # a taken port is said before minutes of training
        checkpoint = args.checkpoint or default_checkpoint(DEFAULT_RUN)
        trained = args.checkpoint is not None or os.path.exists(checkpoint)
        model = load_model(checkpoint, task="next-word") if trained else untrained_model(checkpoint)
        subject = subject_for(model, args.sentence if args.sentence is not None else default_sentence())
        if args.layer is not None:                    # a bad layer fails before the snapshots are read
            find_attention_module(model, "decoder-self", args.layer)
        if not args.serve:                            # before the ladder's rungs are trained for the page
            args.out = page_out(args.out, args.force, DEFAULT_PAGE)
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
        title = page_title(name, subject.text, trained)
        if args.serve:
            return serve_explorer(model, data, title, "decoder-self", layer, args.port,
                                  "a sentence of the language, e.g. " + default_sentence(), rungs)
        path = write_output(args.out, page_html(data, title), args.force, HTML)
        seconds = time.perf_counter() - start
    except (InputError, ValueError, OSError, CheckpointError, SnapshotError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    size = os.path.getsize(path) / 1e6
    print(f"wrote {path}  ({size:.1f} MB, built in {seconds:.1f} s after loading the model; "
          "open it in a browser, no server needed)")
    if snapshots:
        print(f"with the attention snapshots of {snapshots}: every layer and head over the training steps (▶, ↑ / ↓)")
        if args.layer is None:
            print(f"the step's graph: {name}, which holds the head that changed most over training")
    elif trained:
        print(f"no attention snapshots beside {checkpoint}: train with --snapshot-every 10 to watch it learn")
    return 0


def untrained_model(checkpoint):
    """A fresh next-word model of next-word-train's default shape, seed 0, said in one line, as
    ``dates-explore`` draws a fresh date model when there is no run yet."""
    import minigrad
    from transformer.models import build_model
    from transformer.training.next_word import default_model_config
    print(f"note: no checkpoint at {checkpoint}: drawing an {UNTRAINED} (fresh, seed 0); train one with "
          "next-word-train --snapshot-every 10, or pass --checkpoint PATH", file=sys.stderr)
    minigrad.manual_seed(0)
    return build_model(default_model_config()).eval()
