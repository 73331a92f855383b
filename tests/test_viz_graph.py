"""viz.graph and viz.attention_graph: the DOT they produce, rendering, escaping, clusters, caps."""
import html
import re
import shutil
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from minigrad import Tensor, nn
from viz import draw_graph, render
from viz.attention_graph import build_attention_graph
from transformer.commands.attention_graph import main as attention_graph_main
from viz.inputs import load_or_create_model

HAS_DOT = shutil.which("dot") is not None
NODE = re.compile(r"^\s*(n\d+|op\d+|cut|legend|op\d+_freed) \[label=<(.*)>(?: |\])", re.M)
EDGE = re.compile(r"^\s*(\w+) -> (\w+)(?: \[(.*)\])?$", re.M)


def parse(source):
    """(labels {node id: label}, edges [(tail, head, argument index or None)]) from DOT text."""
    labels = {node: label for node, label in NODE.findall(source)}
    edges = []
    for tail, head, attrs in EDGE.findall(source):
        index = re.search(r"label=(\d+)", attrs or "")
        edges.append((tail, head, int(index.group(1)) if index else None))
    return labels, edges


def name_of(label):
    """The bold first line of a tensor label, unescaped back to the original text."""
    match = re.search(r"<B>(.*?)</B>", label)
    return None if match is None else _unescape(match.group(1))


def _unescape(text):
    return html.unescape(text.replace("<BR/>", "\n").replace("\\\\", "\\"))


def op_names(labels):
    return {node: label for node, label in labels.items() if node.startswith("op") and "_" not in node}


def leaf(name, shape=(2,)):
    return Tensor(np.arange(np.prod(shape), dtype=np.float32).reshape(shape) + 1, requires_grad=True).named(name)


@pytest.fixture(scope="module")
def tiny_model():
    return load_or_create_model(seed=0, d_model=8, heads=2, layers=1)


# ------------------------------------------------------------------ structure
def test_small_expression_has_exactly_the_expected_nodes_and_edges():
    a, b, c = leaf("a"), leaf("b"), leaf("c")
    out = ((a * b) + c).sum()
    labels, edges = parse(draw_graph(out).source)

    tensors = {n: l for n, l in labels.items() if n.startswith("n")}
    ops = op_names(labels)
    assert len(tensors) == 6 and sorted(ops.values()) == ["Add", "Mul", "Sum"]
    assert sorted(filter(None, map(name_of, tensors.values()))) == ["a", "b", "c", "output"]
    assert len(edges) == 8
    by_name = {name_of(l): n for n, l in tensors.items()}
    op_id = {name: n for n, name in ops.items()}
    assert (by_name["a"], op_id["Mul"], 0) in edges and (by_name["b"], op_id["Mul"], 1) in edges
    assert (by_name["c"], op_id["Add"], 1) in edges
    # one-input ops get no argument index; the op points at its output
    assert [e for e in edges if e[1] == op_id["Sum"]][0][2] is None
    assert (op_id["Sum"], by_name["output"], None) in edges
    assert all("(2,) float32" in tensors[by_name[x]] for x in "abc")
    assert "legend" in labels


def test_argument_index_makes_subtraction_readable():
    a, b = leaf("minuend"), leaf("subtrahend")
    labels, edges = parse(draw_graph(a - b).source)
    names = {n: name_of(l) for n, l in labels.items()}
    into_sub = {names[tail]: index for tail, head, index in edges if labels.get(head) == "Sub"}
    assert into_sub == {"minuend": 0, "subtrahend": 1}


def test_parameters_are_named_by_module_path():
    class Net(nn.Module):
        def __init__(self):
            self.first = nn.Linear(3, 2)

    net = Net()
    out = net.first(Tensor(np.ones((1, 3), dtype=np.float32)))
    labels, _ = parse(draw_graph(out, params=net).source)
    assert {"first.weight", "first.bias"} <= {name_of(l) for l in labels.values()}
    labels_from_dict, _ = parse(draw_graph(out, params=dict(net.named_parameters())).source)
    assert {"first.weight", "first.bias"} <= {name_of(l) for l in labels_from_dict.values()}


def test_show_grad_and_show_values():
    a = leaf("a")
    loss = (a * a).sum()
    loss.backward(retain_graph=True)
    source = draw_graph(loss, show_grad=True, show_values=True).source
    # d(sum a^2)/da = 2a = [2, 4]: norm sqrt(20) = 4.472
    assert "∇ (2,) ‖∇‖ 4.472" in source
    assert "min 1 max 2 mean 1.5" in source


def test_a_graph_freed_by_backward_is_drawn_with_a_hint():
    a = leaf("a")
    loss = (a * a).sum()
    loss.backward()
    source = draw_graph(loss).source
    assert "retain_graph=True" in source


# ---------------------------------------------------------- one attention step
def _path_from(node, labels, edges, stop):
    """Follow the only outgoing edge from ``node`` until ``stop``; returns the labels passed."""
    successors = {}
    for tail, head, _ in edges:
        successors.setdefault(tail, []).append(head)
    passed = []
    while node != stop:
        (node,) = successors[node]
        passed.append(labels[node])
    return passed


def _reachable(start, edges):
    seen, stack = {start}, [start]
    while stack:
        node = stack.pop()
        for tail, head, _ in edges:
            if tail == node and head not in seen:
                seen.add(head)
                stack.append(head)
    return seen


def _node(labels, name):
    (node,) = [n for n, l in labels.items() if name_of(l) == name]
    return node


def test_attention_step_graph_has_every_stage_in_data_flow_order(tiny_model):
    graph, output = build_attention_graph(tiny_model, "1845-01-05", "encoder-self", 0)
    labels, edges = parse(graph.source)
    assert 30 <= len(labels) <= 80          # tens of nodes: one module, not the whole model
    out = _node(labels, "encoder.layers.0.self_attn output")
    path = _path_from(_node(labels, "Q"), labels, edges, out)
    ops = [l for l in path if "<B>" not in l and "float32" not in l]
    named = [name_of(l) for l in path if name_of(l)]
    assert ops == ["MatMul", "Div", "MaskedFill", "Softmax", "MatMul", "Transpose", "Reshape", "Linear"]
    assert named == ["scores", "scaled scores", "masked scores", "weights", "attention output",
                     "heads concatenated", "encoder.layers.0.self_attn output"]
    prefix = "encoder.layers.0.self_attn."
    for target in ("Q", "K", "V"):       # one packed projection, then split (nanoGPT's c_attn)
        assert _node(labels, target) in _reachable(_node(labels, prefix + "w_qkv.weight"), edges)
    assert out in _reachable(_node(labels, prefix + "w_o.weight"), edges)
    assert _node(labels, "Q") not in _reachable(_node(labels, prefix + "w_o.weight"), edges)
    # K enters QKᵀ transposed, as the right-hand argument
    k_transposed = _path_from(_node(labels, "K"), labels, edges, _node(labels, "scores"))
    assert k_transposed[0] == "Transpose" and k_transposed[-2] == "MatMul"


def test_cross_attention_takes_queries_from_the_decoder_and_keys_from_memory(tiny_model):
    graph, _ = build_attention_graph(tiny_model, "1845-01-05", "cross", 0)
    labels, edges = parse(graph.source)
    from_memory = _reachable(_node(labels, "memory (encoder output)"), edges)
    from_decoder = _reachable(_node(labels, "x (query)"), edges)
    assert _node(labels, "K") in from_memory and _node(labels, "V") in from_memory
    assert _node(labels, "Q") in from_decoder and _node(labels, "K") not in from_decoder
    assert "decoder.layers.0.cross_attn" in graph.source


def test_backward_option_shows_every_gradient(tiny_model):
    graph, loss = build_attention_graph(tiny_model, "1845-01-05", "decoder-self", 0, backward=True)
    labels, _ = parse(graph.source)
    tensors = [l for n, l in labels.items() if n.startswith("n")]
    with_grad = [l for l in tensors if "‖∇‖" in l]
    constants = [l for l in tensors if "constant" in l]
    assert len(with_grad) == len(tensors) - len(constants) and "not kept" not in graph.source
    assert name_of(labels["n0"]) == "loss = sum(output)"
    assert all(p.grad is None for p in tiny_model.parameters())     # the model's grads are left alone


def test_attention_graph_cli_writes_dot_and_svg(tmp_path, capsys):
    code = attention_graph_main(["--d-model", "8", "--heads", "2", "--layers", "1", "--kind", "cross",
                                 "--out", str(tmp_path / "step")])
    assert code == (0 if HAS_DOT else 3) and (tmp_path / "step.dot").exists()     # 3: only the .dot written
    assert (tmp_path / "step.svg").exists() == HAS_DOT
    assert attention_graph_main(["--date", "2023-02-30", "--out", str(tmp_path / "bad")]) == 2
    assert attention_graph_main(["--layer", "7", "--d-model", "8", "--out", str(tmp_path / "bad")]) == 2
    assert "error: layer 7 does not exist" in capsys.readouterr().err


# ----------------------------------------------------------------- rendering
@pytest.mark.skipif(not HAS_DOT, reason="Graphviz's dot is not installed")
def test_render_writes_dot_then_svg_that_parses_as_xml(tmp_path):
    a, b = leaf("a"), leaf("b")
    paths = render(draw_graph((a @ b.reshape(2, 1)).sum()), tmp_path / "sub" / "g", formats=("svg", "png"))
    assert paths == [str(tmp_path / "sub" / f"g.{ext}") for ext in ("dot", "svg", "png")]
    root = ET.parse(paths[1]).getroot()
    assert root.tag.endswith("svg")
    assert open(paths[2], "rb").read(8) == b"\x89PNG\r\n\x1a\n"


def test_render_without_dot_still_writes_the_dot_and_says_how_to_install(tmp_path, monkeypatch, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    paths = render(draw_graph(leaf("a").sum()), tmp_path / "g")
    assert paths == [str(tmp_path / "g.dot")] and (tmp_path / "g.dot").read_text().startswith("digraph")
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "not on PATH" in err and "apt-get install graphviz" in err and "brew install graphviz" in err
    assert paths.message == err


HOSTILE_NAMES = ['<pad>', 'a&b', 'x"y', "it's", 'back\\slash', '\\', 'a::b', '</TD></TR><TR>', '{a|b}',
                 'line 1\nline 2', 'ünï 漢字 ∇', '<sos>1845<eos>', 'tab\there', '\\n not a newline',
                 'two \\\\ backslashes']


def test_hostile_names_round_trip_and_render(tmp_path):
    leaves = [leaf(name) for name in HOSTILE_NAMES]
    long_name = "L" * 5000
    leaves.append(leaf(long_name))
    total = leaves[0]
    for t in leaves[1:]:
        total = total + t
    total.grad_fn.scope = 'we"ird <scope> {a|b} \\'   # hostile cluster label too
    graph = draw_graph(total.named("</B>out&"), cluster_modules=True)
    names = [name_of(l) for l in parse(graph.source)[0].values()]
    for name in HOSTILE_NAMES:
        assert name.replace("\t", "\\x09") in names
    assert "</B>out&" in names
    assert "L" * 47 + "…" in names and len(graph.source) < 20000
    if HAS_DOT:
        svg = graph.pipe(format="svg").decode("utf-8")   # raises on any DOT syntax error
        texts = "".join(ET.fromstring(svg).itertext())
        for name in ("<pad>", "a&b", 'x"y', "back\\slash", "</TD></TR><TR>", "ünï 漢字 ∇", "\\n not a newline",
                     "two \\\\ backslashes"):
            assert name in texts


# ------------------------------------------------------------ clusters and caps
def test_cluster_modules_groups_each_modules_ops():
    """Each module's ops, outputs and parameters sit in a cluster named after the module."""
    class Net(nn.Module):
        def __init__(self):
            self.first = nn.Linear(3, 3)
            self.second = nn.Linear(3, 1)

        def forward(self, x):
            return self.second(self.first(x).relu())

    net = Net()
    with nn.record_scopes(net):
        out = net(Tensor(np.ones((2, 3), dtype=np.float32))).sum()
    source = draw_graph(out, params=net, cluster_modules=True).source
    clusters = _cluster_bodies(source)
    assert set(clusters) == {"cluster_Net", "cluster_first", "cluster_second"}
    for name in ("first", "second"):
        body = clusters[f"cluster_{name}"]
        assert f"<B>{name}.weight</B>" in body and "label=<Linear>" in body
    assert "label=<ReLU>" in clusters["cluster_Net"] and "label=<Sum>" not in clusters["cluster_Net"]
    assert "subgraph" not in draw_graph(out, params=net).source


def _cluster_bodies(source):
    """cluster name -> its text, found by brace matching."""
    bodies = {}
    for match in re.finditer(r"subgraph (cluster_\w+) \{", source):
        depth, i = 1, match.end()
        while depth:
            depth += {"{": 1, "}": -1}.get(source[i], 0)
            i += 1
        bodies[match.group(1)] = source[match.end(): i]
    return bodies


def _chain(length):
    x = leaf("x")
    y = x
    for _ in range(length):
        y = y + 1.0
    return y


def test_max_nodes_caps_the_graph_with_a_note():
    labels, edges = parse(draw_graph(_chain(100), max_nodes=20).source)
    drawn = [n for n in labels if n.startswith(("n", "op"))]
    assert len(drawn) <= 20
    assert "max_nodes=20" in labels["cut"] and "more ops not drawn" in labels["cut"]
    hidden = int(re.search(r"(\d+) more ops", labels["cut"]).group(1))
    assert hidden + len(op_names(labels)) == 100


def test_max_depth_keeps_that_many_ops():
    labels, _ = parse(draw_graph(_chain(50), max_depth=3).source)
    assert len(op_names(labels)) == 3 and "max_depth=3" in labels["cut"]


def test_deep_graph_is_walked_without_recursion():
    labels, _ = parse(draw_graph(_chain(3000), max_nodes=None).source)
    assert len(op_names(labels)) == 3000 and "cut" not in labels
