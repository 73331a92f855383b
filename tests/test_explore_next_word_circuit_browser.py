"""A next-word page marks its own run's recall circuit, in headless Chromium, on two seeds whose
circuits differ: the heads the measurement (``viz/recall_circuit.py``, run here apart from the
page on the run's snapshots file) finds are framed as binder and reader, the page opens on the
reader and on the recall probe, and the curves carry the binder's and the reader's weights at
every recorded step, beside the accuracy."""
import json

import pytest

from explore_runs import next_word_run
from transformer.files.trained_model import load_model
from transformer.training.snapshots import SNAPSHOTS_NAME
from viz.browser import SKIP_REASON, open_page
from viz.explorer.build import write_explorer
from viz.explorer.next_word import default_sentence
from viz.recall_circuit import recall_circuit

pytestmark = [pytest.mark.skipif(SKIP_REASON is not None, reason=str(SKIP_REASON)), pytest.mark.slow]

LAYER = "decoder.layers.{}.self_attn"


@pytest.fixture(scope="module", params=[0, 2], ids=lambda seed: f"seed{seed}")
def run(request, tmp_path_factory):
    folder = tmp_path_factory.mktemp(f"next-word-seed{request.param}")
    checkpoint = next_word_run(folder, steps=12, every=4, seed=request.param)
    page = folder / "page.html"
    write_explorer(load_model(checkpoint, task="next-word"), str(page), default_sentence(), check=False,
                   snapshots=str(folder / SNAPSHOTS_NAME))
    circuit = recall_circuit(folder / SNAPSHOTS_NAME)
    with open_page(page, width=1280, height=800) as opened:
        yield opened, circuit


def test_the_two_seeds_have_circuits_of_their_own(run):
    """So a page that marked one fixed set of heads would fail on one of them."""
    _, circuit = run
    assert (circuit.binder_heads, circuit.reader_head) in {((0,), 1), ((0, 1), 0)}


def test_it_marks_the_heads_the_measurement_finds(run):
    opened, circuit = run
    page = opened.page
    assert opened.errors == []
    marked = page.evaluate("""() => [...document.querySelectorAll('#grid canvas.cell[data-circuit]')].map(c =>
        [c.dataset.circuit, c.dataset.module, +c.dataset.head])""")
    expected = [["binder", LAYER.format(0), h] for h in circuit.binder_heads] + \
               [["reader", LAYER.format(1), circuit.reader_head]]
    assert sorted(marked) == sorted(expected)
    for part in ("binder", "reader"):          # framed in their own colours, unlike an unmarked head
        colours = page.evaluate(f"""() => [...document.querySelectorAll('#grid canvas.cell')].map(c =>
            [c.dataset.circuit || '', getComputedStyle(c).borderTopColor])""")
        own = {colour for name, colour in colours if name == part}
        assert own and own.isdisjoint(colour for name, colour in colours if name != part)


def test_it_opens_on_the_reader_and_the_recall_probe(run):
    opened, circuit = run
    page = opened.page
    page.reload()
    page.wait_for_selector("body[data-ready=true]", state="attached")
    focused = page.locator("#grid canvas.cell.focused")
    assert (focused.get_attribute("data-module"), int(focused.get_attribute("data-head"))) == \
        (LAYER.format(1), circuit.reader_head)
    assert page.eval_on_selector("#source", "s => s.value") == f"row{circuit.opening_row()}"
    assert "recall:" in page.eval_on_selector("#source", "s => s.options[s.selectedIndex].text")
    note = page.inner_text("#snap-probe")
    assert f"head {circuit.reader_head}" in note and "binder" in note and "reader" in note


def test_the_curves_carry_the_binder_and_the_reader(run):
    opened, circuit = run
    page = opened.page
    data = json.loads(page.eval_on_selector("#explorer-data", "s => s.textContent").replace("<\\/", "</"))
    marks = data["snapshots"]["circuit"]
    assert marks["binder"]["curve"] == pytest.approx(circuit.binding.tolist(), abs=1e-4)
    assert marks["reader"]["curve"] == pytest.approx(circuit.reading.tolist(), abs=1e-4)
    assert len(marks["binder"]["curve"]) == len(data["snapshots"]["steps"])        # the page's clock
    legend = page.inner_text("#curve-legend")
    assert "binder" in legend and "reader" in legend and "recall" in legend
