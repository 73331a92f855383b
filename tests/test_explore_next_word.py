"""next-word-explore: the page of a real (small) next-word run, the ladder's rungs on its sentence,
and one line with exit 2 for whatever it cannot run on."""
import json
import re

import numpy as np
import pytest

from explore_runs import dates_run, next_word_run
from transformer.tasks import language
from transformer.ladder.rungs import RUNGS
from transformer.training.next_word import KINDS
from transformer.commands.explore import next_word_main as main
from viz.explorer.next_word import default_sentence

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return next_word_run(tmp_path_factory.mktemp("next-word-run"), steps=6, every=3)


def page_data(path) -> dict:
    text = open(path, encoding="utf-8").read()
    found = re.search(r'<script type="application/json" id="explorer-data">(.*?)</script>', text, re.S)
    return json.loads(found.group(1).replace("<\\/", "</"))


def test_the_default_sentence_cannot_be_answered_by_the_first_place():
    words = default_sentence().split()
    example = next(e for e in language.Language(0).evaluation_set(per_kind=1) if e.kind == "recall")
    assert words[:-1] == list(example.context[:-1]) and words[-1] != example.context[-1]
    asked = words[-1]                                           # "... where is <name>"
    answer = words[words.index(asked) + 4]                      # "<name> is at the <place>"
    assert answer != words[4]                                   # not the place stated first


def test_it_writes_the_page_of_the_run(checkpoint, tmp_path, capsys):
    out = tmp_path / "page.html"
    assert main(["--checkpoint", checkpoint, "--out", str(out), "--ladder-steps", "2", "--no-check"]) == 0
    printed = capsys.readouterr().out
    assert f"wrote {out}" in printed and "attention snapshots" in printed
    data = page_data(out)
    assert data["input"] == {"kind": "sentence", "text": default_sentence()}
    assert data["step"]["module"] == data["snapshots"]["circuit"]["reader"]["module"]   # where the heatmaps open
    snapshots = data["snapshots"]
    assert snapshots["steps"] == [0, 3, 6] and snapshots["kinds"] == list(KINDS)
    assert len(snapshots["rows"]) == len(KINDS) + 2
    assert len(snapshots["changes"]) == 2 * 2 and snapshots["changes"][0]["change"] >= snapshots["changes"][-1]["change"]
    assert [r["name"] for r in data["ladder"]["rungs"]] == [r.name for r in RUNGS]
    assert data["ladder"]["steps"] == 2 and "live" not in data


def test_each_rung_weighs_only_the_words_so_far():
    from viz.explorer.ladder_rungs import ladder_data, train_rungs
    words = default_sentence().split()
    shown = ladder_data(train_rungs(2), words, 2)
    assert shown["tokens"] == ["<bos>"] + words
    for rung in shown["rungs"]:
        weights = np.array(rung["weights"])
        assert weights.shape == (len(words) + 1,) * 2, rung["name"]
        np.testing.assert_allclose(weights.sum(axis=1), 1, atol=1e-3, err_msg=rung["name"])
        assert np.all(np.triu(weights, 1) == 0), rung["name"]
        assert rung["predicted"] in language.VOCAB and 0 < rung["probability"] <= 1


@pytest.mark.parametrize("arguments, message", [
    (["--sentence", "once upon a"], "'once' is not a word of the language"),
    (["--sentence", " ".join(["ann"] * 40)], "this model reads at most"),
    (["--layer", "5"], "layer 5 does not exist"),
    (["--port", "70000", "--serve"], "--port must be between 0 and 65535"),
])
def test_bad_arguments_get_one_line(checkpoint, tmp_path, capsys, arguments, message):
    assert main(["--checkpoint", checkpoint, "--out", str(tmp_path / "p.html"), "--ladder-steps", "0",
                 *arguments]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err


def test_a_dates_checkpoint_gets_one_line(tmp_path, capsys):
    """(No run at all draws an untrained model: test_explore_next_word_start.py.)"""
    checkpoint = dates_run(tmp_path / "dates", steps=1, every=1)
    assert main(["--checkpoint", checkpoint, "--out", str(tmp_path / "p.html"), "--ladder-steps", "0"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "holds a dates model" in err
