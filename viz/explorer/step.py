"""One attention step, forward and backward, as plain data for the page.

``explore_step`` runs one attention module of the model on one date (op by op,
as ``dates-attention-graph`` draws it, with every op's source line recorded),
then drives ``minigrad.autograd_steps`` on ``loss = sum(output)``, the
generator ``backward()`` itself runs, and writes down what each step did.
What it returns holds the live tensors (so tests and the gradient check can
look at them); ``StepRecord.to_json`` turns it into what the page reads.
"""
import base64
import inspect
import linecache
import os
from dataclasses import dataclass, field

import numpy as np

from minigrad import autograd_steps, detect_anomaly

from ..attention_graph import mask_kind as attention_mask_kind
from ..attention_graph import run_attention_step
from ..details import mask_kind, mask_of, mask_pattern, value_lines
from ..graph import collect_graph, tensor_kind, parameter_names

# Where a source line is shown relative to: the repository's root (transformer/..., minigrad/...).
_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))) + os.sep
SAVED_VALUES_LIMIT = 4096      # a saved array with more values than this shows its statistics only


@dataclass
class StepRecord:
    """One attention step: its tensors and ops in graph order, and the backward pass op by op."""
    module_name: str
    kind: str
    layer: int
    loss: object                                    # the root Tensor, loss = sum(output)
    tensors: list                                   # Tensors, output first (draw_graph's order)
    ops: list                                       # (output Tensor, grad_fn) pairs
    names: dict                                     # id(parameter) -> dotted name
    steps: list = field(default_factory=list)       # per backward step: (op index, [input tensor indices])
    arrivals: dict = field(default_factory=dict)    # tensor index -> [(step number, gradient part)]
    saved: dict = field(default_factory=dict)       # op index -> [(attribute, array)] read during its step
    totals: dict = field(default_factory=dict)      # tensor index -> the gradient it ended with
    mask_kind: str = ""                             # the attention mask's kind: "causal + padding", ...

    def index(self, tensor) -> int:
        return self._positions[id(tensor)]

    def tensor_named(self, name):
        """The tensor with this name (``Q``, ``scores``, a parameter's dotted name)."""
        for tensor in self.tensors:
            if self.name_of(tensor) == name:
                return tensor
        raise KeyError(f"no tensor named {name!r} in this step")

    def name_of(self, tensor) -> str:
        return self.names.get(id(tensor)) or tensor.name or ""

    def __post_init__(self):
        self._positions = {id(t): i for i, t in enumerate(self.tensors)}

    # ----------------------------------------------------------------- json
    def to_json(self) -> dict:
        op_of = {id(fn): i for i, (_, fn) in enumerate(self.ops)}
        tensors = [self._tensor_json(i, t, op_of) for i, t in enumerate(self.tensors)]
        ops = [self._op_json(i, out, fn) for i, (out, fn) in enumerate(self.ops)]
        steps = [{"op": op, "sent": sent} for op, sent in self.steps]
        return {"module": self.module_name, "kind": self.kind, "layer": self.layer,
                "tensors": tensors, "ops": ops, "steps": steps}

    def _tensor_json(self, i, tensor, op_of):
        arrivals = self.arrivals.get(i, [])
        record = {"id": i, "name": self.name_of(tensor), "kind": tensor_kind(tensor, self.loss),
                  "shape": list(tensor.shape), "dtype": str(tensor.dtype), "value": encode(tensor.data),
                  "op": op_of.get(id(tensor.grad_fn)), "requires_grad": tensor.requires_grad,
                  "arrivals": [step for step, _ in arrivals],
                  "hover": value_lines(tensor, self.name_of(tensor) or None)}   # the SVG tooltips' lines
        if arrivals:
            record["grad"] = encode(self.totals[i])
            if len(arrivals) > 1:               # the parts, to show g1 + g2 before the sum is complete
                record["parts"] = [encode(part.astype(tensor.dtype)) for _, part in arrivals]
        return record

    def _op_json(self, i, out, fn):
        site = getattr(fn, "created_at", None)
        record = {"id": i, "name": fn.name, "inputs": [self.index(t) for t in fn.inputs],
                  "output": self.index(out), "scope": fn.scope, "source": _relative(site),
                  "defined_at": _defined_at(type(fn)),
                  "code": _code_at(site), "saved": [_saved_json(a, v, fn, out) for a, v in self.saved.get(i, [])]}
        found = mask_of(fn)
        if found is not None:
            attribute, array = found
            filled = attribute == "mask"            # MaskedFill keeps where it fills: the attention mask's ~
            allowed = ~mask_pattern(array) if filled else mask_pattern(array)
            record["mask"] = {"attribute": attribute, "shape": list(array.shape),
                              "kind": self.mask_kind if filled else mask_kind(array),
                              "may_attend": allowed.astype(int).tolist(), "inverted": filled}
        return record


def encode(array: np.ndarray) -> dict:
    """An array as base64 of its little-endian float32 (or float64) bytes: exact, and 4-8 bytes a value."""
    array = np.asarray(array)
    dtype = "<f8" if array.dtype == np.float64 else "<f4"
    data = np.ascontiguousarray(array, dtype=dtype)
    return {"dtype": dtype[1:], "b64": base64.b64encode(data.tobytes()).decode("ascii")}


def _total(tensor, arrivals):
    """The gradient the engine ended with: ``.grad`` (leaves and retained tensors), else the sum of parts."""
    if tensor.grad is not None:
        return tensor.grad
    parts = [part for _, part in arrivals]
    return sum(parts[1:], parts[0].copy())


def _relative(site):
    """'/repo/examples/../transformer/models/attention.py:12' -> 'transformer/models/attention.py:12' (a script run from
    examples/ imports the package through examples/..)."""
    if not site:
        return None
    filename, colon, line = site.rpartition(":")
    if not colon or not line.isdigit():
        filename, colon, line = site, "", ""
    filename = os.path.normpath(os.path.abspath(filename))
    if filename.startswith(_ROOT):
        filename = filename[len(_ROOT):]
    return filename + colon + line


def _defined_at(op_class):
    """'minigrad/ops/....py:NN': where the op's class (its forward and backward side by side) starts."""
    try:
        _, first = inspect.getsourcelines(op_class)
    except (OSError, TypeError):
        return None
    return _relative(f"{os.path.abspath(inspect.getsourcefile(op_class))}:{first}")


def _code_at(site):
    if not site:
        return None
    filename, _, line = site.rpartition(":")
    return linecache.getline(filename, int(line)).strip() if line.isdigit() else None


def _saved_json(attribute, array, fn, out):
    """One array an op kept for backward: shape, statistics, and which tensor's array it is, if any."""
    same = None
    candidates = [("its output", out.data)] + [(f"input {i}", inp.data) for i, inp in enumerate(fn.inputs)]
    for what, data in candidates:        # exact overlap: Q and K are both views into one qkv array
        if array.shape == data.shape and np.shares_memory(array, data) and np.array_equal(array, data):
            same = what
            break
    record = {"name": attribute, "shape": list(array.shape), "dtype": str(array.dtype), "same_as": same}
    if array.dtype.kind in "fiub" and array.size:
        numbers = array.astype(np.float64)
        record["stats"] = [_number(numbers.min()), _number(numbers.max()), _number(numbers.mean())]
        if same is None and array.size <= SAVED_VALUES_LIMIT:
            record["value"] = encode(numbers.astype(np.float32) if array.dtype != np.float64 else numbers)
    return record


def _number(x):
    """A float for JSON; inf and nan (a masked score) as text, which JSON has no number for."""
    x = float(x)
    return x if np.isfinite(x) else str(x)


def _saved_arrays(fn):
    """The numpy arrays (and numbers) an op kept for its backward: what its rule reads
    (``fn.saved``), then what it kept on itself."""
    kept = list(getattr(fn, "saved", {}).items())
    for attribute, value in vars(fn).items():
        if attribute in ("inputs", "needs_input_grad", "recorded_at", "created_at", "scope", "saved"):
            continue
        if isinstance(value, np.ndarray):
            kept.append((attribute, value))
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            kept.append((attribute, np.asarray(value)))
    return kept


def explore_step(model, subject="1845-01-05", kind="encoder-self", layer=0) -> StepRecord:
    """Run one attention step of ``model`` on ``subject`` (a date or sentence as text, or a
    ``subject.py`` object) and its backward pass; see the module docstring.

    The model's own ``.grad`` are left as they were.
    """
    from .subject import as_subject
    inputs = as_subject(model, subject).inputs(model)
    name, output = run_attention_step(model, kind=kind, layer=layer, record_sources=True, inputs=inputs)
    with detect_anomaly():                  # so the loss's op has its source line too
        loss = output.sum().named("loss = sum(output)")
    tensors, ops, _ = collect_graph(loss, max_nodes=None, max_depth=None)
    record = StepRecord(name, kind, layer, loss, tensors, ops, parameter_names(model),
                        mask_kind=attention_mask_kind(model, kind))
    for tensor in tensors:
        if tensor.grad_fn is not None:
            tensor.retain_grad()            # every intermediate keeps its gradient for the panel
    params = [t for t in tensors if t.grad_fn is None and t.requires_grad]
    kept = [(p, p.grad) for p in params]
    for p in params:
        p.grad = None                       # the step's own gradient, not one accumulated before
    op_index = {id(fn): i for i, (_, fn) in enumerate(ops)}
    try:
        for number, step in enumerate(autograd_steps(loss, retain_graph=True), start=1):
            i = op_index[id(step.fn)]
            if number == 1:                 # the seed, d loss / d loss = 1, arrives as backward starts
                record.arrivals[record.index(step.tensor)] = [(1, np.asarray(step.grad))]
            sent = []
            for inp, grad in zip(step.fn.inputs, step.input_grads):
                if grad is not None:
                    j = record.index(inp)
                    record.arrivals.setdefault(j, []).append((number, np.asarray(grad)))
                    sent.append(j)
            record.steps.append((i, sent))
            record.saved[i] = _saved_arrays(step.fn)
        # the gradient each tensor ended with, read before the parameters' .grad are put back
        record.totals = {j: _total(record.tensors[j], parts) for j, parts in record.arrivals.items()}
    finally:
        for p, grad in kept:
            p.grad = grad
    return record
