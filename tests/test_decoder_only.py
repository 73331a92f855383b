"""The decoder-only model: its config, loss, causal mask and key/value cache."""
import numpy as np
import pytest

import minigrad
from minigrad import Tensor, gradcheck, no_grad
from minigrad import functional as F
from transformer.models.config import DecoderOnlyConfig, ModelConfig, model_config_from_dict
from transformer.tasks.dates import EOS, PAD, PROMPT_LEN, DateDataset, check_model_config, join_for_decoder_only
from transformer.models.decoder_only import IGNORE, DecoderOnlyTransformer, next_token_targets
from transformer.models.decoder_only import DecoderOnlyLayer

TINY = dict(d_model=8, num_heads=2, num_layers=2, d_ff=16, task="next-word", vocab_size=11, max_len=12)


def tiny(seed=0, **changes):
    minigrad.manual_seed(seed)
    return DecoderOnlyTransformer(DecoderOnlyConfig(**{**TINY, **changes}))


def date_sequences(rows=3, seed=0):
    src, tgt = DateDataset().sample_batch(np.random.default_rng(seed), rows)
    return join_for_decoder_only(src, tgt)


# ------------------------------------------------------------------ config
def test_config_records_its_architecture_and_old_dicts_are_encoder_decoder():
    config = DecoderOnlyConfig(d_model=32, num_layers=3)
    assert config.to_dict()["architecture"] == "decoder-only"
    assert model_config_from_dict(config.to_dict()) == config
    old = ModelConfig().to_dict()
    del old["architecture"]                  # what every checkpoint before this model stored
    assert model_config_from_dict(old) == ModelConfig()
    with pytest.raises(ValueError, match="architecture must be one of"):
        model_config_from_dict({**config.to_dict(), "architecture": "gpt"})
    with pytest.raises(ValueError, match="unknown model config keys: num_encoder_layers"):
        model_config_from_dict({**config.to_dict(), "num_encoder_layers": 2})


def test_config_holds_numbers_and_counts_parameters():
    """Any vocabulary and length: the task supplies them (the date task's are the defaults)."""
    config = DecoderOnlyConfig(vocab_size=70, max_len=20)
    assert DecoderOnlyTransformer(config)(np.zeros((1, 20), dtype=np.int64)).shape == (1, 20, 70)
    with pytest.raises(ValueError, match="vocab_size must be at most 100,000"):
        DecoderOnlyConfig(vocab_size=100_001)
    for config in (DecoderOnlyConfig(), DecoderOnlyConfig(**TINY, positional="learned")):
        model = DecoderOnlyTransformer(config)
        assert sum(p.size for p in model.parameters()) == config.num_parameters()


def test_the_date_task_checks_a_model_fits_it():
    check_model_config(DecoderOnlyConfig())           # the defaults are the date task's numbers
    check_model_config(ModelConfig())
    with pytest.raises(ValueError, match="vocab_size must be 68"):
        check_model_config(DecoderOnlyConfig(vocab_size=70))
    with pytest.raises(ValueError, match="max_len must be at least 30"):
        check_model_config(DecoderOnlyConfig(max_len=20))
    with pytest.raises(ValueError, match="max_len must be at least 20"):
        check_model_config(ModelConfig(max_len=19))
    with pytest.raises(ValueError, match="pad_id must be 67"):
        check_model_config(ModelConfig(pad_id=0))


# -------------------------------------------------------------------- loss
def test_targets_are_the_next_tokens_where_something_is_to_be_predicted():
    ids = np.array([[1, 2, 3, 4, 5]])
    predict = np.array([[False, False, True, True, False]])
    inputs, targets = next_token_targets(ids, predict)
    assert inputs.tolist() == [[1, 2, 3, 4]]
    assert targets.tolist() == [[IGNORE, 3, 4, IGNORE]]
    with pytest.raises(ValueError, match="boolean predict of the same shape"):
        next_token_targets(ids, predict[:, :3])


def test_the_date_loss_counts_the_answer_only():
    """Prompt (the date's characters) and padding targets are ignored; the separator's
    position predicts the answer's first letter and the last letter predicts <eos>."""
    seq = date_sequences()
    predict = (np.arange(seq.shape[1]) >= PROMPT_LEN)[None] & (seq != PAD)
    _, targets = next_token_targets(seq, predict)
    for row, target in zip(seq, targets):
        answer = row[PROMPT_LEN:][row[PROMPT_LEN:] != PAD]
        assert (target[:PROMPT_LEN - 1] == IGNORE).all()
        assert target[target != IGNORE].tolist() == answer.tolist()
        assert answer[-1] == EOS


def test_loss_gradcheck_in_float64():
    model = tiny(3).double()
    ids = np.array([[1, 2, 3, 4, 5, 0], [6, 7, 8, 9, 0, 0]])
    predict = np.array([[0, 0, 1, 1, 1, 0], [0, 0, 0, 1, 0, 0]], dtype=bool)
    params = dict(model.named_parameters())
    checked = ["embedding.weight", "decoder.layers.0.self_attn.w_qkv.weight", "decoder.layers.0.norm1.bias",
               "decoder.layers.1.self_attn.w_o.weight", "decoder.layers.1.feed_forward.linear1.weight",
               "decoder.layers.1.norm2.weight", "output.weight", "output.bias"]

    def loss(*_):
        return model.next_token_loss(ids, predict)[0]

    assert loss().dtype == np.float64
    assert gradcheck(loss, [params[name] for name in checked])


# ------------------------------------------------------------ the causal mask
def test_no_position_sees_a_later_input_vector():
    """The gradient of position t's loss with respect to every input vector (embedding +
    position) after t is exactly 0, and not 0 for t itself: autograd shows what the mask promises."""
    model = tiny(1).double()
    ids = np.array([[1, 2, 3, 4, 5, 6, 7]])
    targets = np.array([[2, 3, 4, 5, 6, 7, 8]])
    length = ids.shape[1]
    for t in range(length):
        x = Tensor(model.embed(ids).data, requires_grad=True)
        logits = model.from_vectors(x)
        picked = np.full_like(targets, IGNORE)
        picked[:, t] = targets[:, t]
        F.cross_entropy(logits, picked, ignore_index=IGNORE).backward()
        later = x.grad[0, t + 1:]
        assert np.array_equal(later, np.zeros_like(later)), t
        assert np.abs(x.grad[0, t]).max() > 0


def test_changing_a_later_token_leaves_earlier_logits_bit_identical():
    model = tiny(2).eval()
    ids = np.array([[1, 2, 3, 4, 5, 6, 7, 8]])
    with no_grad():
        before = model(ids).data
        for t in range(ids.shape[1]):
            changed = ids.copy()
            changed[0, t] = 10
            after = model(changed).data
            assert np.array_equal(after[:, :t], before[:, :t]), t
            assert not np.array_equal(after[:, t], before[:, t])


# ----------------------------------------------------------- key/value cache
@pytest.mark.parametrize("dtype, tolerance", [(np.float64, 1e-12), (np.float32, 1e-5)])
@pytest.mark.parametrize("fused", [True, False])
def test_cached_logits_equal_uncached_at_every_position(dtype, tolerance, fused):
    """The prompt fed at once, then one token per step through the caches: every position's
    logits equal those of one pass over the whole sequence."""
    minigrad.manual_seed(4)
    model = DecoderOnlyTransformer().to(dtype).eval()
    for _, module in model.named_modules():
        if hasattr(module, "fused"):
            module.fused = fused
    seq = date_sequences(4)[:, :-1]
    with no_grad():
        whole = model(seq).data
        caches = model.new_caches()
        pieces = [model(seq[:, :PROMPT_LEN], caches).data]
        pieces += [model(seq[:, t:t + 1], caches).data for t in range(PROMPT_LEN, seq.shape[1])]
    cached = np.concatenate(pieces, axis=1)
    assert cached.dtype == dtype and cached.shape == whole.shape
    np.testing.assert_allclose(cached, whole, rtol=0, atol=tolerance)


def test_generate_with_and_without_the_cache_agree_and_stop():
    model = tiny(5).eval()
    prompt = np.array([[1, 2, 3], [4, 5, 6]])
    with no_grad():
        cached = model.generate(prompt, 8, stop=9, fill=0)
        full = model.generate(prompt, 8, stop=9, fill=0, use_cache=False)
    assert np.array_equal(cached, full)
    for row in cached:
        stops = np.flatnonzero(row == 9)
        if len(stops):
            assert (row[stops[0] + 1:] == 0).all()


def test_reorder_caches_moves_rows():
    model = tiny(6).eval()
    caches = model.new_caches()
    with no_grad():
        model(np.array([[1, 2], [3, 4]]), caches)
    before = [cache["kv"].data.copy() for cache in caches]
    model.reorder_caches(caches, np.array([1, 1]))
    for cache, kv in zip(caches, before):
        assert np.array_equal(cache["kv"].data, kv[[1, 1]])


def test_the_block_is_the_encoder_block_with_a_mask_and_a_cache():
    """DecoderOnlyLayer without a mask is EncoderLayer: the same sublayers in the same order."""
    from transformer.models.encoder_decoder import EncoderLayer
    minigrad.manual_seed(0)
    block = DecoderOnlyLayer(8, 2, 16)
    minigrad.manual_seed(0)
    encoder_block = EncoderLayer(8, 2, 16)
    x = Tensor(np.random.default_rng(0).standard_normal((2, 5, 8)).astype(np.float32))
    assert np.array_equal(block(x).data, encoder_block(x).data)


def test_ids_beyond_max_len_are_one_clear_error():
    model = tiny()
    with pytest.raises(ValueError, match="token length 13 exceeds the model's max_len 12"):
        model(np.zeros((1, 13), dtype=np.int64))
    caches = model.new_caches()
    with no_grad():
        model(np.zeros((1, 12), dtype=np.int64), caches)
        with pytest.raises(ValueError, match="longer than the model's max_len 12"):
            model(np.zeros((1, 1), dtype=np.int64), caches)
