"""Tests for transformer.decoding (greedy, beam search, sampling) and transformer.training.evaluation.

Two models: a randomly initialised one (fixed seed; its outputs are gibberish and may
contain any token) and one trained for a few dozen steps (it has learned the output
format, so every output ends with <eos>). Both are built once per module.
"""
import numpy as np
import pytest

import minigrad
from minigrad import Tensor
from minigrad import functional as F
from transformer import ModelConfig, Transformer
from transformer.tasks.dates import EOS, PAD, SOS, VOCAB_SIZE, DateDataset, decode_batch
from transformer.decoding import MAX_OUTPUT, beam_search, greedy_decode, sample_decode
from transformer.training.evaluation import evaluate
from transformer.training.trainer import TrainConfig
from transformer.training.dates import DateTrainer

SMALL = dict(d_model=16, num_heads=2, num_encoder_layers=1, num_decoder_layers=1, d_ff=32)


@pytest.fixture(scope="module")
def data():
    return DateDataset()


@pytest.fixture(scope="module")
def src(data):
    return data.test_src[:48]


@pytest.fixture(scope="module")
def random_model():
    minigrad.manual_seed(0)
    return Transformer(ModelConfig(**SMALL)).eval()


@pytest.fixture(scope="module")
def trained_model(tmp_path_factory):
    trainer = DateTrainer(ModelConfig(**SMALL),
                      TrainConfig(steps=80, batch_size=32, lr=5e-3, warmup=10, eval_every=0, checkpoint_every=0),
                      out_dir=str(tmp_path_factory.mktemp("decoding-run")))
    for _ in range(trainer.config.steps):
        trainer.train_step()
    return trainer.model.eval()


@pytest.fixture(params=["random", "trained"])
def model(request):
    return request.getfixturevalue(f"{request.param}_model")


def assert_pad_only_after_eos(ids):
    """Every row: content tokens (no <sos>/<pad>), then optionally <eos> followed only by <pad>."""
    for row in ids:
        eos = np.flatnonzero(row == EOS)
        end = eos[0] if len(eos) else len(row)
        assert not np.isin(row[:end], [PAD, SOS]).any(), f"<pad>/<sos> before <eos> in {row.tolist()}"
        assert (row[end + 1:] == PAD).all(), f"not <pad> after <eos> in {row.tolist()}"


# ------------------------------------------------------------------------ greedy
def test_greedy_shape_dtype_and_eos_then_pad(trained_model, src):
    ids = greedy_decode(trained_model, src)
    assert ids.shape == (len(src), MAX_OUTPUT) and ids.dtype == np.int64
    assert (ids == EOS).any(axis=1).all(), "the briefly trained model should end every output"
    assert_pad_only_after_eos(ids)


def test_greedy_output_of_an_untrained_model_is_well_formed(random_model, src):
    """Even gibberish must follow the output format: no <pad> (or <sos>) before <eos>."""
    assert_pad_only_after_eos(greedy_decode(random_model, src))


def test_cached_greedy_equals_full_recomputation(model, src):
    cached = greedy_decode(model, src, use_cache=True)
    full = greedy_decode(model, src, use_cache=False)
    np.testing.assert_array_equal(cached, full)


def test_decode_step_logits_equal_full_decode_at_every_step(model, src):
    """Feeding the greedy tokens one by one through the caches gives the same logits as
    decoding the whole prefix again at every step."""
    ids = greedy_decode(model, src)
    with minigrad.no_grad():
        memory, src_mask = model.encode(src)
        caches = model.new_caches()
        tokens = np.full(len(src), SOS)
        for t in range(MAX_OUTPUT):
            step = model.decode_step(tokens, t, memory, src_mask, caches).data
            prefix = np.concatenate([np.full((len(src), 1), SOS), ids[:, :t]], axis=1)
            full = model.decode(prefix, memory, src_mask).data[:, -1]
            running = ~(prefix == EOS).any(axis=1)     # finished rows are fed <pad>: not compared
            np.testing.assert_allclose(step[running], full[running], rtol=1e-4, atol=1e-4, err_msg=f"step {t}")
            tokens = ids[:, t]


def test_greedy_is_the_argmax_of_teacher_forced_logits(trained_model, src):
    ids = greedy_decode(trained_model, src)
    with minigrad.no_grad():
        logits = trained_model(src, np.concatenate([np.full((len(src), 1), SOS), ids[:, :-1]], axis=1)).data
    for row, out in zip(logits, ids):
        end = np.flatnonzero(out == EOS)[0]
        np.testing.assert_array_equal(row[:end + 1].argmax(axis=-1), out[:end + 1])


def test_decoding_restores_training_mode_and_ignores_dropout(src):
    minigrad.manual_seed(5)
    model = Transformer(ModelConfig(**SMALL, dropout=0.5)).train()
    first = greedy_decode(model, src[:8])
    assert model.training and all(m.training for _, m in model.named_modules())
    np.testing.assert_array_equal(greedy_decode(model, src[:8]), first)
    np.testing.assert_array_equal(greedy_decode(model.eval(), src[:8]), first)
    assert not model.training


def test_max_len_limits_the_output(trained_model, src):
    ids = greedy_decode(trained_model, src[:4], max_len=3)
    assert ids.shape == (4, 3)
    np.testing.assert_array_equal(ids, greedy_decode(trained_model, src[:4])[:, :3])


# ------------------------------------------------------------------- beam search
def test_beam_width_one_equals_greedy(model, src):
    np.testing.assert_array_equal(beam_search(model, src, beam_size=1), greedy_decode(model, src))


@pytest.mark.parametrize("beam_size", [2, 4])
def test_beam_output_stops_at_eos(trained_model, src, beam_size):
    ids = beam_search(trained_model, src, beam_size=beam_size)
    assert ids.shape == (len(src), MAX_OUTPUT)
    assert (ids == EOS).any(axis=1).all()
    assert_pad_only_after_eos(ids)


def test_beam_search_rejects_width_zero(trained_model, src):
    with pytest.raises(ValueError, match="beam_size must be >= 1, got 0"):
        beam_search(trained_model, src, beam_size=0)


def test_full_width_beam_finds_the_best_two_token_output(trained_model, src):
    """With beam_size = vocabulary size and max_len 2, beam search is exhaustive: with no
    length normalisation it must return the 2-token output of highest total log-probability."""
    sources = src[:3]
    got = beam_search(trained_model, sources, beam_size=VOCAB_SIZE, max_len=2, length_penalty=0.0)
    with minigrad.no_grad():
        for row, source in enumerate(sources):
            memory, src_mask = trained_model.encode(np.repeat(source[None], VOCAB_SIZE, axis=0))
            caches = trained_model.new_caches()
            first = F.log_softmax(trained_model.decode_step(np.full(VOCAB_SIZE, SOS), 0, memory, src_mask,
                                                            caches)).data[0].astype(np.float64)
            second = F.log_softmax(trained_model.decode_step(np.arange(VOCAB_SIZE), 1, memory, src_mask,
                                                             caches)).data.astype(np.float64)
            total = first[:, None] + second                      # (first token, second token)
            total[EOS] = -np.inf
            total[EOS, PAD] = first[EOS]                         # <eos> first: then only <pad>, free
            a, b = np.unravel_index(np.argmax(total), total.shape)
            assert got[row].tolist() == [a, b], f"source {row}: beam {got[row].tolist()}, best {[a, b]}"


def reference_beam_search(model, source, beam_size, max_len=MAX_OUTPUT, length_penalty=1.0):
    """The same search written plainly: lists of hypotheses, every prefix decoded in full
    (no caches, no reordering). Returns the winning ids padded to max_len."""
    with minigrad.no_grad():
        memory, src_mask = model.encode(source[None])
        beams = [([], 0.0, False)]                               # (tokens, log-prob, finished)
        for _ in range(max_len):
            candidates = []
            running = [b for b in beams if not b[2]]
            if running:
                prefixes = np.array([[SOS] + tokens for tokens, _, _ in running])
                rows = np.zeros(len(running), dtype=np.int64)
                logits = model.decode(prefixes, Tensor(memory.data[rows]), src_mask[rows]).data[:, -1]
                logp = F.log_softmax(Tensor(logits.astype(np.float64))).data
            i = 0
            for tokens, score, finished in beams:
                if finished:
                    candidates.append((tokens + [PAD], score, True))
                    continue
                candidates += [(tokens + [tok], score + logp[i, tok], tok == EOS) for tok in range(VOCAB_SIZE)]
                i += 1
            candidates.sort(key=lambda c: -c[1])
            beams = candidates[:beam_size]
            for tokens, _, finished in beams:
                content = tokens[:tokens.index(EOS)] if finished else tokens
                assert not {SOS, PAD} & set(content), \
                    "precondition: the model should never put <sos>/<pad> in a beam before <eos>"
            if all(finished for _, _, finished in beams):
                break
    def normalised(beam):
        tokens, score, _ = beam
        length = tokens.index(EOS) + 1 if EOS in tokens else len(tokens)
        return score / length ** length_penalty
    best = max(beams, key=normalised)[0]
    return np.array(best + [PAD] * (max_len - len(best)))


@pytest.mark.parametrize("beam_size, length_penalty", [(3, 1.0), (2, 0.0)])
def test_beam_search_matches_a_plain_reference(trained_model, src, beam_size, length_penalty):
    """Checks the cached, batched, reordered implementation against full recomputation."""
    got = beam_search(trained_model, src[:6], beam_size=beam_size, length_penalty=length_penalty)
    for row, source in enumerate(src[:6]):
        expected = reference_beam_search(trained_model, source, beam_size, length_penalty=length_penalty)
        np.testing.assert_array_equal(got[row], expected, err_msg=f"source {row}")


def test_reorder_caches_moves_the_self_attention_history(trained_model, src):
    """After reordering rows [2, 0, 0], the next step equals decoding those histories afresh."""
    history = np.array([[SOS, 19, 36], [SOS, 22, 56], [SOS, 18, 40]])     # three different prefixes
    sources = np.repeat(src[:1], 3, axis=0)
    with minigrad.no_grad():
        memory, src_mask = trained_model.encode(sources)
        caches = trained_model.new_caches()
        for t in range(3):
            trained_model.decode_step(history[:, t], t, memory, src_mask, caches)
        order = np.array([2, 0, 0])
        trained_model.reorder_caches(caches, order)
        next_tokens = np.array([49, 57, 64])
        stepped = trained_model.decode_step(next_tokens, 3, memory, src_mask, caches).data
        fresh = np.concatenate([history[order], next_tokens[:, None]], axis=1)
        full = trained_model.decode(fresh, memory, src_mask).data[:, -1]
    np.testing.assert_allclose(stepped, full, rtol=1e-4, atol=1e-4)


# ---------------------------------------------------------------------- sampling
def test_temperature_zero_is_greedy(model, src):
    np.testing.assert_array_equal(sample_decode(model, src, temperature=0), greedy_decode(model, src))


@pytest.mark.parametrize("temperature", [0.5, 1.0, 5.0])
def test_top_k_one_is_greedy(model, src, temperature):
    ids = sample_decode(model, src, temperature=temperature, top_k=1, rng=np.random.default_rng(0))
    np.testing.assert_array_equal(ids, greedy_decode(model, src))


def test_bad_sampling_arguments_raise(trained_model, src):
    with pytest.raises(ValueError, match="temperature must be >= 0, got -1"):
        sample_decode(trained_model, src, temperature=-1)
    with pytest.raises(ValueError, match="top_k must be >= 1, got 0"):
        sample_decode(trained_model, src, temperature=1.0, top_k=0)


def test_sampling_is_reproducible_with_a_seeded_rng(random_model, src):
    a = sample_decode(random_model, src, temperature=2.0, rng=np.random.default_rng(3))
    b = sample_decode(random_model, src, temperature=2.0, rng=np.random.default_rng(3))
    c = sample_decode(random_model, src, temperature=2.0, rng=np.random.default_rng(4))
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    assert ((a >= 0) & (a < VOCAB_SIZE)).all()


@pytest.mark.parametrize("temperature, top_k", [(1.0, None), (2.0, None), (1.5, 3)])
def test_first_token_frequencies_follow_the_tempered_softmax(random_model, data, temperature, top_k):
    """Sampling the first token 20,000 times reproduces softmax(logits / T) (restricted to
    the top k and renormalised) within 0.015 per token. Compared over the content tokens
    only (renormalised), so the test holds whether or not <sos>/<pad> may be drawn."""
    n = 20_000
    sources = np.repeat(data.test_src[:1], n, axis=0)
    ids = sample_decode(random_model, sources, temperature=temperature, top_k=top_k,
                        rng=np.random.default_rng(0), max_len=1)
    with minigrad.no_grad():
        memory, src_mask = random_model.encode(data.test_src[:1])
        logits = random_model.decode_step(np.array([SOS]), 0, memory, src_mask,
                                          random_model.new_caches()).data[0].astype(np.float64)
    scaled = logits / temperature
    if top_k is not None:
        top = np.argsort(-scaled)[:top_k]
        assert not np.isin([SOS, PAD], top).any(), "pick a source whose top k has no marker"
        scaled[np.setdiff1d(np.arange(VOCAB_SIZE), top)] = -np.inf
    content = np.setdiff1d(np.arange(VOCAB_SIZE), [SOS, PAD])
    expected = np.exp(scaled[content] - scaled[content].max())
    expected /= expected.sum()
    counts = np.bincount(ids[:, 0], minlength=VOCAB_SIZE)[content]
    observed = counts / counts.sum()
    assert counts.sum() > 0.9 * n
    np.testing.assert_allclose(observed, expected, atol=0.015)
    if top_k is not None:
        assert set(np.flatnonzero(np.bincount(ids[:, 0], minlength=VOCAB_SIZE))) <= set(top)


def test_sampled_outputs_stop_at_eos(trained_model, src):
    ids = sample_decode(trained_model, src, temperature=0.7, rng=np.random.default_rng(1))
    assert_pad_only_after_eos(ids)


# -------------------------------------------------------------------- evaluation
def test_evaluate_counts_exact_and_per_character_matches(trained_model, data):
    src, tgt = data.test_src[:64], data.test_tgt[:64]
    result = evaluate(trained_model, src, tgt, batch_size=20, show_wrong=3)
    predicted = greedy_decode(trained_model, src)
    texts = decode_batch(predicted)
    assert result["count"] == 64
    assert result["exact_match"] == pytest.approx(np.mean([a == b for a, b in zip(texts, data.test_targets)]))
    expected = tgt[:, 1:]
    counted = expected != PAD
    assert result["char_accuracy"] == pytest.approx(((predicted == expected) & counted).sum() / counted.sum())
    assert 0.0 < result["char_accuracy"] < 1.0
    wrong = [(s, p, e) for s, p, e in zip(data.test_dates, texts, data.test_targets) if p != e][:3]
    assert result["wrong"] == wrong


def test_evaluate_perfect_and_hopeless_predictions(trained_model, data, monkeypatch):
    """Feed evaluate a decoder that returns the targets (100%) or only <sos> (0%)."""
    import transformer.training.evaluation as evaluation
    src, tgt = data.test_src[:10], data.test_tgt[:10]
    monkeypatch.setattr(evaluation, "greedy_decode", lambda model, s: tgt[:len(s), 1:])
    perfect = evaluate(trained_model, src, tgt)
    assert perfect["exact_match"] == 1.0 and perfect["char_accuracy"] == 1.0 and perfect["wrong"] == []
    monkeypatch.setattr(evaluation, "greedy_decode", lambda model, s: np.full((len(s), MAX_OUTPUT), SOS))
    hopeless = evaluate(trained_model, src, tgt)
    assert hopeless["exact_match"] == 0.0 and hopeless["char_accuracy"] == 0.0


def test_evaluate_with_beam_search(trained_model, data):
    result = evaluate(trained_model, data.test_src[:16], data.test_tgt[:16], beam_size=2)
    beam_texts = decode_batch(beam_search(trained_model, data.test_src[:16], 2))
    assert result["exact_match"] == pytest.approx(np.mean([a == b for a, b in zip(beam_texts, data.test_targets)]))
