"""dates-export: the weights under PyTorch's names, read back with safetensors' numpy API.

Without importing torch, the exported arrays are checked by running them the way
PyTorch's layers do (``in_proj`` weights as (out, in), q/k/v stacked, post-norm layers,
boolean masks with True = masked out), in plain numpy: the logits must equal minigrad's.
"""
import json
import math

import numpy as np
import pytest
from safetensors.numpy import load_file

import minigrad
from transformer.files.checkpoint import save_checkpoint
from transformer.models.config import ModelConfig
from transformer.tasks.dates import PAD, DateDataset
from transformer.commands.export import export_weights, main, torch_names
from transformer.models.encoder_decoder import Transformer
from transformer.models.decoder_only import sinusoidal_encoding


def small_model(positional="sinusoidal", layers=2):
    minigrad.manual_seed(3)
    return Transformer(ModelConfig(d_model=16, num_heads=4, num_encoder_layers=layers, num_decoder_layers=layers,
                                   d_ff=24, positional=positional)).eval()


def expected_shapes(config):
    d, f, v = config.d_model, config.d_ff, config.vocab_size
    shapes = {"src_embed.weight": (v, d), "tgt_embed.weight": (v, d), "output.weight": (v, d), "output.bias": (v,)}
    if config.positional == "learned":
        shapes.update({"src_positions.weight": (config.max_len, d), "tgt_positions.weight": (config.max_len, d)})
    for stack, count, attentions, norms in (("encoder", config.num_encoder_layers, ["self_attn"], 2),
                                            ("decoder", config.num_decoder_layers, ["self_attn", "multihead_attn"], 3)):
        for i in range(count):
            layer = f"{stack}.layers.{i}"
            for attention in attentions:
                shapes.update({f"{layer}.{attention}.in_proj_weight": (3 * d, d),
                               f"{layer}.{attention}.in_proj_bias": (3 * d,),
                               f"{layer}.{attention}.out_proj.weight": (d, d),
                               f"{layer}.{attention}.out_proj.bias": (d,)})
            shapes.update({f"{layer}.linear1.weight": (f, d), f"{layer}.linear1.bias": (f,),
                           f"{layer}.linear2.weight": (d, f), f"{layer}.linear2.bias": (d,)})
            for n in range(1, norms + 1):
                shapes.update({f"{layer}.norm{n}.weight": (d,), f"{layer}.norm{n}.bias": (d,)})
    return shapes


# ------------------------------------------- PyTorch's layers, in numpy, from the exported arrays
def layer_norm(x, w, prefix):
    mean, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + 1e-5) * w[f"{prefix}.weight"] + w[f"{prefix}.bias"]


def multihead_attention(query, key_value, w, prefix, heads, masked_out):
    """nn.MultiheadAttention: in_proj rows are [W_q; W_k; W_v] (out, in); masked_out True = ignore."""
    d = query.shape[-1]
    weight, bias = w[f"{prefix}.in_proj_weight"], w[f"{prefix}.in_proj_bias"]
    q = query @ weight[:d].T + bias[:d]
    k = key_value @ weight[d:2 * d].T + bias[d:2 * d]
    v = key_value @ weight[2 * d:].T + bias[2 * d:]

    def split(x):
        return x.reshape(x.shape[0], x.shape[1], heads, d // heads).transpose(0, 2, 1, 3)

    scores = split(q) @ split(k).swapaxes(-1, -2) / math.sqrt(d // heads)
    scores = np.where(masked_out, -np.inf, scores)
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    out = (weights @ split(v)).transpose(0, 2, 1, 3).reshape(query.shape)
    return out @ w[f"{prefix}.out_proj.weight"].T + w[f"{prefix}.out_proj.bias"]


def feed_forward(x, w, layer):
    hidden = np.maximum(x @ w[f"{layer}.linear1.weight"].T + w[f"{layer}.linear1.bias"], 0)
    return hidden @ w[f"{layer}.linear2.weight"].T + w[f"{layer}.linear2.bias"]


def torch_layout_logits(w, config, src, tgt_in):
    w = {name: value.astype(np.float64) for name, value in w.items()}
    d, heads = config.d_model, config.num_heads

    def embed(ids, side):
        positions = (w[f"{side}_positions.weight"] if config.positional == "learned"
                     else sinusoidal_encoding(config.max_len, d))
        return w[f"{side}_embed.weight"][ids] * math.sqrt(d) + positions[:ids.shape[1]]

    src_ignored = (src == PAD)[:, None, None, :]
    x = embed(src, "src")
    for i in range(config.num_encoder_layers):
        layer = f"encoder.layers.{i}"
        x = layer_norm(x + multihead_attention(x, x, w, f"{layer}.self_attn", heads, src_ignored), w, f"{layer}.norm1")
        x = layer_norm(x + feed_forward(x, w, layer), w, f"{layer}.norm2")
    length = tgt_in.shape[1]
    future = ~np.tril(np.ones((length, length), dtype=bool))
    tgt_ignored = future[None, None] | (tgt_in == PAD)[:, None, None, :]
    y = embed(tgt_in, "tgt")
    for i in range(config.num_decoder_layers):
        layer = f"decoder.layers.{i}"
        y = layer_norm(y + multihead_attention(y, y, w, f"{layer}.self_attn", heads, tgt_ignored), w, f"{layer}.norm1")
        y = layer_norm(y + multihead_attention(y, x, w, f"{layer}.multihead_attn", heads, src_ignored), w,
                       f"{layer}.norm2")
        y = layer_norm(y + feed_forward(y, w, layer), w, f"{layer}.norm3")
    return y @ w["output.weight"].T + w["output.bias"]


# --------------------------------------------------------------------------- tests
@pytest.mark.parametrize("positional", ["sinusoidal", "learned"])
def test_safetensors_round_trip_has_pytorch_names_and_shapes(tmp_path, positional):
    model = small_model(positional)
    path = export_weights(model, tmp_path / "sub" / "model.safetensors")
    loaded = load_file(path)
    assert {name: value.shape for name, value in loaded.items()} == expected_shapes(model.config)
    assert all(value.dtype == np.float32 for value in loaded.values())
    state = model.state_dict()
    np.testing.assert_array_equal(loaded["encoder.layers.1.self_attn.in_proj_weight"],
                                  state["encoder.layers.1.self_attn.w_qkv.weight"].T)
    np.testing.assert_array_equal(loaded["decoder.layers.0.multihead_attn.in_proj_weight"][:16],   # W_q first
                                  state["decoder.layers.0.cross_attn.w_q.weight"].T)
    np.testing.assert_array_equal(loaded["decoder.layers.0.multihead_attn.in_proj_bias"][16:],
                                  state["decoder.layers.0.cross_attn.w_kv.bias"])
    np.testing.assert_array_equal(loaded["output.weight"], state["output.weight"].T)
    assert sum(v.size for v in loaded.values()) == model.num_parameters()
    assert not list(tmp_path.joinpath("sub").glob(".tmp-*"))


@pytest.mark.parametrize("positional", ["sinusoidal", "learned"])
def test_the_exported_weights_run_as_pytorch_layers_give_minigrads_logits(tmp_path, positional):
    model = small_model(positional)
    weights = load_file(export_weights(model, tmp_path / "m.safetensors"))
    src, tgt = DateDataset().sample_batch(np.random.default_rng(0), 6)
    tgt[:, -4:] = PAD                                   # padded targets, as short dates have
    want = model(src, tgt[:, :-1]).data
    got = torch_layout_logits(weights, model.config, src, tgt[:, :-1])
    np.testing.assert_allclose(got, want, atol=2e-5, rtol=0)


def test_gradients_map_like_the_weights():
    model = small_model(layers=1)
    grads = {name: np.full(p.shape, i, np.float32) for i, (name, p) in enumerate(model.named_parameters())}
    mapped = torch_names(grads, model.config)
    assert set(mapped) == set(expected_shapes(model.config))
    assert mapped["decoder.layers.0.linear1.weight"].shape == (24, 16)


def test_cli_exports_a_checkpoint_with_its_config_and_refuses_in_one_line(tmp_path, capsys):
    model = small_model()
    checkpoint = tmp_path / "model.npz"
    save_checkpoint(str(checkpoint), model.state_dict(), {}, {"model_config": model.config.to_dict()})
    assert main(["--checkpoint", str(checkpoint)]) == 0
    assert "wrote" in capsys.readouterr().out
    from safetensors import safe_open
    with safe_open(str(tmp_path / "model.safetensors"), framework="numpy") as f:
        assert json.loads(f.metadata()["model_config"])["d_model"] == 16
    assert main(["--checkpoint", str(checkpoint), "--format", "npz"]) == 0
    with np.load(tmp_path / "model-torch.npz") as archive:
        assert archive["output.weight"].shape == (68, 16) and "metadata.json" in archive.files
    (tmp_path / "a_file").write_text("")
    for argv, message in ((["--checkpoint", str(tmp_path / "none.npz")], "no checkpoint at"),
                          (["--checkpoint", str(checkpoint), "--out", str(tmp_path / "a_file" / "x")],
                           "a_file is a file, not a folder"),
                          (["--checkpoint", str(checkpoint), "--out", str(checkpoint)], "is the checkpoint itself")):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1


@pytest.mark.parametrize("fmt", ["safetensors", "npz"])
def test_the_printed_advice_holds_for_an_installed_package(tmp_path, capsys, fmt):
    """A pip-installed package has no examples/ folder: the advice must not be a command that needs
    one, and its load line must read the written file (run here with numpy standing in for torch)."""
    import types
    from safetensors.numpy import load_file as numpy_load_file
    model = small_model(layers=1)
    checkpoint = tmp_path / "model.npz"
    save_checkpoint(str(checkpoint), model.state_dict(), {}, {"model_config": model.config.to_dict()})
    assert main(["--checkpoint", str(checkpoint), "--format", fmt]) == 0
    out = capsys.readouterr().out
    assert "python examples/" not in out and "minigrad source repository" in out
    load_line = next(line for line in out.splitlines() if line.startswith("in PyTorch: "))
    stand_ins = {"numpy": np, "torch": types.SimpleNamespace(from_numpy=np.asarray),
                 "safetensors": types.SimpleNamespace(torch=types.SimpleNamespace(load_file=numpy_load_file))}
    exec(load_line[len("in PyTorch: "):], stand_ins)
    assert set(stand_ins["state_dict"]) == set(expected_shapes(model.config))


def test_the_example_script_runs_without_installing():
    import subprocess
    import sys
    from pathlib import Path
    script = Path(__file__).resolve().parents[1] / "examples" / "export.py"
    done = subprocess.run([sys.executable, str(script), "--help"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "PyTorch's parameter names" in done.stdout


@pytest.mark.parametrize("positional", ["sinusoidal", "learned"])
def test_a_decoder_only_model_exports_as_a_causal_encoder_stack(tmp_path, positional):
    """Its blocks run as PyTorch's TransformerEncoderLayer with a causal mask give minigrad's logits."""
    from transformer.models.config import DecoderOnlyConfig
    from transformer.tasks.dates import join_for_decoder_only
    from transformer.models.decoder_only import DecoderOnlyTransformer
    minigrad.manual_seed(5)
    config = DecoderOnlyConfig(d_model=16, num_heads=4, num_layers=2, d_ff=24, positional=positional)
    model = DecoderOnlyTransformer(config).eval()
    src, tgt = DateDataset().sample_batch(np.random.default_rng(0), 3)
    ids = join_for_decoder_only(src, tgt)[:, :-1]
    weights = load_file(export_weights(model, tmp_path / "model.safetensors"))
    assert {name: value.shape for name, value in weights.items()} == {
        name: value.shape for name, value in torch_names(model.state_dict(), config).items()}
    assert "decoder.layers.1.norm2.weight" in weights and "embedding.weight" in weights
    w = {name: value.astype(np.float64) for name, value in weights.items()}
    positions = w["positions.weight"] if positional == "learned" else sinusoidal_encoding(config.max_len, 16)
    x = w["embedding.weight"][ids] * math.sqrt(16) + positions[:ids.shape[1]]
    future = ~np.tril(np.ones((ids.shape[1], ids.shape[1]), dtype=bool))[None, None]
    for i in range(config.num_layers):
        layer = f"decoder.layers.{i}"
        x = layer_norm(x + multihead_attention(x, x, w, f"{layer}.self_attn", 4, future), w, f"{layer}.norm1")
        x = layer_norm(x + feed_forward(x, w, layer), w, f"{layer}.norm2")
    np.testing.assert_allclose(x @ w["output.weight"].T + w["output.bias"], model(ids).data, atol=2e-4)
