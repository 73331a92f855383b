"""The explorer's page and server built from a model: what ``dates-explore`` and
``next-word-explore`` (``transformer/commands/explore.py``) run, as functions."""
import errno
import os
import socket

from transformer.files.output_file import HTML, check_output, free_default, write_output
from transformer.training.snapshots import attention_modules

from ..attention_graph import find_attention_module
from ..inputs import UNTRAINED
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
    on ``model``; until Ctrl-C (or SIGTERM), which the command turns into one line and exit 130."""
    from .server import Explorer, serve
    data["live"] = {"endpoint": "/step", "placeholder": placeholder}
    explorer = Explorer(page_html(data, title), lambda text, check: step_data(model, text, kind, layer, check, rungs))
    serve(explorer, port, say=lambda line: print(line, flush=True))
    return 0


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
