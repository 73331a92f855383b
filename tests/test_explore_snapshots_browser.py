"""dates-explore's training-step slider in headless Chromium: over a run's attention snapshots,
each position draws the weights recorded at that step (read back from the canvas's pixels
and compared with the snapshots file), with the step and its loss in the label."""
import numpy as np
import pytest

from viz.explorer.training_steps import snapshot_probe

from transformer.models.config import ModelConfig
from transformer.training.snapshots import SNAPSHOTS_NAME, load_snapshots
from transformer.training.dates import DateTrainer
from transformer.training.trainer import TrainConfig
from viz.browser import SKIP_REASON, open_page
from viz.explorer.build import write_explorer

pytestmark = [pytest.mark.skipif(SKIP_REASON is not None, reason=str(SKIP_REASON)), pytest.mark.slow]
MODULE = "decoder.layers.0.cross_attn"


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("run")
    config = ModelConfig(d_model=16, num_heads=2, num_encoder_layers=1, num_decoder_layers=1, d_ff=32)
    trainer = DateTrainer(config, TrainConfig(steps=12, snapshot_every=4, batch_size=8, lr=1e-2, warmup=1,
                                          schedule="constant", target_accuracy=0), out_dir=str(folder))
    trainer.run(progress=False)
    page = folder / "explorer.html"
    write_explorer(trainer.model, str(page), "1845-01-05", "cross", 0, check=False,
                   snapshots=str(folder / SNAPSHOTS_NAME))
    with open_page(page) as opened:
        yield opened, load_snapshots(folder / SNAPSHOTS_NAME, trainer.model, snapshot_probe(trainer.model))


def drawn_weights(page):
    """The heatmap's cells read back from the canvas: weight = 1 - red / 255 (white 0, blue 1)."""
    return page.evaluate("""() => {
        const c = document.getElementById('att-canvas'), rows = +c.dataset.rows, cols = +c.dataset.cols;
        const cell = c.width / cols, pixels = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
        const out = [];
        for (let q = 0; q < rows; q++) { const row = [];
          for (let k = 0; k < cols; k++) {
            const x = Math.floor((k + 0.5) * cell), y = Math.floor((q + 0.5) * cell);
            row.push(1 - pixels[(y * c.width + x) * 4] / 255); }
          out.push(row); }
        return out; }""")


def move_slider(page, index):
    page.evaluate("i => { const s = document.getElementById('snap-step'); s.value = i; "
                  "s.dispatchEvent(new Event('input')); }", index)


def test_the_slider_shows_each_recorded_step(run):
    opened, snapshots = run
    page = opened.page
    assert opened.errors == []
    steps = snapshots["steps"].tolist()
    assert steps == [0, 4, 8, 12]
    slider = page.locator("#snap-step")
    assert slider.is_visible() and slider.get_attribute("max") == str(len(steps) - 1)
    module = [str(m) for m in snapshots["modules"]].index(MODULE)
    page.select_option("#att-module", label="cross, layer 0 (the graph's)")
    page.select_option("#att-head", "1")
    assert slider.input_value() == str(len(steps) - 1)            # it opens on the last step, the checkpoint's
    shown = []
    for index in (0, 2, 1, 3):
        move_slider(page, index)
        label = page.inner_text("#snap-label")
        assert label.startswith(f"training step {steps[index]} (0–12)")
        if index:
            assert f"loss {snapshots['loss'][index]:.4f}" in label
        assert page.get_attribute("#att-canvas", "data-step") == str(steps[index])
        drawn = np.array(drawn_weights(page))
        np.testing.assert_allclose(drawn, snapshots["weights"][module][index, 0, 1], atol=1 / 255 + 1e-6)
        shown.append(drawn)
    assert not np.allclose(shown[0], shown[3], atol=0.02)         # the pattern changed while training


def test_arrow_keys_move_through_the_steps(run):
    opened, snapshots = run
    page = opened.page
    move_slider(page, 3)
    page.locator("#title").click()                                 # no control has the focus
    page.keyboard.press("ArrowDown")
    assert page.get_attribute("#att-canvas", "data-step") == "8"
    page.keyboard.press("ArrowDown")
    page.keyboard.press("ArrowUp")
    assert page.get_attribute("#att-canvas", "data-step") == "8"
    page.locator("#snap-step").focus()                             # a focused slider keeps its own arrows
    page.keyboard.press("ArrowLeft")
    assert page.get_attribute("#att-canvas", "data-step") == "4"
    assert page.inner_text("#snap-label").startswith("training step 4 ")

