"""dates-explore without a browser: the page's data (source lines, saved arrays, gradient arrivals,
the mask's convention) and the command line (one file, its size, one-line errors)."""
import json
import re
from pathlib import Path

import numpy as np
import pytest

from transformer.models.attention import causal_mask
from transformer.commands.explore import dates_main as main
from viz.explorer.build import build_page_data
from viz.explorer.step import explore_step
from viz.inputs import load_or_create_model


@pytest.fixture(scope="module")
def model():
    return load_or_create_model(None, seed=0)


@pytest.fixture(scope="module")
def record(model):
    return explore_step(model, "1845-01-05", "decoder-self", 0)


def test_every_op_knows_the_source_line_that_created_it(record):
    ops = record.to_json()["ops"]
    by_name = {op["name"]: op for op in ops}
    assert by_name["Softmax"]["source"].startswith("transformer/models/attention.py:")
    assert "softmax" in by_name["Softmax"]["code"]
    assert "masked_fill" in by_name["MaskedFill"]["code"]
    assert all(op["source"] for op in ops)
    path, line = by_name["Softmax"]["defined_at"].rsplit(":", 1)
    source = (Path(__file__).resolve().parents[1] / path).read_text(encoding="utf-8")
    assert path.startswith("minigrad/") and "class Softmax" in source.splitlines()[int(line) - 1]
    for op in ops:
        path, line = op["source"].rsplit(":", 1)
        assert line.isdigit() and not path.startswith("/"), op["source"]


def test_saved_arrays_name_the_tensor_they_are(record):
    ops = {op["name"]: op for op in record.to_json()["ops"]}
    softmax = {s["name"]: s for s in ops["Softmax"]["saved"]}
    assert softmax["out"]["same_as"] == "its output"          # softmax's backward uses its output
    linear = {s["name"]: s for s in ops["Linear"]["saved"]}
    assert linear["x"]["same_as"] == "input 0" and linear["weight"]["same_as"] == "input 1"


def test_arrivals_follow_the_backward_order_and_add_up(record):
    data = record.to_json()
    qkv = next(t for t in data["tensors"] if t["name"] == "qkv")
    assert len(qkv["arrivals"]) == 3 and qkv["arrivals"] == sorted(qkv["arrivals"])   # Q, K and V
    assert len(qkv["parts"]) == 3
    total = record.totals[qkv["id"]]
    parts = [part for _, part in record.arrivals[qkv["id"]]]
    np.testing.assert_allclose(total, parts[0] + parts[1] + parts[2], rtol=1e-6, atol=1e-7)
    assert len(data["steps"]) == len(data["ops"])
    for number, step in enumerate(data["steps"], start=1):         # an op runs after its output's gradient arrived
        output = data["tensors"][data["ops"][step["op"]]["output"]]
        assert output["arrivals"] and max(output["arrivals"]) <= number


def test_the_model_keeps_its_own_gradients(model):
    weight = dict(model.named_parameters())["decoder.layers.0.self_attn.w_o.weight"]
    marker = np.full(weight.shape, 7.0, dtype=np.float32)
    weight.grad = marker
    explore_step(model, "1845-01-05", "decoder-self", 0)
    assert weight.grad is marker


def test_masks_are_shown_as_true_may_attend(model, record):
    mask_op = next(op for op in record.to_json()["ops"] if op.get("mask"))
    allowed = np.array(mask_op["mask"]["may_attend"], dtype=bool)
    assert (allowed == causal_mask(len(allowed))).all()      # the reference answer has no padding
    maps = build_page_data(model, "1845-01-05", "decoder-self", 0, check=False)["attention"]
    kinds = [(m["kind"], m["layer"]) for m in maps]
    assert kinds == [("encoder-self", 0), ("encoder-self", 1), ("decoder-self", 0), ("decoder-self", 1),
                     ("cross", 0), ("cross", 1)]
    decoder = maps[2]
    assert (np.array(decoder["may_attend"], dtype=bool) == causal_mask(len(decoder["queries"]))).all()
    weights = np.array(decoder["weights"])
    assert weights.shape == (4, 16, 16)
    assert np.allclose(weights.sum(-1), 1, atol=1e-5) and (weights[:, ~causal_mask(16)] == 0).all()


def test_cli_writes_one_self_contained_page(tmp_path, capsys):
    out = tmp_path / "page.html"
    assert main(["--untrained", "--kind", "cross", "--layer", "1", "--no-check", "--out", str(out)]) == 0
    text = out.read_text(encoding="utf-8")
    assert "decoder.layers.1.cross_attn on 1845-01-05 (untrained model)</title>" in text
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", text)      # nothing fetched at view time
    assert "sourceMappingURL" not in text
    assert out.stat().st_size < 5e6
    data = json.loads(re.search(r'<script type="application/json" id="explorer-data">(.*?)</script>', text,
                                re.S).group(1).replace("<\\/", "</"))
    assert data["step"]["module"] == "decoder.layers.1.cross_attn"
    assert f"wrote {out}" in capsys.readouterr().out


def test_the_page_needs_no_graphviz(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))          # no `dot` anywhere: the browser lays the graph out
    out = tmp_path / "page.html"
    assert main(["--untrained", "--no-check", "--out", str(out)]) == 0 and out.stat().st_size > 0


@pytest.mark.parametrize("argv, message", [
    (["--layer", "5"], "layer 5 does not exist"),
    (["--date", "2023-02-30"], "is not a valid date"),
])
def test_cli_errors_are_one_line(tmp_path, capsys, argv, message):
    assert main(argv + ["--untrained", "--out", str(tmp_path / "x.html")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("error: ") and message in err[-1]
    assert not (tmp_path / "x.html").exists()


def test_the_check_agrees_with_backward_and_catches_a_wrong_gradient(model):
    from viz.explorer.check import check_gradients

    record = explore_step(model, "1845-01-05", "cross", 0)
    checked = check_gradients(model, "1845-01-05", "cross", 0, record)
    names = sorted(record.name_of(record.tensors[i]) for i in checked)
    assert names == sorted(["decoder.layers.0.cross_attn." + p for p in
                            ("w_q.weight", "w_q.bias", "w_kv.weight", "w_kv.bias", "w_o.weight", "w_o.bias")]
                           + ["x (query)", "memory (encoder output)"])
    assert all(result["ok"] for result in checked.values())
    weight = record.tensor_named("decoder.layers.0.cross_attn.w_q.weight")
    index = record.index(weight)
    record.totals[index] = record.totals[index] * 1.01        # a gradient 1% off
    assert not check_gradients(model, "1845-01-05", "cross", 0, record)[index]["ok"]
