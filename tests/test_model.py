"""Tests for the positions, the configs and transformer.models.encoder_decoder: the seed
document's sinusoidal numbers, the Transformer's shapes and input checks, a float64
gradient check of the whole model with its loss, causality of the decoder, and that
padding changes nothing it should not.
"""
import math

import numpy as np
import pytest

import minigrad
from minigrad import Tensor, gradcheck
from minigrad import functional as F
from transformer import ModelConfig, Transformer, sinusoidal_encoding
from transformer.models.attention import causal_mask
from transformer.tasks.dates import EOS, PAD, SOS, SRC_LEN, TGT_LEN, VOCAB_SIZE, encode, encode_batch
from transformer.models.decoder_only import LearnedPositions, SinusoidalPositions

TINY = dict(d_model=8, num_heads=2, num_encoder_layers=1, num_decoder_layers=1, d_ff=16)


def closed_form_pe(pos, k, d_model):
    """The paper's formula for one entry: sin for even columns 2i, cos for odd columns 2i+1."""
    i = k // 2
    angle = pos / 10000 ** (2 * i / d_model)
    return math.sin(angle) if k % 2 == 0 else math.cos(angle)


@pytest.fixture
def tiny_model():
    minigrad.manual_seed(7)
    return Transformer(ModelConfig(**TINY))


@pytest.fixture
def batch():
    """Two sources/targets with the data set's lengths (12 and 20), <sos>/<eos>/<pad> included."""
    src = encode_batch(["1845-01-05", "1996-09-08"], SRC_LEN)
    tgt = encode_batch(["January 5, 1845", "September 8, 1996"], TGT_LEN)
    return src, tgt


# ------------------------------------------------------------------- positional
def test_pe_3_0_is_sin_3():
    table = sinusoidal_encoding(4, 16)
    assert round(table[3, 0], 4) == 0.1411
    assert table[3, 0] == pytest.approx(math.sin(3), abs=1e-15)


@pytest.mark.parametrize("d_model", [16, 7, 8, 1])
def test_sinusoidal_matches_the_closed_form(d_model):
    table = sinusoidal_encoding(30, d_model)
    assert table.shape == (30, d_model) and table.dtype == np.float64
    for pos in (0, 1, 3, 11, 29):
        for k in range(d_model):
            assert table[pos, k] == pytest.approx(closed_form_pe(pos, k, d_model), abs=1e-12), (pos, k)


def test_sinusoidal_odd_d_model_ends_with_a_sin_column():
    table = sinusoidal_encoding(5, 5)
    np.testing.assert_allclose(table[:, 4], np.sin(np.arange(5) / 10000 ** (4 / 5)), atol=1e-15)


def test_sinusoidal_row_zero_alternates_0_and_1():
    np.testing.assert_array_equal(sinusoidal_encoding(3, 8)[0], [0, 1, 0, 1, 0, 1, 0, 1])
    np.testing.assert_array_equal(sinusoidal_encoding(3, 7)[0], [0, 1, 0, 1, 0, 1, 0])


def test_sinusoidal_rows_differ_across_positions():
    table = sinusoidal_encoding(64, 16)
    distances = np.abs(table[:, None, :] - table[None, :, :]).sum(axis=-1)
    off_diagonal = distances[~np.eye(64, dtype=bool)]
    assert (off_diagonal > 1e-3).all()


def test_sinusoidal_rejects_bad_sizes():
    with pytest.raises(ValueError, match="d_model >= 1"):
        sinusoidal_encoding(4, 0)
    with pytest.raises(ValueError, match="length >= 0"):
        sinusoidal_encoding(-1, 8)


def test_worked_example_token_65_at_position_3():
    """A worked value: token 65 at position 3, dim 1 = -1.0169, becomes -0.8758 (d_model 16)."""
    x = np.zeros((1, 4, 16), dtype=np.float32)
    x[0, 0, 0] = x[0, 3, 0] = -1.0169          # token 65 at positions 0 and 3
    x[0, 0, 1] = x[0, 3, 1] = 3.7117
    out = SinusoidalPositions(20, 16)(Tensor(x)).data
    assert out.dtype == np.float32
    assert round(float(out[0, 3, 0]), 4) == -0.8758
    assert round(float(out[0, 0, 0]), 4) == -1.0169    # PE(0, 0) = sin 0 = 0: unchanged
    assert round(float(out[0, 0, 1]), 4) == 4.7117     # PE(0, 1) = cos 0 = 1


def test_positions_offset_and_max_len():
    positions = SinusoidalPositions(6, 4)
    x = Tensor(np.zeros((1, 2, 4)))
    np.testing.assert_allclose(positions(x, offset=3).data[0], sinusoidal_encoding(6, 4)[3:5])
    with pytest.raises(ValueError, match="longer than the model's max_len 6"):
        positions(x, offset=5)
    with pytest.raises(ValueError, match="max_len"):
        LearnedPositions(3, 4)(Tensor(np.zeros((1, 4, 4))))


# ------------------------------------------------------------------------ config
def test_model_config_validation_and_round_trip():
    with pytest.raises(ValueError, match="not divisible"):
        ModelConfig(d_model=10, num_heads=4)
    with pytest.raises(ValueError, match="positional"):
        ModelConfig(positional="rotary")
    with pytest.raises(ValueError, match="dropout"):
        ModelConfig(dropout=1.0)
    config = ModelConfig(**TINY, positional="learned")
    assert ModelConfig.from_dict(config.to_dict()) == config
    with pytest.raises(ValueError, match="unknown model config keys: colour"):
        ModelConfig.from_dict({**config.to_dict(), "colour": "red"})
    assert ModelConfig().max_len >= max(SRC_LEN, TGT_LEN) and ModelConfig().vocab_size == VOCAB_SIZE


# ------------------------------------------------------------------------- model
def test_forward_shapes_and_dtype(tiny_model, batch):
    src, tgt = batch
    logits = tiny_model(src, tgt[:, :-1])
    assert logits.shape == (2, TGT_LEN - 1, VOCAB_SIZE) and logits.dtype == np.float32
    memory, src_mask = tiny_model.encode(src)
    assert memory.shape == (2, SRC_LEN, 8) and src_mask.shape == (2, 1, 1, SRC_LEN)
    np.testing.assert_array_equal(tiny_model.decode(tgt[:, :-1], memory, src_mask).data, logits.data)


def test_embeddings_are_scaled_by_sqrt_d_model_before_positions(tiny_model, batch):
    src, _ = batch
    x = tiny_model.embed(src, tiny_model.src_embed, tiny_model.src_positions).data
    expected = tiny_model.src_embed.weight.data[src] * math.sqrt(8) + sinusoidal_encoding(SRC_LEN, 8)
    np.testing.assert_allclose(x, expected, rtol=1e-6, atol=1e-6)
    y = tiny_model.embed(src[:, :2], tiny_model.tgt_embed, tiny_model.tgt_positions, offset=5).data
    expected = tiny_model.tgt_embed.weight.data[src[:, :2]] * math.sqrt(8) + sinusoidal_encoding(7, 8)[5:7]
    np.testing.assert_allclose(y, expected, rtol=1e-6, atol=1e-6)


def test_learned_positions_model_runs(batch):
    minigrad.manual_seed(0)
    model = Transformer(ModelConfig(**TINY, positional="learned"))
    src, tgt = batch
    assert model(src, tgt[:, :-1]).shape == (2, TGT_LEN - 1, VOCAB_SIZE)
    names = [name for name, _ in model.named_parameters()]
    assert "src_positions.embedding.weight" in names and "tgt_positions.embedding.weight" in names


def test_same_seed_same_weights():
    minigrad.manual_seed(3)
    a = Transformer(ModelConfig(**TINY)).state_dict()
    minigrad.manual_seed(3)
    b = Transformer(ModelConfig(**TINY)).state_dict()
    assert list(a) == list(b)
    assert all(np.array_equal(a[name], b[name]) for name in a)


def test_bad_ids_are_rejected_with_clear_messages(tiny_model):
    with pytest.raises(ValueError, match=r"source ids must be a \(batch, length\) array"):
        tiny_model.encode(np.array([65, 1, 66]))
    with pytest.raises(TypeError, match="source ids must be integers"):
        tiny_model.encode(np.array([[65.0, 1.0, 66.0]]))
    with pytest.raises(ValueError, match="target length 21 exceeds the model's max_len 20"):
        memory, mask = tiny_model.encode(np.array([[65, 1, 66]]))
        tiny_model.decode(np.full((1, 21), 5), memory, mask)
    with pytest.raises(IndexError, match="out of range"):
        tiny_model.encode(np.array([[65, 68, 66]]))


def test_whole_model_gradcheck_with_cross_entropy():
    """Loss gradient w.r.t. a spread of parameters (encoder, both attentions, FFN, norms, output)."""
    minigrad.manual_seed(11)
    model = Transformer(ModelConfig(**TINY)).double()
    src = np.array([[SOS, 1, 2, EOS], [SOS, 3, EOS, PAD]])
    tgt = np.array([[SOS, 10, 11, EOS, PAD], [SOS, 12, EOS, PAD, PAD]])
    params = dict(model.named_parameters())
    checked = ["encoder.layers.0.self_attn.w_qkv.weight", "encoder.layers.0.norm2.weight",
               "decoder.layers.0.self_attn.w_qkv.bias", "decoder.layers.0.cross_attn.w_q.weight",
               "decoder.layers.0.cross_attn.w_kv.bias", "decoder.layers.0.cross_attn.w_kv.weight", "decoder.layers.0.feed_forward.linear1.weight",
               "decoder.layers.0.norm3.bias", "output.bias"]

    def loss(*_):
        logits = model(src, tgt[:, :-1])
        return F.cross_entropy(logits, tgt[:, 1:], ignore_index=PAD)

    assert loss().dtype == np.float64
    assert gradcheck(loss, [params[name] for name in checked])


def test_decoder_stack_is_causal(tiny_model, batch):
    """d(decoder output at t) / d(decoder input at t') is exactly zero for every t' > t."""
    model = tiny_model.double()
    src, _ = batch
    memory, src_mask = model.encode(src)
    memory = memory.detach()          # reused by every backward below
    length = 6
    projection = np.random.default_rng(0).standard_normal((2, 8))
    for t in range(length):
        y = Tensor(np.random.default_rng(1).standard_normal((2, length, 8)), requires_grad=True)
        out = model.decoder(y, memory, causal_mask(length)[None, None], src_mask)
        (out[:, t] * projection).sum().backward()
        assert (y.grad[:, t + 1:] == 0.0).all(), f"output {t} depends on a later input"
        assert (np.abs(y.grad[:, t]).sum(axis=-1) > 0).all()


def test_changing_later_target_tokens_leaves_earlier_logits_bit_identical(tiny_model, batch):
    src, tgt = batch
    tgt_in = tgt[:, :-1]
    logits = tiny_model(src, tgt_in).data
    for t in (0, 4, 10):
        changed = tgt_in.copy()
        changed[:, t + 1:] = np.random.default_rng(t).integers(0, 65, changed[:, t + 1:].shape)
        other = tiny_model(src, changed).data
        np.testing.assert_array_equal(other[:, :t + 1], logits[:, :t + 1])
        assert not np.array_equal(other[:, t + 1:], logits[:, t + 1:])


def test_padded_source_positions_get_zero_gradient(tiny_model):
    """<pad> in the source is never attended to, so its embedding gets exactly zero gradient."""
    src = np.array([[SOS, 1, 2, EOS, PAD, PAD], [SOS, 3, 4, 5, EOS, PAD]])
    tgt = np.array([[SOS, 10, 11, EOS], [SOS, 12, 13, EOS]])
    loss = F.cross_entropy(tiny_model(src, tgt[:, :-1]), tgt[:, 1:], ignore_index=PAD)
    loss.backward()
    grad = tiny_model.src_embed.weight.grad
    assert (grad[PAD] == 0.0).all()
    assert np.abs(grad[EOS]).sum() > 0 and np.abs(grad[1]).sum() > 0


def test_cross_attention_gives_padded_source_keys_zero_weight(tiny_model):
    src = np.array([[SOS, 1, 2, EOS, PAD, PAD]])
    tiny_model(src, np.array([[SOS, 10, 11]]))
    weights = tiny_model.decoder.layers[0].cross_attn.last_weights
    assert weights.shape == (1, 2, 3, 6)
    assert (weights[..., 4:] == 0.0).all()
    np.testing.assert_allclose(weights.sum(axis=-1), 1.0, rtol=1e-6)
    self_weights = tiny_model.decoder.layers[0].self_attn.last_weights
    assert (self_weights[0, :, np.triu_indices(3, 1)[0], np.triu_indices(3, 1)[1]] == 0.0).all()


def test_appending_source_padding_does_not_change_the_logits(tiny_model, batch):
    src, tgt = batch
    padded = np.concatenate([src, np.full((2, 5), PAD)], axis=1)
    np.testing.assert_allclose(tiny_model(padded, tgt[:, :-1]).data, tiny_model(src, tgt[:, :-1]).data,
                               rtol=1e-5, atol=1e-5)


def test_batch_rows_are_independent(tiny_model, batch):
    """A sequence's logits do not depend on what else is in the batch (including its padding)."""
    src, tgt = batch
    together = tiny_model(src, tgt[:, :-1]).data
    for row in range(2):
        alone = tiny_model(src[row:row + 1], tgt[row:row + 1, :-1]).data
        np.testing.assert_allclose(alone[0], together[row], rtol=1e-5, atol=1e-5)


def test_target_padding_is_masked_as_keys(tiny_model, batch):
    """A <pad> inside the target input is never attended to: changing its embedding changes
    no logit at a real position (causality alone would not hide it from later positions)."""
    src, _ = batch
    tgt_in = np.array([[SOS, 10, PAD, 11, 12], [SOS, 13, 14, PAD, 15]])
    before = tiny_model(src, tgt_in).data
    tiny_model.tgt_embed.weight.data[PAD] += 5.0
    after = tiny_model(src, tgt_in).data
    real = tgt_in != PAD
    np.testing.assert_array_equal(after[real], before[real])
    assert not np.array_equal(after[~real], before[~real])


def test_decode_step_matches_teacher_forced_decode(tiny_model, batch):
    src, tgt = batch
    tgt_in = tgt[:, :-1][:, :8]
    memory, src_mask = tiny_model.encode(src)
    full = tiny_model.decode(tgt_in, memory, src_mask).data
    caches = tiny_model.new_caches()
    assert len(caches) == 1
    for t in range(tgt_in.shape[1]):
        step = tiny_model.decode_step(tgt_in[:, t], t, memory, src_mask, caches).data
        assert step.shape == (2, VOCAB_SIZE)
        np.testing.assert_allclose(step, full[:, t], rtol=1e-4, atol=1e-5)


def test_encode_of_the_seed_example_is_the_documented_ids():
    assert encode("1845-01-05").tolist() == [65, 1, 8, 4, 5, 62, 0, 1, 62, 0, 5, 66]
