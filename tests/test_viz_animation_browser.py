"""The backward animation's HTML page in a real browser (headless Chromium): everything fits one
screen, so the slider and the highlighted op are in view together, and "play" stops at the end."""
import shutil

import pytest

from viz.browser import SKIP_REASON, open_page
from viz.backward_animation import attention_root, backward_frames
from viz.animation_output import write_animation
from viz.inputs import load_or_create_model

pytestmark = [pytest.mark.skipif(SKIP_REASON is not None, reason=str(SKIP_REASON)),
              pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed")]


@pytest.fixture(scope="module")
def animation(tmp_path_factory):
    model = load_or_create_model(None, seed=0, d_model=8, heads=2, layers=1)
    root, options, title = attention_root(model, "1845-01-05", "decoder-self", 0, untrained=True)
    frames = backward_frames(root, title=title, **options)
    stem = tmp_path_factory.mktemp("animation") / "backward"
    write_animation(frames, str(stem), formats=("html",), frame_ms=40)
    with open_page(f"{stem}.html", width=1280, height=800) as opened:
        yield opened, len(frames)


def test_slider_and_highlighted_op_share_one_screen(animation):
    opened, count = animation
    page = opened.page
    assert page.evaluate("document.documentElement.scrollHeight") <= page.viewport_size["height"]
    for number in range(1, count + 1):
        if number > 1:
            page.keyboard.press("ArrowRight")
        assert page.text_content("#number") == f"{number} / {count}"
        op = page.locator('.frame.shown [fill="#ff8787"]').first.bounding_box()
        slider = page.locator("#step").bounding_box()
        for box in (op, slider):
            assert 0 <= box["y"] and box["y"] + box["height"] <= page.viewport_size["height"], number
            assert 0 <= box["x"] and box["x"] + box["width"] <= page.viewport_size["width"], number
    assert opened.errors == []


def test_play_stops_its_timer_on_the_last_frame(animation):
    opened, count = animation
    page = opened.page
    page.click("#play")                       # from the last frame (the test above ends there): restarts at 1
    assert page.text_content("#play") == "pause"
    page.wait_for_function(f"document.getElementById('number').textContent == '{count} / {count}'", timeout=10000)
    page.wait_for_function("document.getElementById('play').textContent == 'play'", timeout=2000)
    assert page.evaluate("timer") is None
    page.wait_for_timeout(200)
    assert page.text_content("#number") == f"{count} / {count}" and page.text_content("#play") == "play"
    assert opened.errors == []
