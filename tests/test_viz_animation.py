"""viz.backward_animation: one frame per op, in a valid backward order, ending at the real gradients."""
import re
import shutil

import numpy as np
import pytest

from minigrad import Tensor
from transformer.commands.backward_animation import main as main
from viz.animation_output import write_animation
from viz.backward_animation import backward_frames, expression_root, parse_var
from viz.inputs import load_or_create_model

HAS_DOT = shutil.which("dot") is not None
needs_dot = pytest.mark.skipif(not HAS_DOT, reason="Graphviz's dot is not installed")


def leaves(a=(0.5, -0.4), b=(0.2, 1.5)):
    return (Tensor(np.array(a), requires_grad=True).named("a"),
            Tensor(np.array(b), requires_grad=True).named("b"))


def expression(a, b):
    """a is used twice (in the product and in the sum): its gradient accumulates."""
    return ((a * b + a).tanh() * b).sum().named("loss")


def ops_in_graph(root):
    """Every distinct grad_fn below root, by id."""
    found, stack = {}, [root]
    while stack:
        fn = stack.pop().grad_fn
        if fn is not None and id(fn) not in found:
            found[id(fn)] = fn
            stack.extend(fn.inputs)
    return found


def assert_reverse_topological(frames):
    """Every op's output is processed before any op that produced one of its inputs."""
    position = {id(frame.fn): i for i, frame in enumerate(frames)}
    for i, frame in enumerate(frames):
        for inp in frame.fn.inputs:
            if inp.grad_fn is not None and inp.requires_grad:
                assert position[id(inp.grad_fn)] > i, f"{inp.grad_fn.name} ran before its consumer {frame.op_name}"


def test_one_frame_per_op_in_a_valid_reverse_topological_order():
    a, b = leaves()
    root = expression(a, b)
    ops = ops_in_graph(root)
    frames = backward_frames(root)
    assert len(frames) == len(ops) == 5                          # Sum, Mul, Tanh, Add, Mul
    assert sorted(id(f.fn) for f in frames) == sorted(ops)       # each op exactly once
    assert frames[0].fn is root.grad_fn
    assert [f.number for f in frames] == list(range(1, 6))
    assert_reverse_topological(frames)


def test_last_frame_gradients_equal_a_plain_backward():
    a, b = leaves()
    frames = backward_frames(expression(a, b))
    a2, b2 = leaves()
    root2 = expression(a2, b2)
    root2.backward()
    last = frames[-1]
    np.testing.assert_allclose(last.grad_of(a), a2.grad, rtol=1e-12)
    np.testing.assert_allclose(last.grad_of(b), b2.grad, rtol=1e-12)
    # the animation ran a real backward too
    np.testing.assert_allclose(a.grad, a2.grad, rtol=1e-12)


def test_intermediate_gradients_match_retain_grad():
    a, b = leaves()
    product = (a * b).named("product").retain_grad()
    root = (product.tanh() * 3).sum()
    frames = backward_frames(root)
    np.testing.assert_allclose(frames[-1].grad_of(product), product.grad, rtol=1e-12)


def test_a_node_used_twice_shows_accumulation_on_the_second_arrival():
    x = Tensor(np.array([3.0]), requires_grad=True).named("x")
    frames = backward_frames((x * x + x).sum())
    arrivals = [f for f in frames if any(t is x for t in f.sent_to)]
    assert [f.op_name for f in arrivals] == ["Add", "Mul"]
    first, second = (f.digraph.source for f in arrivals)
    assert "∇ [1]  ← just arrived" in first and "g1 + g2" not in first
    # Mul sends x two gradients (x is both its arguments): 1 + 3 + 3 = 7
    assert "∇ = g1 + g2 + g3 = [7]  ← just added" in second
    assert re.search(r'label=<<B>x</B>.*fillcolor="#ffd8a8"', second)
    np.testing.assert_allclose(frames[-1].grad_of(x), [7.0])


def test_a_hook_that_replaces_a_gradient_is_shown_and_flows_on():
    a, _ = leaves()
    h = (a * a).named("h")
    h.register_hook(lambda g: g * 10)
    frames = backward_frames((h * 2).sum())
    mul = frames[-1]                                   # a * a: h's gradient after the hook
    assert "∇ after hook [20, 20]" in mul.digraph.source
    np.testing.assert_allclose(mul.grad_of(h), [20.0, 20.0])
    np.testing.assert_allclose(mul.grad_of(a), a.grad)   # 20 * 2a, what the engine computed


def test_frames_before_arrival_say_not_yet_and_highlight_the_current_op():
    a, b = leaves()
    frames = backward_frames(expression(a, b))
    assert frames[0].grad_of(a) is None and "∇ not yet" in frames[0].digraph.source
    for frame in frames:
        assert frame.digraph.source.count('fillcolor="#ff8787"') == 1      # exactly one op is current


def test_an_attention_step_animates_in_a_valid_order():
    model = load_or_create_model(seed=0, d_model=8, heads=2, layers=1)
    from viz.backward_animation import attention_root
    root, options, _ = attention_root(model, "1845-01-05", "decoder-self", 0, untrained=True)
    frames = backward_frames(root, **options)
    assert len(frames) == len(ops_in_graph(root))
    assert_reverse_topological(frames)
    assert "MaskedFill" in [f.op_name for f in frames]
    masked = next(f for f in frames if f.op_name == "MaskedFill")
    assert "mask: causal + padding" in masked.digraph.source


@needs_dot
def test_gif_and_html_have_one_frame_per_op_and_the_html_is_self_contained(tmp_path):
    from PIL import Image

    a, b = leaves()
    frames = backward_frames(expression(a, b))
    gif, page = write_animation(frames, tmp_path / "anim")
    with Image.open(gif) as image:
        assert image.n_frames == len(frames)
    text = open(page, encoding="utf-8").read()
    assert text.count("<svg") == len(frames) and f'max="{len(frames)}"' in text
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//""", text)
    assert "<script src" not in text and "<?xml" not in text
    ids = re.findall(r'\bid="([^"]+)"', text)
    assert len(ids) == len(set(ids))                             # frames do not clash


@needs_dot
def test_cli_writes_both_files(tmp_path, capsys):
    assert main(["--out", str(tmp_path / "x"), "--var", "a=1,2", "--expr", "(a * a).sum()"]) == 0
    assert "2 frames" in capsys.readouterr().out
    assert (tmp_path / "x.gif").exists() and (tmp_path / "x.html").exists()


@pytest.mark.parametrize("argv, message", [
    (["--expr", "(a * q).sum()"], "'q', which is not defined; add --var q="),
    (["--expr", "(a *"], "not a valid expression"),
    (["--expr", "3"], "must compute a Tensor"),
    (["--var", "a=1,x"], "values must be numbers"),
    (["--var", "1a=2"], "NAME=1,2,3"),
    (["--attention", "cross", "--expr", "a"], "not both"),
    (["--attention", "cross", "--date", "1845-13-45", "--untrained"], "error:"),
    (["--dpi", "5"], "--dpi must be between"),
    (["--untrained", "--d-model", "8"], "--untrained, --d-model need --attention KIND"),
    (["--layer", "1"], "--layer need --attention"),
])
def test_bad_input_is_one_line_and_exit_2(argv, message, capsys, tmp_path):
    assert main(argv + ["--out", str(tmp_path / "never")]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert not (tmp_path / "never.gif").exists()


def test_parse_var_and_expression_root():
    assert parse_var("w=1, 2.5")[0] == "w"
    np.testing.assert_array_equal(parse_var("w=1, 2.5")[1], [1.0, 2.5])
    root = expression_root("a * b", dict([parse_var("a=1,2"), parse_var("b=3,4")]))
    assert root.shape == () and root.name == "loss = sum(...)"


def test_draw_graph_decorations_add_rows_and_override_attributes_only_where_asked():
    from viz import draw_graph

    a, b = leaves()
    out = (a * b).sum()
    plain = draw_graph(out).source
    assert draw_graph(out, decorate_tensor=lambda t: None, decorate_op=lambda fn: None).source == plain
    marked = draw_graph(out, decorate_tensor=lambda t: {"rows": ["extra &amp; row"]} if t is a else None,
                        decorate_op=lambda fn: {"fillcolor": "#123456"} if fn is out.grad_fn else None).source
    assert marked.count("extra &amp; row") == 1 and re.search(r"<B>a</B>.*<BR/>extra &amp; row>", marked)
    assert marked.count('fillcolor="#123456"') == 1


README_ANIMATIONS = (["--format", "html"], ["--expr", "(x * x + x).sum()", "--var", "x=3", "--format", "html"],
                     ["--attention", "decoder-self", "--layer", "0", "--format", "html", "--untrained",
                      "--d-model", "8", "--layers", "1"])


def test_the_readmes_animations_each_get_their_own_default_file(tmp_path, monkeypatch, path_without_dot, capsys):
    """The README's three commands, one after another: none meets another's file (without `dot`
    each writes its frames' .dot, which is named as its pictures would be)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", path_without_dot)
    for argv in README_ANIMATIONS:
        assert main(argv) == 3, capsys.readouterr().err
    written = sorted(p.name for p in (tmp_path / "runs" / "viz").iterdir())
    assert written == ["backward_a_mul_b_add_a_tanh_sum.dot", "backward_decoder-self_layer0.dot",
                       "backward_x_mul_x_add_x_sum.dot"]


@needs_dot
def test_an_attention_steps_gif_is_scaled_down_to_the_height_bound(tmp_path, monkeypatch, capsys):
    """Laid out at 72 dpi an attention step is 2,464 px tall; the GIF is bounded, the page is not."""
    from PIL import Image
    from viz.animation_output import MAX_GIF_HEIGHT

    monkeypatch.chdir(tmp_path)            # the untrained model's note names runs/dates, which is not here
    assert main(["--attention", "decoder-self", "--out", str(tmp_path / "step"), "--format", "gif"]) == 0
    with Image.open(tmp_path / "step.gif") as image:
        assert image.height == MAX_GIF_HEIGHT and 300 < image.width < image.height, image.size
    assert main(["--max-height", "50", "--out", str(tmp_path / "small")]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[-1] == "error: --max-height must be at least 100 (pixels), got 50"
