"""dates-explore's page in a real browser (headless Chromium): it loads cleanly, and what it shows
equals what the engine computes, found independently of the page's own data."""
import pytest

from viz.browser import SKIP_REASON, open_page
from minigrad import autograd_steps
from viz.attention_graph import find_named_tensor, run_attention_step
from viz.explorer.build import write_explorer
from viz.inputs import decoder_input_from_reference, load_or_create_model, token_labels

pytestmark = pytest.mark.skipif(SKIP_REASON is not None, reason=str(SKIP_REASON))

DATE, KIND, LAYER = "1845-01-05", "decoder-self", 0


@pytest.fixture(scope="module")
def model():
    return load_or_create_model(None, seed=0)          # the default shape, untrained


@pytest.fixture(scope="module")
def explorer(model, tmp_path_factory):
    """One page for the whole module (starting a browser is the slow part)."""
    path = tmp_path_factory.mktemp("explore") / "explorer.html"
    write_explorer(model, str(path), DATE, KIND, LAYER, trained=False, check=True)
    with open_page(path) as opened:
        yield opened


@pytest.fixture(scope="module")
def engine(model):
    """The same step computed again, outside the page: its loss, the engine's order and gradients."""
    _, output = run_attention_step(model, DATE, KIND, LAYER)
    loss = output.sum()
    stack, seen = [loss], set()
    while stack:                                        # every intermediate keeps its gradient
        t = stack.pop()
        if id(t) not in seen and t.grad_fn is not None:
            seen.add(id(t))
            t.retain_grad()
            stack.extend(t.grad_fn.inputs)
    params = {id(p): p.grad for p in model.parameters()}
    order = [(s.fn.name, s.tensor.name) for s in autograd_steps(loss, retain_graph=True)]
    weight = dict(model.named_parameters())[f"decoder.layers.{LAYER}.self_attn.w_qkv.weight"]
    grads = {"weights": find_named_tensor(loss, "weights").grad, "qkv": find_named_tensor(loss, "qkv").grad,
             "w_qkv.weight": weight.grad.copy()}
    for p in model.parameters():
        p.grad = params[id(p)]
    return {"loss": loss, "order": order, "grads": grads}


def set_step(page, number):
    page.evaluate("n => { const s = document.getElementById('step'); s.value = n; "
                  "s.dispatchEvent(new Event('input')); }", number)


def table_values(page, view):
    """{flat index: value} of the numbers table in the panel's ``view`` (value-view, grad-view)."""
    cells = page.query_selector_all(f"#{view} td[data-value]")
    return {int(c.get_attribute("data-index")): float(c.get_attribute("data-value")) for c in cells}


def test_page_loads_without_console_errors(explorer):
    page = explorer.page
    assert explorer.errors == []
    assert "untrained model" in page.title()
    assert page.locator("g.node.tensor").count() > 20 and page.locator("g.node.op").count() > 15
    assert not page.locator("#training").is_visible()          # no run snapshots: no training-step slider
    for name in ("Q", "K", "V", "scores", "weights", f"decoder.layers.{LAYER}.self_attn.w_qkv.weight"):
        assert page.locator(f'g.node.tensor[data-name="{name}"]').count() == 1, name


def _overlap(a, b):
    return (a["x"] < b["x"] + b["width"] and b["x"] < a["x"] + a["width"] and
            a["y"] < b["y"] + b["height"] and b["y"] < a["y"] + a["height"])


def _visible(box, graph):
    """The part of a node's box inside the graph's area (the SVG clips the rest), or None."""
    x0, y0 = max(box["x"], graph["x"]), max(box["y"], graph["y"])
    x1 = min(box["x"] + box["width"], graph["x"] + graph["width"])
    y1 = min(box["y"] + box["height"], graph["y"] + graph["height"])
    return {"x": x0, "y": y0, "width": x1 - x0, "height": y1 - y0} if x1 > x0 and y1 > y0 else None


def test_the_page_opens_readable_on_the_attention_core_and_the_legend_covers_no_node(explorer):
    page = explorer.page
    page.reload()
    page.wait_for_selector("body[data-ready=true]", state="attached")
    graph = page.locator("#graph-svg").bounding_box()
    for name in ("scores", "weights"):                   # the core is in view, its labels readable
        node = page.locator(f'g.node.tensor[data-name="{name}"]')
        box = node.bounding_box()
        assert graph["x"] <= box["x"] and box["x"] + box["width"] <= graph["x"] + graph["width"], name
        assert graph["y"] <= box["y"] and box["y"] + box["height"] <= graph["y"] + graph["height"], name
        label = node.locator("text.name").bounding_box()
        assert label["height"] >= 10, (name, label)       # ~11 px text, not ~5 px
    legend = page.locator("#legend").bounding_box()
    assert legend["width"] > 100
    for fitted in (False, True):                         # at open and fitted: on top of no node (the loss)
        if fitted:
            page.click("#fit")
        for node in page.locator("g.node").all():
            shown = _visible(node.bounding_box(), graph)
            assert shown is None or not _overlap(legend, shown), node.get_attribute("data-name")
    loss = _visible(page.locator("g.node.tensor.output").bounding_box(), graph)
    assert loss is not None and not _overlap(legend, loss)
    assert explorer.errors == []


def test_the_heatmaps_carry_their_tokens_on_both_axes(explorer):
    page = explorer.page
    page.select_option("#att-module", label=f"{KIND}, layer {LAYER} (the graph's)")
    characters = token_labels(decoder_input_from_reference(DATE))
    for prefix in ("att", "mask"):
        assert page.locator(f"#{prefix}-keys span").all_text_contents() == characters
        assert page.locator(f"#{prefix}-queries span").all_text_contents() == characters
        canvas = page.locator(f"#{prefix}-canvas").bounding_box()
        first_key = page.locator(f"#{prefix}-keys span").first.bounding_box()
        first_query = page.locator(f"#{prefix}-queries span").first.bounding_box()
        assert first_key["y"] + first_key["height"] <= canvas["y"] + 1           # above the columns
        assert abs(first_key["x"] - canvas["x"]) <= 2
        assert first_query["x"] + first_query["width"] <= canvas["x"] + 1       # left of the rows
        assert abs(first_query["y"] - canvas["y"]) <= 2
    page.click('g.node.tensor[data-name="weights"]')
    keys = page.locator("#value-view .col-labels span").all_text_contents()
    queries = page.locator("#value-view .row-labels span").all_text_contents()
    assert keys == characters and queries == characters * 4                     # heads x queries rows


def test_source_lines_are_clean_paths_when_run_from_examples(tmp_path):
    """`python examples/explore.py` imports the package through examples/..: the page still says
    transformer/models/attention.py:N, not examples/../transformer/models/attention.py:N."""
    import json
    import re
    import subprocess
    import sys
    from pathlib import Path
    repo = Path(__file__).resolve().parents[1]
    out = tmp_path / "page.html"
    done = subprocess.run([sys.executable, str(repo / "examples" / "explore.py"), "--untrained", "--d-model", "16",
                           "--layers", "1", "--no-check", "--out", str(out)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    data = json.loads(re.search(r'<script type="application/json" id="explorer-data">(.*?)</script>',
                                out.read_text(), re.S).group(1))
    sources = [op["source"] for op in data["step"]["ops"] if op["source"]]
    defined = [op["defined_at"] for op in data["step"]["ops"] if op["defined_at"]]
    assert sources and defined
    assert all(path.startswith(("transformer/", "minigrad/", "viz/")) and ".." not in path for path in sources + defined)


def test_clicking_scores_shows_its_shape_and_the_models_values(explorer, engine):
    page = explorer.page
    page.click('g.node.tensor[data-name="scores"]')
    scores = find_named_tensor(engine["loss"], "scores").data
    assert page.text_content("#detail-name") == "scores"
    assert page.text_content("#detail-shape") == "(" + ", ".join(map(str, scores.shape)) + ")"
    shown = table_values(page, "value-view")
    assert len(shown) >= 25
    flat = scores.reshape(-1)
    for index, value in shown.items():
        assert value == float(flat[index]), index          # float32 -> text -> float: exact
    assert page.text_content(".op-section .source").startswith("created at transformer/models/attention.py:")
    assert "minigrad/" in page.text_content(".op-section .defined")
    assert "q @ k.swapaxes(-1, -2)" in page.text_content(".op-section code")
    assert explorer.errors == []


def test_arrow_keys_step_through_backward_in_the_engines_order(explorer, engine):
    page = explorer.page
    set_step(page, 0)
    graph = page.locator("#graph-svg").bounding_box()
    for number, (op_name, output_name) in enumerate(engine["order"], start=1):
        page.keyboard.press("ArrowRight")
        current = page.locator("g.node.op.current")
        assert current.count() == 1
        assert current.get_attribute("data-op") == op_name, number
        assert page.input_value("#step") == str(number)
        if output_name:
            assert page.locator("g.node.tensor.grad-in").get_attribute("data-name") == output_name
        box = current.bounding_box()            # the highlighted op is panned into view
        assert graph["x"] <= box["x"] and box["x"] + box["width"] <= graph["x"] + graph["width"], number
        assert graph["y"] <= box["y"] and box["y"] + box["height"] <= graph["y"] + graph["height"], number
    assert page.locator("#prev").is_visible() and page.locator("#step").is_visible()
    page.keyboard.press("ArrowLeft")
    assert page.input_value("#step") == str(len(engine["order"]) - 1)
    for focused in ("#step", "#check-toggle"):     # one step per key, wherever the focus is
        page.focus(focused)
        page.keyboard.press("ArrowLeft")
    assert page.input_value("#step") == str(len(engine["order"]) - 3)
    assert explorer.errors == []


@pytest.mark.parametrize("name, key", [("weights", "weights"), ("qkv", "qkv"),
                                       (f"decoder.layers.{LAYER}.self_attn.w_qkv.weight", "w_qkv.weight")])
def test_gradient_panel_shows_the_engines_gradient(explorer, engine, name, key):
    page = explorer.page
    set_step(page, 0)
    page.click(f'g.node.tensor[data-name="{name}"]')
    assert "backward has not started" in page.text_content("#grad-status")
    hover = page.text_content(f'g.node.tensor[data-name="{name}"] > title')
    assert hover.startswith(f"{name}\nshape ") and "∇: backward has not started" in hover
    set_step(page, len(engine["order"]))
    shown = table_values(page, "grad-view")
    flat = engine["grads"][key].reshape(-1)
    assert "‖grad‖ " in page.text_content(f'g.node.tensor[data-name="{name}"] > title')
    assert len(shown) >= 6
    for index, value in shown.items():
        assert value == float(flat[index]), index


def test_a_tensor_used_three_times_shows_its_parts_adding_up(explorer, engine):
    page = explorer.page
    set_step(page, len(engine["order"]))
    node = page.locator('g.node.tensor[data-name="qkv"]')
    assert "g1 + g2 + g3" in node.text_content()          # Q, K and V are three slices of qkv
    page.click('g.node.tensor[data-name="qkv"]')
    assert page.text_content("#grad-status").startswith("∇ = g1 + g2 + g3")


def test_heatmap_cell_under_the_pointer_names_its_characters(explorer):
    page = explorer.page
    page.select_option("#att-module", label=f"{KIND}, layer {LAYER} (the graph's)")
    characters = token_labels(decoder_input_from_reference(DATE))
    page.locator("#att-canvas").scroll_into_view_if_needed()     # below the grid of every head
    canvas = page.locator("#att-canvas").bounding_box()
    rows = cols = len(characters)
    for query, key in [(1, 0), (5, 3), (rows - 1, cols - 2)]:
        page.mouse.move(canvas["x"] + (key + 0.5) * canvas["width"] / cols,
                        canvas["y"] + (query + 0.5) * canvas["height"] / rows)
        hover = page.locator("#att-hover")
        assert hover.get_attribute("data-query") == characters[query]
        assert hover.get_attribute("data-key") == characters[key]
        assert f"query {query} '{characters[query]}' → key {key} '{characters[key]}'" in hover.text_content()
        assert ("(may attend)" in hover.text_content()) == (key <= query)     # causal: True = may attend


def test_check_overlay_colours_each_parameter_by_its_finite_difference_check(explorer):
    page = explorer.page
    name = f"decoder.layers.{LAYER}.self_attn.w_o.weight"
    node = page.locator(f'g.node.tensor[data-name="{name}"]')
    assert "check-ok" not in node.get_attribute("class")
    page.check("#check-toggle")
    assert page.locator("g.node.tensor.check-ok").count() == 5      # w_qkv, w_o (weight and bias), x
    assert page.locator("g.node.tensor.check-bad").count() == 0
    page.click(f'g.node.tensor[data-name="{name}"]')
    rows = page.query_selector_all(".check-section tr")
    assert len(rows) == 1 + 6 + 1                    # header, six elements, one random direction
    backward, numeric = (float(c.text_content()) for c in rows[-1].query_selector_all("td"))
    assert abs(backward - numeric) <= 1e-3 * abs(numeric)
    page.uncheck("#check-toggle")
    assert page.locator("g.node.tensor.check-ok").count() == 0


def test_the_scores_heatmap_names_the_query_and_key_of_a_cell(explorer):
    page = explorer.page
    page.click('g.node.tensor[data-name="scores"]')
    characters = token_labels(decoder_input_from_reference(DATE))
    canvas = page.locator("#value-view canvas")
    heatmap = canvas.bounding_box()
    rows, cols = 4 * len(characters), len(characters)             # (1, heads, queries, keys): heads x queries rows
    head, query, key = 2, 5, 3
    canvas.hover(position={"x": (key + 0.5) * heatmap["width"] / cols,       # scrolls the point into view
                           "y": (head * len(characters) + query + 0.5) * heatmap["height"] / rows})
    text = page.text_content("#value-view .hover")
    assert text.startswith(f"[0, {head}, {query}, {key}] = ")
    assert f"query {query} '{characters[query]}' → key {key} '{characters[key]}'" in text
