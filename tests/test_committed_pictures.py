"""Every picture README.md and docs/*.md show is what today's code draws.

``docs/images/facts.json`` (written by ``examples/readme_picture_facts.py``, which
``make_readme_images.py`` runs last) holds, per picture, what a reader takes from it: its texts,
the numbers printed on it, legends, axis ranges and where the data lies, a graph's labels
(``viz/picture_facts.py``), and the SHA-256 of the picture they were read from. Here each picture
is drawn again by the functions its command calls and its facts compared: a change to the code that
would draw a committed picture differently fails until the picture is drawn again and committed.

The date and next-word runs behind some pictures stop at another step with another vector width
(docs/dates.md): those are compared only where the floats are rounded as on the machine that drew
them (``facts.json``'s ``arithmetic``), and skipped with the reason elsewhere.
"""
import json
import os
import re

import numpy as np
import pytest

from transformer.parallel.threads import arithmetic
from viz.picture_facts import file_sha256, read_facts

from examples_loader import load_example

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
IMAGES = os.path.join(REPO, "docs", "images")
PAGES = ["README.md"] + sorted(os.path.join("docs", name) for name in os.listdir(os.path.join(REPO, "docs"))
                               if name.endswith(".md"))
REFRESH = ("draw it again (python examples/make_readme_images.py --seed 0) "
           "or record it (python examples/readme_picture_facts.py)")


def load_script():
    return load_example("readme_picture_facts")


def committed() -> dict:
    return read_facts(os.path.join(IMAGES, "facts.json"))


def pictures_the_pages_show() -> set:
    found = set()
    for page in PAGES:
        text = open(os.path.join(REPO, page), encoding="utf-8").read()
        found |= set(re.findall(r"images/([\w.-]+\.(?:png|svg|gif))", text))
    return found


def as_stored(facts):
    """Facts as they read back from JSON (tuples become lists), without the picture's hash."""
    return json.loads(json.dumps({key: value for key, value in facts.items() if key != "sha256"}))


def assert_drawn_today(name, fresh):
    recorded = committed()["pictures"][name]
    assert as_stored(fresh) == as_stored(recorded), f"today's code draws {name} differently: {REFRESH}"


def test_the_pages_show_the_pictures_the_facts_cover():
    shown = pictures_the_pages_show()
    assert {"attention_step_mask.png", "attention_heatmap_cross.png", "backward_animation.gif"} <= shown
    assert shown <= set(committed()["pictures"]), f"no facts for {shown - set(committed()['pictures'])}: {REFRESH}"


@pytest.mark.parametrize("name", sorted(read_facts(os.path.join(IMAGES, "facts.json"))["pictures"]))
def test_the_facts_were_read_from_the_committed_picture(name):
    recorded = committed()["pictures"][name]
    assert recorded["sha256"] == file_sha256(os.path.join(IMAGES, name)), (
        f"docs/images/{name} was drawn again but its facts were not recorded: {REFRESH}")


def test_only_the_named_pictures_go_unchecked():
    script = load_script()
    unchecked = {name: facts["not recomputed"] for name, facts in committed()["pictures"].items()
                 if "not recomputed" in facts}
    assert unchecked == script.NOT_RECOMPUTED


@pytest.mark.parametrize("name", ["attention_ladder.png", "backward_animation.gif"])
def test_pictures_of_committed_data_are_what_todays_code_draws(name):
    assert_drawn_today(name, load_script().machine_independent_facts()[name])


def test_the_mask_picture_shows_the_convention_and_gradients_of_todays_code():
    from viz.details import convention
    labels = " ".join(committed()["pictures"]["attention_step_mask.png"]["labels"])
    assert convention("mask", np.zeros((1, 1), bool))[1] in labels
    assert "‖grad‖" in labels or "∇" in labels


def test_the_heatmaps_label_each_decoder_row_by_what_it_writes():
    figure = committed()["pictures"]["attention_heatmap_cross.png"]["figure"]
    rows = next(ax["yticks"] for ax in figure if ax.get("yticks"))
    assert rows[0] == "<sos> → J" and rows[1] == "J → a"


def test_the_recall_circuit_picture_frames_the_circuits_heads():
    """At both steps shown the page framed the binder's layer-0 heads and the reader's layer-1 head
    that the circuit's measure finds (the facts), and no other: a picture of an explorer that
    marks no head, or other heads, fails."""
    import sys
    sys.path.insert(0, os.path.join(REPO, "examples"))
    from recall_circuit_picture import picture_marks
    facts = committed()["pictures"]["recall_circuit.png"]
    marks = picture_marks(os.path.join(IMAGES, "recall_circuit.png"))
    assert len(marks) == len(facts["steps"]), f"recall_circuit.png carries no marks of the circuit's heads: {REFRESH}"
    for shown in marks:
        assert [head for module, head in shown["binder"] if ".0." in module] == facts["binder heads"] != [], shown
        assert [head for module, head in shown["reader"] if ".1." in module] == [facts["reader head"]], shown
        assert len(shown["binder"]) + len(shown["reader"]) == len(facts["binder heads"]) + 1, shown


def test_the_blend_heads_picture_carries_the_labels_recorded_for_it():
    """Its titles travel in the PNG (viz/blend_heads.py): they are the facts, from the facts' machine."""
    from viz.blend_heads import picture_labels
    labels, made_with = picture_labels(os.path.join(IMAGES, "blend_heads.png"))
    assert made_with == committed()["arithmetic"], f"blend_heads.png was drawn with {made_with}: {REFRESH}"
    assert labels == committed()["pictures"]["blend_heads.png"]["labels"], REFRESH


@pytest.fixture(scope="module")
def seed_0_runs(tmp_path_factory):
    """Seed 0's date run and next-word run, trained as make_readme_images.py trains them."""
    if committed()["arithmetic"] != arithmetic():
        pytest.skip(f"the committed pictures' runs had their floats rounded by {committed()['arithmetic']}; this "
                    f"machine's by {arithmetic()}: they stop at other steps here (docs/dates.md)")
    import shlex

    from transformer.commands.dates import train_main
    from transformer.commands.next_word import train_main as next_word_train
    folder = tmp_path_factory.mktemp("readme-runs")
    dates, next_word = str(folder / "dates"), str(folder / "next-word")
    assert train_main(shlex.split(f"--seed 0 --eval-every 25 --no-progress --out {dates}")) == 0
    assert next_word_train(shlex.split(f"--seed 0 --snapshot-every 10 --no-progress --out {next_word}")) == 0
    return dates, next_word


@pytest.mark.slow
def test_pictures_of_seed_0s_runs_are_what_todays_code_draws(seed_0_runs):
    script = load_script()
    dates, next_word = seed_0_runs
    fresh = script.date_model_facts(os.path.join(dates, "model.npz"))
    fresh["training_curves.png"] = script.training_curves_facts(os.path.join(dates, "train_log.jsonl"))
    fresh["recall_circuit.png"] = script.recall_circuit_facts(os.path.join(next_word, "model.npz"))
    fresh["blend_heads.png"] = script.blend_heads_facts()
    for name, facts in fresh.items():
        assert_drawn_today(name, facts)
