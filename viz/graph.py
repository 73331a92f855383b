"""Draw the computation graph that produced a Tensor, with graphviz.

    >>> from viz import draw_graph, render
    >>> a = Tensor([1.0, 2.0], requires_grad=True).named("a")
    >>> loss = (a * a).sum()
    >>> g = draw_graph(loss)            # a graphviz.Digraph; shows inline in a notebook
    >>> render(g, "loss_graph")         # writes loss_graph.dot, then .svg if `dot` is installed

Legend (also drawn in the picture, in the "legend" box):
  box, light blue     a Parameter, named by its dotted module name ("encoder.layers.0.self_attn.w_q.weight")
  box, yellow         another leaf that requires grad (an input we differentiate with respect to)
  box, grey, dashed   a constant leaf (no grad): masks' companions, 1/sqrt(d_k), positional tables
  box, white          an intermediate tensor; bold name when the code named it with ``.named("Q")``
  box, green, bold    the tensor the graph was drawn from (the output)
  ellipse, orange     an op (its Function's name: MatMul, Softmax, ...)
  edge label 0, 1     which argument of the op the tensor is (so Sub and MatMul read right)
  box, lilac, dashed  the boolean mask a MaskedFill (or Where) keeps, with its pattern (edge "mask"):
                      MaskedFill's as the attention mask, dark = True = may attend

Hovering over a node of the rendered SVG shows its tooltip: shape, dtype, the
first values and the norms of the value and the gradient (``details.py``).

Data flows along the edges: inputs -> op -> output. Every tensor node shows
``name``, ``(shape) dtype``; ``show_grad`` adds the gradient's shape and norm
(call ``loss.backward(retain_graph=True)`` first: backward frees the graph, and
intermediates keep ``.grad`` only after ``.retain_grad()``); ``show_values`` adds
min/max/mean. Ops save numpy arrays, not tensors, so there are no
saved-tensor nodes (torchviz's orange ones).

All labels are HTML-like labels built from escaped text (``graph_text.escape``), and
node ids are synthetic (``n0``, ``n1``, ...), so names such as ``<pad>``,
``a::b``, ``x"y`` or ``</TD>`` cannot break the DOT.
"""
from collections import deque

import graphviz

from minigrad.nn import Parameter

from .details import mask_label, mask_of, mask_tooltip, tensor_tooltip
from .graph_text import escape, grad_summary, html_label, shape_text, value_summary
from .render import DotGraph

DEFAULT_MAX_NODES = 400

STYLES = {
    "parameter": dict(shape="box", style="filled", fillcolor="#cfe2ff"),
    "input": dict(shape="box", style="filled", fillcolor="#fff3bf"),
    "constant": dict(shape="box", style="filled,dashed", fillcolor="#eeeeee", fontcolor="#555555"),
    "intermediate": dict(shape="box", style="rounded,filled", fillcolor="white"),
    "output": dict(shape="box", style="filled,bold", fillcolor="#c3f0c8", penwidth="2"),
    "op": dict(shape="ellipse", style="filled", fillcolor="#ffd8a8"),
    "cut": dict(shape="note", style="filled", fillcolor="#ffc9c9"),
    "mask": dict(shape="box", style="filled,dashed", fillcolor="#e5dbff", margin="0.05"),
}
LEGEND_ROWS = [
    ("parameter", "parameter (named by module)"),
    ("input", "leaf that requires grad"),
    ("constant", "constant leaf (no grad)"),
    ("intermediate", "intermediate tensor"),
    ("output", "output"),
    ("op", "op (edge label = argument index)"),
    ("mask", "attention mask (dark = True = may attend)"),
]


# ------------------------------------------------------------------ traversal
def collect_graph(output, max_nodes, max_depth):
    """Breadth-first walk from ``output`` towards the leaves (iterative, any depth).

    Returns (tensors, ops, cut): tensors in discovery order, ops as
    (output tensor, grad_fn) pairs, and the tensors whose op was not expanded
    because of ``max_nodes``/``max_depth`` (with the reason).
    """
    seen = {id(output): output}
    tensors, ops, cut = [output], [], []
    queue = deque([(output, 0)])
    used = 1
    while queue:
        tensor, depth = queue.popleft()
        fn = tensor.grad_fn
        if fn is None:
            continue
        inputs = getattr(fn, "inputs", ())
        # by id: Tensor.__eq__ is elementwise, so tensors cannot be dict keys or set members
        fresh = {}
        for t in inputs:
            if id(t) not in seen:
                fresh.setdefault(id(t), t)
        new_inputs = list(fresh.values())
        if max_depth is not None and depth >= max_depth:
            cut.append((tensor, f"max_depth={max_depth}"))
            continue
        if max_nodes is not None and used + 1 + len(new_inputs) > max_nodes:
            cut.append((tensor, f"max_nodes={max_nodes}"))
            continue
        used += 1 + len(new_inputs)
        ops.append((tensor, fn))
        for t in new_inputs:
            seen[id(t)] = t
            tensors.append(t)
            queue.append((t, depth + 1))
    return tensors, ops, cut


def _count_ops_below(tensors):
    """How many distinct ops lie under ``tensors`` (for the 'graph cut' note)."""
    seen_fns, stack = set(), list(tensors)
    while stack:
        fn = stack.pop().grad_fn
        if fn is None or id(fn) in seen_fns:
            continue
        seen_fns.add(id(fn))
        stack.extend(getattr(fn, "inputs", ()))
    return len(seen_fns)


# --------------------------------------------------------------------- naming
def parameter_names(params) -> dict:
    """id(parameter) -> dotted name, from a Module, a dict or (name, tensor) pairs."""
    if params is None:
        return {}
    if hasattr(params, "named_parameters"):
        params = params.named_parameters()
    elif isinstance(params, dict):
        params = params.items()
    return {id(tensor): name for name, tensor in params}


def tensor_kind(tensor, output) -> str:
    if tensor is output:
        return "output"
    if tensor.grad_fn is not None:
        return "intermediate"
    if isinstance(tensor, Parameter):
        return "parameter"
    return "input" if tensor.requires_grad else "constant"


def _tensor_label(tensor, kind, name, show_grad, show_values) -> str:
    title = f"<B>{escape(name)}</B>" if name else ""
    detail = escape(f"{shape_text(tensor.shape)} {tensor.dtype}")
    value = ""
    if show_values or (kind == "constant" and tensor.size == 1):
        value = escape(value_summary(tensor.data), limit=80)
    grad = ""
    if show_grad:
        text = grad_summary(tensor)
        grad = f'<FONT COLOR="#c92a2a">{escape(text, limit=80)}</FONT>' if text else ""
    return html_label(title, detail, value, grad)


def _default_name(tensor, kind) -> str:
    if tensor.name:
        return tensor.name
    return {"parameter": "parameter", "input": "input", "constant": "constant", "output": "output"}.get(kind, "")


# ------------------------------------------------------------------- drawing
def draw_graph(output, params=None, show_grad=False, show_values=False, cluster_modules=False,
               max_nodes=DEFAULT_MAX_NODES, max_depth=None, rankdir="TB", legend=True,
               mask_kind=None, decorate_tensor=None, decorate_op=None) -> graphviz.Digraph:
    """The graph that produced ``output`` as a ``graphviz.Digraph`` (see the module docstring);
    a ``render.DotGraph``, which a notebook shows as DOT source with an install hint where ``dot`` is missing.

    params           a Module or ``dict(model.named_parameters())``: names parameter nodes
    show_grad        add each tensor's gradient shape and norm (after backward(retain_graph=True))
    show_values      add min/max/mean of each tensor
    cluster_modules  box the ops of each module (``grad_fn.scope``, recorded inside
                     ``minigrad.nn.record_scopes(model)``) in a ``cluster_`` subgraph
    max_nodes        stop adding tensor and op nodes at this many; a red note says what was cut
    max_depth        draw at most this many ops from the output towards the inputs
    rankdir          "TB" (inputs at the top) or "LR"
    mask_kind        what the masks drawn are, e.g. "causal + padding"; default: read from each pattern
    decorate_tensor  optional ``f(tensor) -> dict or None``, ``decorate_op`` the same for ``f(grad_fn)``:
                     extra, already-escaped label rows under ``"rows"``, any other key overrides a
                     node attribute (``fillcolor``, ``penwidth``, a ``tooltip_text``...). The backward
                     animation (``backward_animation.py``) marks gradients and the current op this way.

    Every tensor node has a tooltip (hover in the SVG): shape, dtype, first values,
    value and gradient norms. An op that keeps a boolean mask (MaskedFill's
    ``fn.mask``, Where's ``fn.condition``) gets a mask node showing its pattern.
    """
    names = parameter_names(params)
    tensors, ops, cut = collect_graph(output, max_nodes, max_depth)
    ids = {id(t): f"n{i}" for i, t in enumerate(tensors)}
    dot = DotGraph("minigrad", graph_attr=dict(rankdir=rankdir, fontname="Helvetica"),
                           node_attr=dict(fontname="Helvetica", fontsize="11"),
                           edge_attr=dict(fontname="Helvetica", fontsize="9", color="#495057"))
    placement = _Placement(dot, cluster_modules)
    _draw_tensors(placement, tensors, ids, output, names, _first_consumer_scopes(ops),
                  show_grad, show_values, decorate_tensor)
    _draw_ops(dot, placement, ops, ids, mask_kind, decorate_op)
    _draw_cut_note(dot, cut, ids)
    placement.emit()
    if legend:
        _draw_legend(dot)
    return dot


def _draw_tensors(placement, tensors, ids, output, names, consumer_scope, show_grad, show_values,
                  decorate_tensor):
    """One node per tensor: its kind's style, its name, shape and tooltip, in its module's box."""
    for tensor in tensors:
        kind = tensor_kind(tensor, output)
        name = names.get(id(tensor)) or _default_name(tensor, kind)
        label = _tensor_label(tensor, kind, name, show_grad, show_values)
        scope = _node_scope(tensor, kind, names, consumer_scope)
        style = dict(STYLES[kind], tooltip=tensor_tooltip(tensor, name, backward_ran=show_grad))
        label, style = _decorated(label, style, decorate_tensor and decorate_tensor(tensor))
        placement.add_node(scope, ids[id(tensor)], label, style)


def _draw_ops(dot, placement, ops, ids, mask_kind, decorate_op):
    """One node per op, with edges from its inputs (numbered when several) to its output,
    its mask's pattern, and a note where backward() has freed what it saved."""
    for number, (tensor, fn) in enumerate(ops):
        op_id = f"op{number}"
        label, style = _decorated(html_label(escape(fn.name)), dict(STYLES["op"]), decorate_op and decorate_op(fn))
        placement.add_node(_op_scope(fn), op_id, label, style)
        inputs = getattr(fn, "inputs", ())
        for index, inp in enumerate(inputs):
            dot.edge(ids[id(inp)], op_id, label=str(index) if len(inputs) > 1 else None)
        dot.edge(op_id, ids[id(tensor)])
        _draw_mask(dot, placement, fn, op_id, mask_kind)
        if fn.released:
            dot.node(f"{op_id}_freed", html_label(escape("inputs freed by backward();"),
                                             escape("use backward(retain_graph=True)")), **STYLES["cut"])
            dot.edge(f"{op_id}_freed", op_id, style="dashed")


def _decorated(label, style, decoration):
    """Apply a ``decorate_tensor``/``decorate_op`` result: extra label rows, overridden attributes."""
    if not decoration:
        return label, style
    extra = dict(decoration)
    rows = extra.pop("rows", ())
    if rows:
        label = label[:-1] + "".join(f"<BR/>{row}" for row in rows if row) + ">"
    return label, {**style, **extra}


def _draw_mask(dot, placement, fn, op_id, kind):
    """A node for the boolean mask ``fn`` keeps (not a Tensor input, so not in ``fn.inputs``)."""
    found = mask_of(fn)
    if found is None:
        return
    attribute, mask = found
    placement.add_node(_op_scope(fn), f"{op_id}_mask", mask_label(attribute, mask, kind),
                       dict(STYLES["mask"], tooltip=mask_tooltip(attribute, mask, kind)))
    dot.edge(f"{op_id}_mask", op_id, label=attribute, style="dashed")


def _first_consumer_scopes(ops) -> dict:
    """id(tensor) -> scope of the first drawn op that reads it (where constants are placed)."""
    scopes = {}
    for _, fn in ops:
        for inp in getattr(fn, "inputs", ()):
            scopes.setdefault(id(inp), _op_scope(fn))
    return scopes


def _node_scope(tensor, kind, names, consumer_scope):
    """The module cluster a tensor node belongs to: its op's, its owner's, or (constants) its reader's."""
    if kind == "parameter":
        return _parameter_scope(names.get(id(tensor)))
    if kind == "constant":
        return consumer_scope.get(id(tensor))
    return _op_scope(tensor.grad_fn)


def _op_scope(fn):
    return getattr(fn, "scope", None) if fn is not None else None


def _parameter_scope(name):
    """'encoder.layers.0.self_attn.w_q.weight' -> 'encoder.layers.0.self_attn.w_q'."""
    return name.rpartition(".")[0] or None if name else None


def _draw_cut_note(dot, cut, ids):
    if not cut:
        return
    reasons = sorted({reason for _, reason in cut})
    hidden = _count_ops_below([t for t, _ in cut])
    label = html_label(f"<B>{escape('… graph cut')}</B>",
                  escape(f"{hidden} more ops not drawn ({', '.join(reasons)})"))
    dot.node("cut", label, **STYLES["cut"])
    for tensor, _ in cut:
        dot.edge("cut", ids[id(tensor)], style="dashed", arrowhead="none")


def _draw_legend(dot):
    rows = "".join(
        f'<TR><TD BGCOLOR="{STYLES[kind]["fillcolor"]}">{escape(text)}</TD></TR>'
        for kind, text in LEGEND_ROWS)
    label = f'<<TABLE BORDER="0" CELLBORDER="1" CELLSPACING="2"><TR><TD><B>legend</B></TD></TR>{rows}</TABLE>>'
    dot.node("legend", label, shape="plaintext", fontsize="9")


class _Placement:
    """Puts nodes in the top-level graph or, with cluster_modules, in nested module clusters.

    Scopes are dotted module names; a scope's cluster sits inside the cluster of
    its longest dotted prefix that also has nodes (so w_q sits inside self_attn).
    """

    def __init__(self, dot, enabled):
        self.dot, self.enabled = dot, enabled
        self.nodes = {}     # scope -> [(node id, label, style)]

    def add_node(self, scope, node_id, label, style):
        if self.enabled and scope:
            self.nodes.setdefault(scope, []).append((node_id, label, style))
        else:
            self.dot.node(node_id, label, **style)

    def emit(self):
        children = {}
        for scope in self.nodes:
            children.setdefault(self._parent(scope), []).append(scope)
        cluster_names = _cluster_names(self.nodes)
        # explicit stack of (parent graph, scope) instead of recursion
        pending = [(self.dot, scope) for scope in reversed(children.get(None, []))]
        built = []
        while pending:
            parent, scope = pending.pop()
            sub = graphviz.Digraph(name=cluster_names[scope], graph_attr=dict(
                label=html_label(escape(scope, limit=80)), style="rounded,dashed", color="#868e96",
                fontname="Helvetica", fontsize="10", labeljust="l"))
            for node_id, label, style in self.nodes[scope]:
                sub.node(node_id, label, **style)
            built.append((parent, sub))
            pending.extend((sub, child) for child in reversed(children.get(scope, [])))
        # attach innermost first so every subgraph is complete when added to its parent
        for parent, sub in reversed(built):
            parent.subgraph(sub)

    def _parent(self, scope):
        prefix = scope
        while "." in prefix:
            prefix = prefix.rpartition(".")[0]
            if prefix in self.nodes:
                return prefix
        return None


def _cluster_names(scopes) -> dict:
    """scope -> 'cluster_<scope with every non-identifier character as _>', made unique."""
    names, used = {}, set()
    for scope in scopes:
        base = "cluster_" + "".join(ch if ch.isascii() and (ch.isalnum() or ch == "_") else "_" for ch in scope)
        name, n = base, 1
        while name in used:
            n += 1
            name = f"{base}_{n}"
        used.add(name)
        names[scope] = name
    return names
