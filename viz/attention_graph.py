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
from dataclasses import dataclass

import numpy as np

from minigrad import Tensor, detect_anomaly
from minigrad.nn import record_scopes
from transformer.decoding import inference

from .graph import draw_graph
from .inputs import ATTENTION_KINDS, UNTRAINED, check_kind, is_decoder_only, reference_inputs

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


def as_leaves(call: AttentionCall) -> AttentionCall:
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
    call = as_leaves(capture_attention_call(model, module, inputs))
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
