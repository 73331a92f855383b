"""The step's graph opens where the heatmaps do: with a run's attention snapshots and no --kind or
--layer, dates-explore draws the step of the module holding the head that changed most over
training (computed here from the snapshots file itself) and next-word-explore the layer of its
recall circuit's reader; a --kind or --layer given wins, and without snapshots the defaults stand."""
import json
import re

import numpy as np
import pytest

from explore_runs import dates_run, next_word_run
from transformer.training.snapshots import SNAPSHOTS_NAME, load_snapshots
from transformer.commands.explore import dates_main as dates_explore
from transformer.commands.explore import next_word_main as next_word_explore


def page_data(path) -> dict:
    text = open(path, encoding="utf-8").read()
    found = re.search(r'<script type="application/json" id="explorer-data">(.*?)</script>', text, re.S)
    return json.loads(found.group(1).replace("<\\/", "</"))


def most_changed_module(checkpoint) -> str:
    """The module of the head whose weights moved most, first recorded step to last, over each probe
    row's real tokens (not padding), averaged over the rows."""
    snapshots = load_snapshots(checkpoint.replace("model.npz", SNAPSHOTS_NAME))
    best, module = -1.0, None
    for name, weights, queries, keys in zip(snapshots["modules"], snapshots["weights"], snapshots["queries"],
                                            snapshots["keys"]):
        moved = np.mean([np.abs(weights[-1, p, :, :q, :k] - weights[0, p, :, :q, :k]).mean(axis=(1, 2))
                         for p, (q, k) in enumerate(zip((queries != "<pad>").sum(1), (keys != "<pad>").sum(1)))],
                        axis=0)
        if moved.max() > best:
            best, module = moved.max(), str(name)
    return module


@pytest.fixture(scope="module")
def dates_checkpoint(tmp_path_factory):
    return dates_run(tmp_path_factory.mktemp("dates-run"))


@pytest.fixture(scope="module")
def next_word_checkpoint(tmp_path_factory):
    return next_word_run(tmp_path_factory.mktemp("next-word-run"))


def test_dates_explore_draws_the_step_of_the_most_changed_head(dates_checkpoint, tmp_path, capsys):
    out = tmp_path / "page.html"
    assert dates_explore(["--checkpoint", dates_checkpoint, "--no-check", "--out", str(out)]) == 0
    expected = most_changed_module(dates_checkpoint)
    data = page_data(out)
    assert data["step"]["module"] == expected == data["snapshots"]["changes"][0]["module"]
    assert expected != "decoder.layers.0.self_attn", "this run cannot tell the choice from the old default"
    assert f"the step's graph: {expected}" in capsys.readouterr().out


@pytest.mark.parametrize("arguments, module", [
    (["--kind", "decoder-self"], "decoder.layers.0.self_attn"),
    (["--kind", "cross", "--layer", "0"], "decoder.layers.0.cross_attn"),
    (["--layer", "0"], "decoder.layers.0.self_attn"),
])
def test_a_kind_or_layer_given_wins(dates_checkpoint, tmp_path, capsys, arguments, module):
    out = tmp_path / "page.html"
    assert dates_explore(["--checkpoint", dates_checkpoint, "--no-check", "--out", str(out), *arguments]) == 0
    assert page_data(out)["step"]["module"] == module
    assert "the step's graph" not in capsys.readouterr().out


def test_without_snapshots_the_default_stands(tmp_path):
    out = tmp_path / "page.html"
    assert dates_explore(["--untrained", "--no-check", "--out", str(out)]) == 0
    assert page_data(out)["step"]["module"] == "decoder.layers.0.self_attn"


def test_next_word_explore_draws_the_layer_of_the_recall_circuits_reader(next_word_checkpoint, tmp_path):
    """Where a next-word page's heatmaps open (test_explore_next_word_circuit_browser.py)."""
    out = tmp_path / "page.html"
    common = ["--checkpoint", next_word_checkpoint, "--no-check", "--ladder-steps", "0"]
    assert next_word_explore(common + ["--out", str(out)]) == 0
    expected = "decoder.layers.1.self_attn"                 # the reader reads layer 0's binding: layer 1
    assert page_data(out)["step"]["module"] == expected == page_data(out)["snapshots"]["circuit"]["reader"]["module"]
    other = 1 - int(expected.split(".")[2])                  # the other of the two layers
    assert next_word_explore(common + ["--out", str(out), "--layer", str(other), "--force"]) == 0
    assert page_data(out)["step"]["module"] == f"decoder.layers.{other}.self_attn"
