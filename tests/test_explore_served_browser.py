"""The explorer in headless Chromium, one browser per test (the training view's own tests share one
in test_explore_training_browser.py): the date page opens on the head whose weights changed most,
computed from the snapshots file apart from the page; on the served page a typed sentence changes
the prediction, the graph and every head's weights, and bad input shows its message."""
import pytest

from explore_runs import dates_run, next_word_run, served
from test_explore_training_browser import grid_pixels, most_changed
from transformer.training.snapshots import SNAPSHOTS_NAME
from transformer.files.trained_model import load_model
from viz.browser import SKIP_REASON, open_page
from viz.explorer.cli import write_explorer

pytestmark = [pytest.mark.skipif(SKIP_REASON is not None, reason=str(SKIP_REASON)), pytest.mark.slow]


def test_the_date_page_opens_on_the_head_that_changed_most(tmp_path):
    checkpoint = dates_run(tmp_path, steps=12, every=4)
    module, head = most_changed(tmp_path / SNAPSHOTS_NAME)
    page_path = tmp_path / "page.html"
    write_explorer(load_model(checkpoint), str(page_path), "1845-01-05", "decoder-self", 0, check=False,
                   snapshots=str(tmp_path / SNAPSHOTS_NAME))
    with open_page(page_path, width=1280, height=800) as opened:
        focused = opened.page.locator("#grid canvas.cell.focused")
        assert (focused.get_attribute("data-module"), int(focused.get_attribute("data-head"))) == (module, head)
        assert opened.page.locator("#grid canvas.cell").count() == 3 * 2
        opened.page.select_option("#att-module", label="cross, layer 0")
        assert opened.page.locator("#shifted").is_visible()      # a decoder row reads the shifted answer


def test_the_served_page_redraws_a_typed_sentence(tmp_path):
    checkpoint = next_word_run(tmp_path, steps=12, every=4)
    with served("--checkpoint", checkpoint, "--ladder-steps", "2", "--no-check") as (_, url):
        with open_page(url, width=1280, height=800) as opened:
            page = opened.page
            assert page.locator("#ask").is_visible()
            page.select_option("#source", "input")
            before = {"prediction": page.inner_text("#prediction"), "grid": grid_pixels(page)}
            page.fill("#ask-text", "ida went to the butcher and bought a")
            page.click("#ask-run")
            page.wait_for_selector("body[data-loads='1']", state="attached", timeout=60000)
            after = {"prediction": page.inner_text("#prediction"), "grid": grid_pixels(page)}
            assert page.inner_text("#title").endswith("on ida went to the butcher and bought a")
            assert after["prediction"] != before["prediction"]
            assert all(after["grid"][k] != before["grid"][k] for k in before["grid"])
            assert page.locator("g.node.tensor").count() > 20                 # the graph is drawn again
            page.fill("#ask-text", "once upon a time")
            page.click("#ask-run")
            page.wait_for_selector("#ask-status[data-error=true]", state="attached", timeout=60000)
            assert "'once' is not a word of the language" in page.inner_text("#ask-status")
            assert page.inner_text("#prediction") == after["prediction"]      # the last good input stays
            assert opened.errors == [] or all("400" in e for e in opened.errors)
