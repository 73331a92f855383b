"""The backward pass as an animation: one frame per op that backward processes.

    dates-backward-animation --expr "(a * b + a).tanh().sum()" --var a=0.5,-0.4 --var b=0.2,1.5
    dates-backward-animation --attention decoder-self --untrained --d-model 8 --heads 2

Backward is driven by ``minigrad.autograd_steps(root, retain_graph=True)``, the
same generator ``Tensor.backward()`` runs, so the frames show the engine's real
order. Each frame is ``draw_graph``'s picture of the whole graph with:

  the op being processed       red, bold; its output (the gradient coming in) red-bordered
  tensors it sends grads to    blue border, "← just arrived" (or "← just added")
  a tensor's gradient so far   "∇ [0.5, -2]" (or "∇ ‖·‖ 1.23" when big), first values in the tooltip
  a tensor used twice          once a second gradient arrives: "∇ = g1 + g2", orange fill
  not reached yet              "∇ not yet" in grey (keeps every box the same size)

Outputs (``write_animation``, in ``animation_output.py``): an animated GIF and
a self-contained HTML page with a step slider over the inline SVG frames (no
server, no network, no external script); hover a box in the HTML for its tooltip.
"""
from dataclasses import dataclass, field

import numpy as np

from minigrad import Tensor, autograd_steps

from .details import NOT_ARRIVED, first_values, norm, tooltip_text
from .graph import draw_graph
from .graph_text import escape, number, shape_text

SHOWN_VALUES = 4            # a gradient with at most this many values shows them; a bigger one its norm
MAX_FRAMES = 200            # one dot run per frame: beyond this, animate a smaller graph
CURRENT_OP = dict(fillcolor="#ff8787", color="#c92a2a", penwidth="3")
GRAD_IN = dict(color="#c92a2a", penwidth="3")
GRAD_OUT = dict(color="#1c7ed6", penwidth="3")
ACCUMULATED = dict(fillcolor="#ffd8a8")


@dataclass
class Arrivals:
    """The gradients that reached one tensor so far (one per use of the tensor)."""
    parts: list = field(default_factory=list)
    hooked: np.ndarray = None       # what the tensor's hooks replaced the sum with, if they did

    @property
    def total(self) -> np.ndarray:
        if self.hooked is not None:
            return self.hooked
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
    A gradient a hook replaces is shown replaced ("after hook") from its
    tensor's own step on; a leaf's hooks run after the last frame.
    """
    arrivals = {}                      # id(tensor) -> Arrivals
    frames = []
    for step in autograd_steps(root, grad=grad, retain_graph=True):
        if len(frames) == max_frames:
            raise ValueError(f"backward visits more than {max_frames} ops: too many frames to animate; "
                             "animate a smaller expression (or one attention step)")
        if id(step.tensor) not in arrivals:       # the root: its gradient is the seed of backward
            arrivals[id(step.tensor)] = Arrivals([np.asarray(step.grad, dtype=np.float64)])
        elif not np.allclose(arrivals[id(step.tensor)].total, step.grad, equal_nan=True):   # a hook replaced it
            arrivals[id(step.tensor)].hooked = np.asarray(step.grad, dtype=np.float64)
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
    hooked = {key for key, a in arrivals.items() if a.hooked is not None}
    totals = {key: a.total for key, a in arrivals.items()}

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
            tip = [_name(tensor), f"shape {shape_text(tensor.shape)}, dtype {tensor.dtype}", NOT_ARRIVED,
                   f"value {first_values(tensor.data)}"]
            return dict(style, rows=['<FONT COLOR="#adb5bd">∇ not yet</FONT>'], tooltip=tooltip_text("\n".join(tip)))
        total, uses = totals[key], counts[key]
        after_hook = " after hook" if key in hooked else ""
        text = f"∇{after_hook} {_short(total)}"
        if uses > 1:
            summed = " + ".join(f"g{i + 1}" for i in range(uses))
            text = f"∇ = {summed}{after_hook} = {_short(total)}"
            style.update(ACCUMULATED)
        if key in sent_ids:
            text += "  ← just added" if uses > 1 else "  ← just arrived"
        tip = [_name(tensor), f"gradient so far ({uses} arrival{'s' * (uses > 1)}): {first_values(total)}",
               f"‖∇‖ {number(norm(total))}, shape {shape_text(total.shape)}",
               f"value {first_values(tensor.data)}"]
        row = f'<FONT COLOR="#c92a2a">{escape(text, limit=80)}</FONT>'
        return dict(style, rows=[row], tooltip=tooltip_text("\n".join(tip)))

    return decorate


# --------------------------------------------------------------------- inputs
DEFAULT_DATE = "1845-01-05"
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
