"""The computation graph of ONE attention step of the date model, drawn with graphviz.

    python examples/attention_graph.py --date 1845-01-05 --kind cross --layer 1 --backward

The model runs once on the date (teacher-forced on the correct answer) while
the chosen attention module's arguments are captured; that module is then
called again on copies of those arguments inside ``record_scopes(model)``, so
the drawing holds only its tens of nodes, clustered by sub-module:

    x -> w_qkv (Linear; cross-attention: w_q on x, w_kv on memory) -> split into Q, K, V
      (GetItem) -> split heads (Reshape, Transpose) -> Q, K, V
      -> Q Kᵀ (Transpose, MatMul) -> ÷ √d_k (Div) -> mask (MaskedFill) -> Softmax
      -> weights @ V (MatMul) -> heads concatenated (Transpose, Reshape) -> w_o (Linear)

``--backward`` also runs ``output.sum().backward(retain_graph=True)`` with every
intermediate retaining its gradient, and shows each gradient's shape and norm.
"""
import contextlib
import inspect
import os
import sys
import time
from dataclasses import dataclass

import numpy as np

from minigrad import Tensor, detect_anomaly
from minigrad.nn import record_scopes
from transformer.files.checkpoint import CheckpointError
from transformer.commands.console import Parser, console_script, path_argument
from transformer.tasks.dates import DateError
from transformer.decoding import inference
from transformer.files.output_file import add_force_option, check_outputs, free_default

from .graph import draw_graph
from .render import EXIT_CODES_HELP, EXIT_DOT_MISSING, render
from .inputs import (ATTENTION_KINDS, UNTRAINED, add_model_arguments, attention_kinds, check_kind, is_decoder_only,
                     model_from_args, on_numpy_twins, reference_inputs, source_ids)

KINDS = ATTENTION_KINDS
# how the model builds each kind's mask (transformer/models/attention.py); True = may attend
MASK_KINDS = {"encoder-self": "padding", "decoder-self": "causal + padding", "cross": "padding"}


def mask_kind(model, kind: str) -> str:
    """The mask ``kind`` gets in ``model``: a decoder-only model's is causal only (its padding
    comes after every real token, where the causal mask hides it already)."""
    return "causal" if is_decoder_only(model) else MASK_KINDS[kind]


def attention_module_name(kind: str, layer: int) -> str:
    """The dotted name of the attention module, e.g. 'decoder.layers.1.cross_attn'."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}")
    side = "encoder" if kind == "encoder-self" else "decoder"
    return f"{side}.layers.{layer}.{'cross_attn' if kind == 'cross' else 'self_attn'}"


def find_attention_module(model, kind: str, layer: int):
    check_kind(model, kind)
    name = attention_module_name(kind, layer)
    count = len(model.encoder.layers if kind == "encoder-self" else model.decoder.layers)
    if not 0 <= layer < count:
        raise ValueError(f"layer {layer} does not exist: the model's {name.split('.')[0]} has layers 0..{count - 1}")
    return name, dict(model.named_modules())[name]


@dataclass
class AttentionCall:
    """The arguments one SelfAttention (x, mask) or CrossAttention (x, memory, mask) received
    during a forward pass; ``memory`` is None for self-attention."""
    x: Tensor
    memory: Tensor
    mask: np.ndarray

    def run(self, module):
        """Call ``module`` again with these arguments (no cache)."""
        if self.memory is None:
            return module(self.x, self.mask)
        return module(self.x, self.memory, self.mask)


def capture_attention_call(model, module, inputs: tuple) -> AttentionCall:
    """Run the model once on ``inputs`` (eval, no grad) and record what ``module`` was called with."""
    calls = []
    original_forward = module.forward
    signature = inspect.signature(original_forward)

    def recording_forward(*args, **kwargs):
        arguments = signature.bind(*args, **kwargs).arguments
        calls.append(AttentionCall(arguments["x"], arguments.get("memory"), arguments.get("mask")))
        return original_forward(*args, **kwargs)

    module.forward = recording_forward          # an instance attribute shadows the method
    try:
        with inference(model):
            model(*inputs)
    finally:
        del module.forward
    return calls[0]


def _as_leaves(call: AttentionCall) -> AttentionCall:
    """Fresh leaf tensors (requiring grad) for the captured inputs."""
    if call.memory is None:
        return AttentionCall(Tensor(call.x.data, requires_grad=True, name="x (query = key = value)"), None, call.mask)
    return AttentionCall(Tensor(call.x.data, requires_grad=True, name="x (query)"),
                         Tensor(call.memory.data, requires_grad=True, name="memory (encoder output)"), call.mask)


def build_attention_graph(model, date="1845-01-05", kind="encoder-self", layer=0, backward=False,
                          cluster_modules=True, rankdir="TB", untrained=False, max_depth=None, output_of=None):
    """(graphviz.Digraph, output Tensor) for one attention step of ``model`` on ``date``.

    The mask enters MaskedFill as a node labelled with its kind (padding, or
    causal + padding for decoder self-attention) and its True/False pattern.
    ``max_depth`` draws only that many ops back from the output, ``output_of`` (a
    tensor's name, e.g. "weights") draws the graph up to that tensor instead: a
    readable thumbnail.
    """
    name, output = run_attention_step(model, date, kind, layer)
    root = output
    saved_grads = [(p, p.grad) for p in model.parameters()]
    if backward:
        root = _backward_through(output)
    if output_of is not None:
        root = find_named_tensor(root, output_of)
    graph = draw_graph(root, params=model, show_grad=backward, cluster_modules=cluster_modules, rankdir=rankdir,
                       mask_kind=mask_kind(model, kind), max_depth=max_depth, legend=output_of is None)
    for p, grad in saved_grads:     # leave the model's .grad as it was (it may be mid-training)
        p.grad = grad
    notes = ["with gradients of sum(output)"] * backward + [UNTRAINED] * untrained
    title = f"one attention step: {name} on {date}" + ("\\n(" + ", ".join(notes) + ")" if notes else "")
    graph.attr(label=title, labelloc="t", fontsize="14")        # two lines keep the title narrow
    return graph, root


def run_attention_step(model, date="1845-01-05", kind="encoder-self", layer=0, record_sources=False, inputs=None):
    """(module name, output Tensor): one attention module of ``model`` run again, op by op (not
    fused), on what it received for ``date`` (or for the model's ``inputs``, e.g. a sentence),
    inside ``record_scopes(model)``; its inputs are fresh leaves that require grad.
    ``record_sources`` records where each op was created (``fn.created_at``, file:line, as
    ``detect_anomaly()`` does)."""
    name, module = find_attention_module(model, kind, layer)
    inputs = reference_inputs(model, date) if inputs is None else inputs
    call = _as_leaves(capture_attention_call(model, module, inputs))
    was_training, was_fused = model.training, module.fused
    model.eval()
    module.fused = False  # draw every stage, not the one fused op
    try:
        with record_scopes(model), (detect_anomaly() if record_sources else contextlib.nullcontext()):
            output = call.run(module).named(f"{name} output")
    finally:
        model.train(was_training)
        module.fused = was_fused
    return name, output


def find_named_tensor(output: Tensor, name: str) -> Tensor:
    """The tensor called ``name`` in the graph that produced ``output`` (ValueError names the choices)."""
    stack, seen, names = [output], set(), []
    while stack:
        tensor = stack.pop()
        if id(tensor) in seen:
            continue
        seen.add(id(tensor))
        if tensor.name == name:
            return tensor
        if tensor.name:
            names.append(tensor.name)
        stack.extend(tensor.grad_fn.inputs if tensor.grad_fn is not None else ())
    raise ValueError(f"no tensor named {name!r} in this attention step; named tensors: {', '.join(sorted(names))}")


def _backward_through(output: Tensor) -> Tensor:
    """loss = sum(output); backward keeping the graph and every intermediate's gradient."""
    stack, seen = [output], set()
    while stack:
        tensor = stack.pop()
        if id(tensor) in seen or tensor.grad_fn is None:
            continue
        seen.add(id(tensor))
        tensor.retain_grad()
        stack.extend(tensor.grad_fn.inputs)
    loss = output.sum().named("loss = sum(output)").retain_grad()
    loss.backward(retain_graph=True)
    return loss


def default_out(date, kind, layer) -> str:
    """The default output stem, named after the step drawn (as the backward animation's is), so that
    another date, kind or layer does not meet the previous picture: runs/viz/attention_step_1845-01-05_cross_layer1."""
    return os.path.join("runs", "viz", f"attention_step_{date}_{kind}_layer{layer}")


@console_script
@on_numpy_twins
def main(argv=None) -> int:
    parser = Parser(prog="dates-attention-graph", description=__doc__.split("\n")[0], epilog=EXIT_CODES_HELP)
    add_model_arguments(parser)
    parser.add_argument("--kind", choices=KINDS, default=None,
                        help="which attention (default: encoder-self; a decoder-only model's only kind is decoder-self)")
    parser.add_argument("--layer", type=int, default=0, help="layer index, from 0 (default: %(default)s)")
    parser.add_argument("--backward", action="store_true", help="also show the gradients of sum(output)")
    parser.add_argument("--out", type=path_argument, default=None,
                        help="output path without extension (default: named after the step drawn, e.g. "
                             f"{default_out('1845-01-05', 'decoder-self', 0)}; numbered -2, -3 ... when taken)")
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
        find_attention_module(chosen.model, kind, args.layer)      # what is asked is checked before where it goes
        extensions = tuple(f".{fmt}" for fmt in formats + ("dot",))
        out = args.out or free_default(default_out(args.date, kind, args.layer), extensions, args.force)
        check_outputs([out + extension for extension in extensions], args.force)
        for note in notes:
            print(note, file=sys.stderr)
        start = time.perf_counter()
        graph, _ = build_attention_graph(chosen.model, args.date, kind, args.layer, args.backward,
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
