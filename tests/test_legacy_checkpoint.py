"""Checkpoints written before attention packed its projections still load.

The old layout had ``w_q``, ``w_k``, ``w_v`` (d x d each) in every attention module; today
self-attention has ``w_qkv`` = [w_q | w_k | w_v] and cross-attention ``w_q`` and
``w_kv`` = [w_k | w_v]. An old-layout file is made here by splitting a trained model's
packed weights (and Adam's moment buffers, renumbered into the old parameter order), so
loading it must give back exactly the model and optimizer that wrote the packed file.
"""
import zipfile

import numpy as np
import pytest

from transformer.checkpoint import CheckpointError, convert_legacy_attention, load_checkpoint, save_checkpoint
from transformer.config import ModelConfig
from transformer.dates import SRC_LEN, decode_batch, encode_batch
from transformer.decoding import greedy_decode
from transformer.training import TrainConfig, Trainer, load_model

TINY = dict(d_model=16, num_heads=2, num_encoder_layers=1, num_decoder_layers=2, d_ff=32)
DATES = ["1845-01-05", "1996-09-08", "2024-02-29"]


def split_to_legacy_layout(model_state, optimizer_state):
    """The inverse of the conversion: packed names -> w_q, w_k, w_v in the old parameter order
    (each module's w_q.weight, w_q.bias, w_k.weight, ...), Adam's buffers renumbered to match."""
    parts_of = {"w_qkv": ("w_q", "w_k", "w_v"), "w_kv": ("w_k", "w_v")}
    legacy, origin = {}, []                    # origin: (packed name, block) of each legacy parameter
    for name, value in model_state.items():
        *prefix, linear, kind = name.split(".")
        if linear not in parts_of:
            legacy[name] = value
            origin.append((name, None))
        elif kind == "weight":                 # the bias blocks follow each weight block
            for block, part in enumerate(parts_of[linear]):
                for packed in (name, ".".join([*prefix, linear, "bias"])):
                    array = np.split(model_state[packed], len(parts_of[linear]), axis=-1)[block]
                    legacy[".".join([*prefix, part, packed.split(".")[-1]])] = np.ascontiguousarray(array)
                    origin.append((packed, block))
    new_index = {name: i for i, name in enumerate(model_state)}
    optimizer = {k: v for k, v in optimizer_state.items() if not isinstance(v, np.ndarray)}
    for buffer in ("m", "v"):
        for old_index, (name, block) in enumerate(origin):
            value = optimizer_state[f"{buffer}.{new_index[name]}"]
            blocks = model_state[name].shape[-1] // TINY["d_model"]
            optimizer[f"{buffer}.{old_index}"] = value if block is None else np.split(value, blocks, axis=-1)[block]
    return legacy, optimizer


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """A packed checkpoint after 3 Adam steps, and the same run split into the old layout."""
    folder = tmp_path_factory.mktemp("legacy")
    trainer = Trainer(ModelConfig(**TINY), TrainConfig(steps=10, batch_size=8), out_dir=str(folder))
    for _ in range(3):
        trainer.train_step()
    packed = str(folder / "packed.npz")
    trainer.save(packed)
    model_state, optimizer_state, meta = load_checkpoint(packed)
    legacy_model, legacy_optimizer = split_to_legacy_layout(model_state, optimizer_state)
    legacy = str(folder / "legacy.npz")
    save_checkpoint(legacy, legacy_model, legacy_optimizer, meta)
    return packed, legacy, trainer


def test_the_legacy_file_really_has_the_old_layout(saved):
    _, legacy, _ = saved
    names = [n[len("model/"):-len(".npy")] for n in zipfile.ZipFile(legacy).namelist() if n.startswith("model/")]
    first = names.index("encoder.layers.0.self_attn.w_q.weight")
    assert names[first:first + 8] == [f"encoder.layers.0.self_attn.{linear}.{kind}"
                                      for linear in ("w_q", "w_k", "w_v", "w_o") for kind in ("weight", "bias")]
    assert "decoder.layers.1.cross_attn.w_v.bias" in names and not any("w_qkv" in n or "w_kv" in n for n in names)


def test_legacy_checkpoint_loads_as_the_packed_one(saved):
    packed, legacy, _ = saved
    want_model, want_optimizer, want_meta = load_checkpoint(packed)
    got_model, got_optimizer, got_meta = load_checkpoint(legacy)
    assert list(got_model) == list(want_model)                    # same names, same (parameter) order
    for name in want_model:
        np.testing.assert_array_equal(got_model[name], want_model[name], err_msg=name)
    assert sorted(got_optimizer) == sorted(want_optimizer)
    for key, value in want_optimizer.items():
        np.testing.assert_array_equal(got_optimizer[key], value, err_msg=key)


def test_legacy_model_translates_identically(saved):
    packed, legacy, _ = saved
    src = encode_batch(DATES, SRC_LEN)
    want, got = load_model(packed), load_model(legacy)
    for (name, p), (_, q) in zip(want.named_parameters(), got.named_parameters()):
        np.testing.assert_array_equal(p.data, q.data, err_msg=name)
    np.testing.assert_array_equal(greedy_decode(got, src), greedy_decode(want, src))
    assert decode_batch(greedy_decode(got, src)) == decode_batch(greedy_decode(want, src))


def test_legacy_run_resumes_exactly_like_the_packed_one(saved):
    packed, legacy, _ = saved
    losses = []
    for path in (packed, legacy):
        resumed = Trainer.resume(path)
        losses.append([resumed.train_step()["loss"] for _ in range(2)])
    assert losses[0] == losses[1]


def test_packed_state_passes_through_unchanged():
    state = {"a.self_attn.w_qkv.weight": np.zeros((4, 12)), "a.cross_attn.w_q.bias": np.zeros(4)}
    optimizer = {"m.0": np.ones((4, 12))}
    assert convert_legacy_attention("f", state, optimizer) == (state, optimizer)


def legacy_state(d=4):
    state = {}
    for linear in ("w_q", "w_k", "w_v", "w_o"):
        state[f"enc.self_attn.{linear}.weight"] = np.full((d, d), len(state), np.float32)
        state[f"enc.self_attn.{linear}.bias"] = np.full(d, len(state), np.float32)
    return state


def test_conversion_joins_blocks_in_order_and_renumbers_buffers():
    state = legacy_state()
    optimizer = {f"m.{i}": value + 100 for i, value in enumerate(state.values())}
    del optimizer["m.3"]                                        # w_k.bias never updated: no buffer
    model, buffers = convert_legacy_attention("f", state, optimizer)
    assert list(model) == ["enc.self_attn.w_qkv.weight", "enc.self_attn.w_qkv.bias",
                           "enc.self_attn.w_o.weight", "enc.self_attn.w_o.bias"]
    np.testing.assert_array_equal(model["enc.self_attn.w_qkv.weight"][0], [0] * 4 + [2] * 4 + [4] * 4)
    np.testing.assert_array_equal(model["enc.self_attn.w_qkv.bias"], [1] * 4 + [3] * 4 + [5] * 4)
    np.testing.assert_array_equal(buffers["m.1"], [101] * 4 + [0] * 4 + [105] * 4)   # w_k.bias's: zeros
    np.testing.assert_array_equal(buffers["m.3"], [107] * 4)                         # w_o.bias moved 7 -> 3


def test_incomplete_or_mismatched_legacy_layouts_fail_with_one_clear_line():
    state = legacy_state()
    del state["enc.self_attn.w_v.bias"]
    with pytest.raises(CheckpointError, match="has an old-layout attention without enc.self_attn.w_v.bias"):
        convert_legacy_attention("f", state, {})
    state = legacy_state()
    state["enc.self_attn.w_k.weight"] = np.zeros((2, 8), np.float32)
    with pytest.raises(CheckpointError, match=r"cannot join .* shapes \(4, 4\), \(2, 8\), \(4, 4\)"):
        convert_legacy_attention("f", state, {})
    state = legacy_state()
    state["enc.self_attn.w_qkv.weight"] = np.zeros((4, 12), np.float32)
    with pytest.raises(CheckpointError, match="holds both enc.self_attn.w_qkv.weight and the old-layout"):
        convert_legacy_attention("f", state, {})
