"""viz.walkthrough: its tables (tokens -> ... -> softmax), checked against a direct numpy computation."""
import math

import numpy as np
import pytest

from viz.inputs import load_or_create_model
from transformer.commands.explain import main as main
from viz.walkthrough import compute_walkthrough, format_walkthrough

SEED_IDS = [65, 1, 6, 7, 6, 62, 1, 1, 62, 3, 0, 66]


@pytest.fixture(scope="module")
def model():
    return load_or_create_model(seed=0, d_model=16)          # the walkthrough's width; 4 heads of 4


@pytest.fixture(scope="module")
def steps(model):
    return compute_walkthrough(model, "1676-11-30", head=1)


def numpy_softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def test_token_ids_are_the_seeds(steps):
    assert steps.ids.tolist() == SEED_IDS
    assert steps.tokens[0] == "<sos>" and steps.tokens[-1] == "<eos>" and steps.tokens[1:4] == ["1", "6", "7"]


def test_embedding_scaling_and_positions_match_numpy(model, steps):
    rows = model.src_embed.weight.data[SEED_IDS].astype(np.float64)
    np.testing.assert_allclose(steps.embedding, rows, rtol=1e-6)
    np.testing.assert_allclose(steps.scaled, rows * 4.0, rtol=1e-6)             # sqrt(16)
    pos, i = np.arange(12)[:, None], np.arange(8)[None, :]
    angle = pos / 10000 ** (2 * i / 16)
    pe = np.empty((12, 16))
    pe[:, 0::2], pe[:, 1::2] = np.sin(angle), np.cos(angle)
    np.testing.assert_allclose(steps.positional, pe, atol=1e-6)
    assert round(float(steps.positional[3, 0]), 4) == 0.1411                    # PE(3, 0) = sin 3
    np.testing.assert_allclose(steps.x, rows * 4.0 + pe, atol=1e-5)


def test_head_projections_and_attention_match_numpy(model, steps):
    attention = model.encoder.layers[0].self_attn
    lo, hi = 4, 8                                                                # head 1 of 4
    x = steps.x.astype(np.float64)
    qkv = x @ attention.w_qkv.weight.data + attention.w_qkv.bias.data           # [Q | K | V]
    d = attention.d_model
    q, k, v = qkv[:, lo:hi], qkv[:, d + lo:d + hi], qkv[:, 2 * d + lo:2 * d + hi]
    for ours, expected in ((steps.q, q), (steps.k, k), (steps.v, v)):
        np.testing.assert_allclose(ours, expected, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(steps.scores, q @ k.T, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(steps.scaled_scores, q @ k.T / math.sqrt(4), rtol=1e-4, atol=1e-4)
    weights = numpy_softmax(q @ k.T / 2.0)
    np.testing.assert_allclose(steps.weights, weights, atol=1e-5)
    np.testing.assert_allclose(steps.output, weights @ v, atol=1e-5)
    assert steps.model_weights_diff < 1e-6


def test_tables_print_labels_and_four_decimals(steps):
    text = format_walkthrough(steps)
    assert "[65, 1, 6, 7, 6, 62, 1, 1, 62, 3, 0, 66]" in text
    assert "× √d_model = × 4.0000" in text
    pe_row_3 = next(line for line in text.splitlines() if line.split()[:3] == ["3", "7", "0.1411"])
    assert len(pe_row_3.split()) == 2 + 16
    weights_table = text.split("attention weights")[1]
    header = next(line for line in weights_table.splitlines() if line.startswith("pos"))
    assert header.split()[:3] == ["pos", "token", "0:<sos>"] and header.split()[-1] == "11:<eos>"
    assert f"{steps.weights[0, 0]:.4f}" in weights_table


def test_markdown_mode_prints_real_markdown_tables(steps):
    text = format_walkthrough(steps, markdown=True)
    assert "### Q · Kᵀ" in text and "`1676-11-30` ->" in text
    section = text.split("### Token embeddings")[1].split("###")[0]
    table = [line for line in section.splitlines() if line.startswith("|")]
    assert len(table) == 2 + 12 and set(table[1]) <= set("|-")
    assert all(line.count("|") == 2 + 16 + 1 for line in table)


def test_wide_models_show_the_first_dims_and_say_so():
    wide = load_or_create_model(seed=0, d_model=32, heads=1, layers=1)
    text = format_walkthrough(compute_walkthrough(wide, "1676-11-30"), max_dims=8)
    assert "(first 8 of 32 dims; --max-dims to change)" in text
    assert "columns 0..31 of w_qkv's output" in text                             # one head: all of Q
    assert "columns 32..63 of w_qkv's output" in text                            # ... and of K


def test_cli(capsys):
    assert main(["1676-11-30", "--d-model", "16", "--heads", "1"]) == 0
    out = capsys.readouterr().out
    assert "d_model 16, d_k 16" in out and "11:<eos>" in out
    assert main(["1676-11-30", "--d-model", "16", "--head", "9"]) == 2
    assert "head 9 does not exist" in capsys.readouterr().err
    assert main(["16-11-30"]) == 2
