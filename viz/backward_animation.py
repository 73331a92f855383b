"""The backward pass as an animation: one frame per op that backward processes.

    dates-backward-animation --expr "(a * b + a).tanh().sum()" --var a=0.5,-0.4 --var b=0.2,1.5
    dates-backward-animation --attention decoder-self --untrained --d-model 8 --heads 2

Backward is driven by ``minigrad.autograd_steps(root, retain_graph=True)``, the
same generator ``Tensor.backward()`` runs, so the frames show the engine's real
order. Each frame is ``draw_graph``'s picture of the whole graph with:

  the op being processed       red, bold; its output (the gradient coming in) red-bordered
  tensors it sends grads to    blue border, "+ ∇ just arrived"
  a tensor's gradient so far   "∇ [0.5, -2]" (or "∇ ‖·‖ 1.23" when big), first values in the tooltip
  a tensor used twice          once a second gradient arrives: "∇ = g1 + g2", orange fill
  not reached yet              "∇ not yet" in grey (keeps every box the same size)

Outputs (``write_animation``): an animated GIF and a self-contained HTML page
with a step slider over the inline SVG frames (no server, no network, no
external script); hover a box in the HTML for its tooltip.
"""
import argparse
import html
import io
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field

import numpy as np

from minigrad import Tensor, autograd_steps

from .details import first_values, norm, tooltip_text
from .graph import INSTALL_HINT, draw_graph
from .graph_text import escape, number, shape_text

SHOWN_VALUES = 4            # a gradient with at most this many values shows them; a bigger one its norm
MAX_FRAMES = 200            # one dot run per frame: beyond this, animate a smaller graph
FRAME_MS, LAST_FRAME_MS = 1200, 3000
CURRENT_OP = dict(fillcolor="#ff8787", color="#c92a2a", penwidth="3")
GRAD_IN = dict(color="#c92a2a", penwidth="3")
GRAD_OUT = dict(color="#1c7ed6", penwidth="3")
ACCUMULATED = dict(fillcolor="#ffd8a8")


@dataclass
class Arrivals:
    """The gradients that reached one tensor so far (one per use of the tensor)."""
    parts: list = field(default_factory=list)

    @property
    def total(self) -> np.ndarray:
        return sum(self.parts[1:], self.parts[0].copy())


@dataclass
class BackwardFrame:
    """One op processed by backward: its picture and the gradients that existed after it."""
    number: int                 # 1-based
    op_name: str
    output: Tensor              # the op's output tensor (its gradient is what flows in)
    fn: object                  # its grad_fn
    digraph: object             # graphviz.Digraph of this frame
    sent_to: list               # the inputs this op sent a gradient to
    grads: dict                 # id(tensor) -> gradient array summed so far
    caption: str = ""

    def grad_of(self, tensor):
        """The gradient ``tensor`` had received by the end of this step (None: not yet)."""
        return self.grads.get(id(tensor))


# ------------------------------------------------------------------- frames
def backward_frames(root, grad=None, params=None, cluster_modules=False, mask_kind=None, rankdir="TB",
                    title=None, max_frames=MAX_FRAMES) -> list:
    """Run ``root``'s backward pass and return one ``BackwardFrame`` per op, in the engine's order.

    This is a real backward (``retain_graph=True``): leaves accumulate ``.grad``
    as with ``root.backward(grad, retain_graph=True)``. Arguments after ``grad``
    are ``draw_graph``'s. Raises ValueError beyond ``max_frames`` ops.
    """
    arrivals = {}                      # id(tensor) -> Arrivals
    frames = []
    for step in autograd_steps(root, grad=grad, retain_graph=True):
        if len(frames) == max_frames:
            raise ValueError(f"backward visits more than {max_frames} ops: too many frames to animate; "
                             "animate a smaller expression (or one attention step)")
        if id(step.tensor) not in arrivals:       # the root: its gradient is the seed of backward
            arrivals[id(step.tensor)] = Arrivals([np.asarray(step.grad, dtype=np.float64)])
        sent = []
        for inp, input_grad in zip(step.fn.inputs, step.input_grads):
            if input_grad is not None:
                arrivals.setdefault(id(inp), Arrivals()).parts.append(np.asarray(input_grad, dtype=np.float64))
                sent.append(inp)
        number_ = len(frames) + 1
        decorate_tensor = _tensor_decorator(arrivals, step.tensor, sent)
        decorate_op = lambda fn, current=step.fn: CURRENT_OP if fn is current else None  # noqa: E731
        # drawn now, during the step: the op's saved arrays (a mask, say) are read here
        digraph = draw_graph(root, params=params, cluster_modules=cluster_modules, mask_kind=mask_kind,
                             rankdir=rankdir, legend=False, decorate_tensor=decorate_tensor,
                             decorate_op=decorate_op)
        grads = {key: a.total for key, a in arrivals.items()}
        frames.append(BackwardFrame(number_, step.fn.name, step.tensor, step.fn, digraph, sent, grads))
    for frame in frames:               # the captions name the total, known only now
        frame.caption = _caption(frame, len(frames))
        frame.digraph.attr(label=(title + "\\n" if title else "") + frame.caption, labelloc="t", fontsize="14")
    return frames


def _caption(frame, count) -> str:
    names = ", ".join(_name(t) for t in frame.sent_to) or "no input that needs a gradient"
    return f"backward step {frame.number}/{count}: {frame.op_name} takes ∇ of {_name(frame.output)}, sends ∇ to {names}"


def _name(tensor) -> str:
    if tensor.name:
        return tensor.name
    return f"{tensor.grad_fn.name}'s output" if tensor.grad_fn is not None else f"{shape_text(tensor.shape)} leaf"


def _short(gradient) -> str:
    """A few values for a tiny gradient ("[0.5, -2]"), the norm ("‖·‖ 3.1") for a bigger one."""
    if gradient.size <= SHOWN_VALUES:
        return "[" + ", ".join(number(v) for v in gradient.reshape(-1)) + "]"
    return f"‖·‖ {number(norm(gradient))}"


def _tensor_decorator(arrivals, current_output, sent):
    """decorate_tensor for one frame: the gradient row, tooltip and border of every tensor."""
    sent_ids = {id(t) for t in sent}
    counts = {key: len(a.parts) for key, a in arrivals.items()}
    totals = {key: a.total for key, a in arrivals.items()}    # snapshot: later steps add more

    def decorate(tensor):
        key = id(tensor)
        if not tensor.requires_grad:
            return None
        style = {}
        if tensor is current_output:
            style.update(GRAD_IN)
        elif key in sent_ids:
            style.update(GRAD_OUT)
        if key not in totals:
            return dict(style, rows=['<FONT COLOR="#adb5bd">∇ not yet</FONT>'])
        total, uses = totals[key], counts[key]
        text = "∇ " + _short(total)
        if uses > 1:
            text = "∇ = " + " + ".join(f"g{i + 1}" for i in range(uses)) + " = " + _short(total)
            style.update(ACCUMULATED)
        if key in sent_ids:
            text += "  ← just added" if uses > 1 else "  ← just arrived"
        tip = [_name(tensor), f"gradient so far ({uses} arrival{'s' * (uses > 1)}): {first_values(total)}",
               f"‖∇‖ {number(norm(total))}, shape {shape_text(total.shape)}",
               f"value {first_values(tensor.data)}"]
        row = f'<FONT COLOR="#c92a2a">{escape(text, limit=80)}</FONT>'
        return dict(style, rows=[row], tooltip=tooltip_text("\n".join(tip)))

    return decorate


# ------------------------------------------------------------------ output
def write_animation(frames, out_stem, formats=("gif", "html"), dpi=72, frame_ms=FRAME_MS) -> list:
    """Render every frame with dot once (SVG and PNG together) and write ``<out_stem>.gif``/``.html``.

    Returns the paths written. Raises RuntimeError (with how to install it) without Graphviz's ``dot``.
    """
    if not frames:
        raise ValueError("no frames: backward processed no op (is the root a leaf?)")
    unknown = set(formats) - {"gif", "html"}
    if unknown:
        raise ValueError(f"unknown format(s) {', '.join(sorted(unknown))}; choose gif and/or html")
    if shutil.which("dot") is None:
        raise RuntimeError(f"Graphviz's `dot` program is not on PATH; {INSTALL_HINT}")
    out_stem = os.fspath(out_stem)
    if os.path.dirname(out_stem):
        os.makedirs(os.path.dirname(out_stem), exist_ok=True)
    svgs, pngs = _render_all(frames, dpi, want_png="gif" in formats)
    written = []
    if "gif" in formats:
        written.append(write_gif(pngs, out_stem + ".gif", frame_ms))
    if "html" in formats:
        written.append(write_html(svgs, [f.caption for f in frames], out_stem + ".html", frame_ms))
    return written


def _render_all(frames, dpi, want_png):
    svgs, pngs = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for frame in frames:
            frame.digraph.attr(dpi=str(dpi))
            svg_path, png_path = os.path.join(tmp, "frame.svg"), os.path.join(tmp, "frame.png")
            command = ["dot", "-Tsvg", "-o", svg_path] + (["-Tpng", "-o", png_path] if want_png else [])
            done = subprocess.run(command, input=frame.digraph.source.encode("utf-8"), capture_output=True)
            if done.returncode != 0:
                raise RuntimeError(f"dot failed on frame {frame.number} (a bug in viz: please report it): "
                                   f"{done.stderr.decode(errors='replace').strip()}")
            with open(svg_path, encoding="utf-8") as f:
                svgs.append(f.read())
            if want_png:
                with open(png_path, "rb") as f:
                    pngs.append(f.read())
    return svgs, pngs


def write_gif(pngs, path, frame_ms=FRAME_MS) -> str:
    """PNG frames -> one looping GIF; frames of different sizes are padded (white) to the largest."""
    from PIL import Image

    images = [Image.open(io.BytesIO(data)).convert("RGB") for data in pngs]
    width, height = max(i.width for i in images), max(i.height for i in images)
    padded = []
    for image in images:
        canvas = Image.new("RGB", (width, height), "white")
        canvas.paste(image, ((width - image.width) // 2, 0))
        padded.append(canvas.quantize(colors=128, method=Image.Quantize.MEDIANCUT))
    durations = [frame_ms] * (len(padded) - 1) + [LAST_FRAME_MS]
    padded[0].save(path, save_all=True, append_images=padded[1:], duration=durations, loop=0,
                   optimize=False, disposal=1)
    return path


HTML_PAGE = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>{title}</title>
<style>
body {{ font-family: Helvetica, Arial, sans-serif; margin: 1em; }}
.frame {{ display: none; }} .frame.shown {{ display: block; }}
#caption {{ font-size: 15px; margin: 0.5em 0; min-height: 2.5em; }}
input[type=range] {{ width: 60%; vertical-align: middle; }}
</style></head><body>
<h2>{title}</h2>
<div><button id="prev">&#9664;</button> <input type="range" id="step" min="1" max="{count}" value="1">
<button id="next">&#9654;</button> <button id="play">play</button> <span id="number"></span></div>
<div id="caption"></div>
{frames}
<script>
var captions = {captions};
var slider = document.getElementById("step"), timer = null;
function show(n) {{
  n = Math.max(1, Math.min(captions.length, n));
  slider.value = n;
  document.querySelectorAll(".frame").forEach(function (f, i) {{ f.className = i + 1 == n ? "frame shown" : "frame"; }});
  document.getElementById("caption").textContent = captions[n - 1];
  document.getElementById("number").textContent = n + " / " + captions.length;
}}
slider.oninput = function () {{ show(+slider.value); }};
document.getElementById("prev").onclick = function () {{ show(+slider.value - 1); }};
document.getElementById("next").onclick = function () {{ show(+slider.value + 1); }};
document.getElementById("play").onclick = function () {{
  if (timer) {{ clearInterval(timer); timer = null; this.textContent = "play"; return; }}
  this.textContent = "pause";
  if (+slider.value == captions.length) show(1);
  timer = setInterval(function () {{ show(+slider.value + 1); }}, {frame_ms});
}};
show(1);
</script></body></html>
"""


def write_html(svgs, captions, path, frame_ms=FRAME_MS, title="The backward pass, one op at a time") -> str:
    """One page: every SVG frame inline (ids made unique per frame), a slider, prev/next/play."""
    import json

    blocks = [f'<div class="frame" id="frame{i + 1}">{_inline_svg(svg, f"f{i + 1}_")}</div>'
              for i, svg in enumerate(svgs)]
    page = HTML_PAGE.format(title=html.escape(title), count=len(svgs), frames="\n".join(blocks),
                            captions=json.dumps(captions).replace("</", "<\\/"), frame_ms=frame_ms)
    with open(path, "w", encoding="utf-8") as f:
        f.write(page)
    return path


def _inline_svg(svg: str, prefix: str) -> str:
    """dot's SVG file -> an element for inline use: no XML prologue/doctype, ids prefixed."""
    svg = svg[svg.index("<svg"):]
    return re.sub(r'\bid="', f'id="{prefix}', svg)


# --------------------------------------------------------------------- inputs
DEFAULT_EXPR = "(a * b + a).tanh().sum()"
DEFAULT_VARS = ("a=0.5,-0.4", "b=0.2,1.5")


def parse_var(text: str):
    """'a=1,2,3' -> ('a', float64 array). ValueError says what was wrong."""
    name, sep, values = text.partition("=")
    name = name.strip()
    if not sep or not name.isidentifier():
        raise ValueError(f"--var must look like NAME=1,2,3, got {text!r}")
    try:
        array = np.array([float(v) for v in values.split(",")], dtype=np.float64)
    except ValueError:
        raise ValueError(f"--var {name}: values must be numbers separated by commas, got {values!r}") from None
    return name, array


def expression_root(expr: str, variables: dict) -> Tensor:
    """Evaluate ``expr`` (Python syntax, Tensor methods) over leaves named after ``variables``.

    A result with more than one element is summed ("loss = sum(...)"), as backward needs a scalar.
    Not a sandbox: it is your own expression, evaluated without builtins.
    """
    leaves = {name: Tensor(values, requires_grad=True).named(name) for name, values in variables.items()}
    try:
        result = eval(compile(expr, "--expr", "eval"), {"__builtins__": {}}, dict(leaves))
    except SyntaxError as error:
        raise ValueError(f"--expr is not a valid expression ({error.msg}): {expr!r}") from None
    except NameError as error:
        raise ValueError(f"--expr uses {error.name!r}, which is not defined; add --var {error.name}=1,2 "
                         f"(defined: {', '.join(leaves) or 'none'})") from None
    except Exception as error:     # noqa: BLE001 - any failure of the user's expression is one line
        raise ValueError(f"--expr failed: {type(error).__name__}: {error}") from None
    if not isinstance(result, Tensor) or not result.requires_grad:
        raise ValueError(f"--expr must compute a Tensor from the variables, got {type(result).__name__}")
    if result.size != 1:
        result = result.sum().named("loss = sum(...)")
    elif not result.name:
        result.named("loss")
    return result


def attention_root(model, date, kind, layer, untrained):
    """(loss = sum(output) of one attention step, draw_graph options, title) for the animation."""
    from .attention_graph import MASK_KINDS, build_attention_graph
    _, output = build_attention_graph(model, date, kind, layer, backward=False, untrained=untrained)
    root = output.sum().named("loss = sum(output)")
    title = f"one {kind} attention step on {date}" + (" (untrained model)" if untrained else "")
    return root, dict(params=model, cluster_modules=True, mask_kind=MASK_KINDS[kind]), title


# ------------------------------------------------------------------------ CLI
def main(argv=None) -> int:
    from transformer.checkpoint import CheckpointError
    from transformer.dates import DateError

    from .attention_graph import KINDS
    from .inputs import add_model_arguments, model_from_args, source_ids

    parser = argparse.ArgumentParser(prog="dates-backward-animation", description=__doc__.split("\n")[0])
    parser.add_argument("--expr", default=None,
                        help=f"an expression over --var leaves, Tensor methods allowed (default: {DEFAULT_EXPR})")
    parser.add_argument("--var", action="append", metavar="NAME=1,2",
                        help=f"a leaf and its values, repeatable (default: {' '.join(DEFAULT_VARS)})")
    parser.add_argument("--attention", choices=KINDS, help="animate one attention step of the date model instead")
    parser.add_argument("--layer", type=int, default=0, help="with --attention: layer index (default: 0)")
    add_model_arguments(parser)
    parser.add_argument("--out", default=os.path.join("runs", "viz", "backward_animation"),
                        help="output path without extension (default: %(default)s)")
    parser.add_argument("--format", action="append", choices=["gif", "html"], help="default: both")
    parser.add_argument("--rankdir", choices=["TB", "LR"], default="TB")
    parser.add_argument("--dpi", type=int, default=72, help="resolution of the GIF frames (default: 72)")
    args = parser.parse_args(argv)
    try:
        if args.attention and (args.expr or args.var):
            raise ValueError("give either --attention or --expr/--var, not both")
        if not 20 <= args.dpi <= 300:
            raise ValueError(f"--dpi must be between 20 and 300, got {args.dpi}")
        if args.attention:
            source_ids(args.date)          # a bad date fails before a model is built
            chosen = model_from_args(args)
            root, options, title = attention_root(chosen.model, args.date, args.attention, args.layer,
                                                  not chosen.trained)
        else:
            variables = dict(parse_var(v) for v in (args.var or DEFAULT_VARS))
            expr = args.expr or DEFAULT_EXPR
            root, options, title = expression_root(expr, variables), {}, expr
        frames = backward_frames(root, rankdir=args.rankdir, title=title, **options)
        paths = write_animation(frames, args.out, formats=tuple(args.format or ("gif", "html")), dpi=args.dpi)
    except (DateError, ValueError, OSError, CheckpointError, RuntimeError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(f"wrote {', '.join(paths)}  ({len(frames)} frames, one per op backward processed)")
    return 0
