"""The explorer's training view in headless Chromium, on the files real (small) runs write: every
layer and head at once, whose heatmaps change between the first and the last recorded step; play
advances the step; the curves mark it; a next-word page opens on its recall circuit's reader,
measured here from the snapshots file apart from the page (``most_changed``, the head a date page
opens on, is computed here for test_explore_served_browser.py)."""
import numpy as np
import pytest

from explore_runs import next_word_run
from transformer.training.snapshots import SNAPSHOTS_NAME, load_snapshots
from transformer.files.trained_model import load_model
from viz.browser import SKIP_REASON, open_page
from viz.explorer.build import write_explorer
from viz.recall_circuit import recall_circuit

pytestmark = [pytest.mark.skipif(SKIP_REASON is not None, reason=str(SKIP_REASON)), pytest.mark.slow]


def most_changed(path):
    """(module, head) whose weights moved most from the first to the last step: mean |Δw| over each
    probe row's real tokens (up to the first <pad>), averaged over the rows."""
    snapshots = load_snapshots(path)
    best, most = None, -1
    for m, (name, weights) in enumerate(zip(snapshots["modules"], snapshots["weights"])):
        for head in range(weights.shape[2]):
            moved = []
            for p in range(weights.shape[1]):
                q = list(snapshots["queries"][m][p]).index("<pad>") if "<pad>" in snapshots["queries"][m][p] else None
                k = list(snapshots["keys"][m][p]).index("<pad>") if "<pad>" in snapshots["keys"][m][p] else None
                moved.append(np.abs(weights[-1, p, head, :q, :k] - weights[0, p, head, :q, :k]).mean())
            if np.mean(moved) > most:
                best, most = (str(name), head), np.mean(moved)
    return best


def grid_pixels(page):
    """Every grid heatmap's pixels, keyed by module/head."""
    return page.evaluate("""() => Object.fromEntries([...document.querySelectorAll('#grid canvas.cell')].map(c =>
        [c.dataset.module + '/' + c.dataset.head, Array.from(c.getContext('2d').getImageData(0, 0, c.width, c.height).data)]))""")


def set_training_step(page, index):
    page.evaluate("i => { const s = document.getElementById('snap-step'); s.value = i; "
                  "s.dispatchEvent(new Event('input')); }", index)


@pytest.fixture(scope="module")
def next_word(tmp_path_factory):
    folder = tmp_path_factory.mktemp("next-word-run")
    checkpoint = next_word_run(folder, steps=12, every=4)
    from viz.explorer.ladder_rungs import train_rungs
    from viz.explorer.next_word import default_sentence
    page = folder / "page.html"
    write_explorer(load_model(checkpoint, task="next-word"), str(page), default_sentence(), "decoder-self", 1,
                   check=False, snapshots=str(folder / SNAPSHOTS_NAME), rungs=(3, train_rungs(3)))
    with open_page(page, width=1280, height=800) as opened:
        yield opened, folder


def test_every_layer_and_head_is_visible_at_1280_by_800(next_word):
    opened, _ = next_word
    page = opened.page
    assert opened.errors == []
    cells = page.locator("#grid canvas.cell")
    assert cells.count() == 2 * 2                               # layers x heads of the run's model
    for i in range(cells.count()):
        box = cells.nth(i).bounding_box()
        assert box["y"] >= 0 and box["y"] + box["height"] <= 800 and box["x"] + box["width"] <= 1280
    assert page.locator("#training").is_visible() and page.locator("#play").is_visible()


def test_the_grid_changes_between_the_first_and_the_last_step(next_word):
    opened, folder = next_word
    page = opened.page
    steps = load_snapshots(folder / SNAPSHOTS_NAME)["steps"].tolist()
    set_training_step(page, len(steps) - 1)
    last = grid_pixels(page)
    assert page.get_attribute("#grid", "data-step") == str(steps[-1])
    set_training_step(page, 0)
    first = grid_pixels(page)
    assert page.get_attribute("#grid", "data-step") == "0"
    assert first.keys() == last.keys()
    assert all(first[key] != last[key] for key in first)       # every head's heatmap moved


def test_it_opens_on_the_reader_of_the_runs_recall_circuit(next_word):
    """(The date page, which has no such circuit, opens on the head that changed most:
    test_explore_served_browser.py; the marks on two seeds: test_explore_next_word_circuit_browser.py.)"""
    opened, folder = next_word
    module, head = "decoder.layers.1.self_attn", recall_circuit(folder / SNAPSHOTS_NAME).reader_head
    page = opened.page
    page.reload()
    page.wait_for_selector("body[data-ready=true]", state="attached")
    focused = page.locator("#grid canvas.cell.focused")
    assert focused.count() == 1
    assert (focused.get_attribute("data-module"), int(focused.get_attribute("data-head"))) == (module, head)
    assert page.get_attribute("#att-canvas", "data-module") == module


def test_play_advances_the_step_and_the_curves_mark_it(next_word):
    opened, folder = next_word
    page = opened.page
    steps = load_snapshots(folder / SNAPSHOTS_NAME)["steps"].tolist()
    set_training_step(page, 0)
    marker = page.get_attribute("#curves", "data-marker")
    page.click("#play")
    page.wait_for_function("() => document.getElementById('snap-step').value !== '0'", timeout=10000)
    page.wait_for_function(f"() => document.getElementById('snap-step').value === '{len(steps) - 1}'", timeout=20000)
    assert page.inner_text("#play").endswith("play")           # it stops at the last step
    assert page.get_attribute("#curves", "data-step") == str(steps[-1])
    assert page.get_attribute("#curves", "data-marker") != marker
    assert page.inner_text("#snap-label").startswith(f"training step {steps[-1]} ")


def test_the_probes_include_both_orders_and_the_rungs_sit_side_by_side(next_word):
    from transformer.ladder.rungs import RUNGS
    opened, _ = next_word
    page = opened.page
    options = page.locator("#source option").all_inner_texts()
    assert sum("recall:" in o for o in options) == 2 and sum("swap:" in o for o in options) == 2
    assert page.locator("#ladder canvas").count() == len(RUNGS)
    assert page.locator("#ladder .rung-name").all_inner_texts() == [r.name for r in RUNGS]


def test_the_two_sliders_are_labelled_and_look_different(next_word):
    opened, _ = next_word
    page = opened.page
    style = "id => { const s = getComputedStyle(document.getElementById(id)); return [s.accentColor, s.height]; }"
    assert page.evaluate(style, "step") != page.evaluate(style, "snap-step")
    assert page.inner_text(".slider-name.backward").lower() == "backward step"
    assert page.inner_text(".slider-name.training").lower() == "training step"
