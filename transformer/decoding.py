"""Turning a trained model into output text: greedy, beam search and sampling.

All three read the source once (the encoder-decoder encodes it; the decoder-only model feeds
the date's characters through its blocks) and then add one token at a time with the
key/value caches (``decoding_steps``; the first token fed is ``<sos>``, which for the
decoder-only model is the separator before the answer), stop a sequence at
``<eos>`` and run under ``no_grad`` in eval mode, with BLAS on one thread unless
``MINIGRAD_BLAS_THREADS`` says otherwise (``transformer.parallel.threads.decoding_threads``:
one new token per sequence makes products too small to gain much from a second
thread, and on a busy machine that thread stalls). They return token ids (B, max_len) padded with ``<pad>`` after
``<eos>``; ``dates.decode_batch`` turns them into strings.
"""
import contextlib

import numpy as np

from minigrad import Tensor, no_grad
from minigrad import functional as F
from transformer.parallel.threads import decoding_threads

from transformer.tasks.dates import EOS, PAD, SOS, TGT_LEN
from transformer.models.decoder_only import DecoderOnlyTransformer

MAX_OUTPUT = TGT_LEN - 1   # <sos> is given, so at most 19 tokens follow it
MAX_BEAM = 100             # widest beam: wider than the vocabulary (68), so a full-width beam fits;
                           # each beam costs as much as decoding the batch once more


@contextlib.contextmanager
def inference(model):
    """no_grad + eval mode + decoding's BLAS thread count, restoring the model's previous mode afterwards."""
    was_training = model.training
    model.eval()
    try:
        with no_grad(), decoding_threads():
            yield
    finally:
        model.train(was_training)


def decoding_steps(model, src, rows=None):
    """One architecture's incremental decoding of dates: the source read once, then
    ``step(tokens, t)`` -> logits (B, vocab) for the output token after ``tokens`` (B,), the
    token fed at output position t (``<sos>`` at t = 0); ``whole(prefix)`` recomputes them from
    the whole prefix (B, t + 1) without caches; ``reorder(order)`` keeps the cached rows
    ``order`` (beam search). ``rows`` repeats the source's rows (beam search: k per source)."""
    steps = _DecoderOnlySteps if isinstance(model, DecoderOnlyTransformer) else _EncoderDecoderSteps
    return steps(model, np.asarray(src), rows)


class _Steps:
    def reorder(self, order):
        self.model.reorder_caches(self.caches, order)


class _EncoderDecoderSteps(_Steps):
    def __init__(self, model, src, rows):
        self.model, self.caches = model, model.new_caches()
        self.memory, self.src_mask = model.encode(src)
        if rows is not None:
            self.memory, self.src_mask = Tensor(self.memory.data[rows]), self.src_mask[rows]

    def step(self, tokens, t):
        return self.model.decode_step(tokens, t, self.memory, self.src_mask, self.caches)

    def whole(self, prefix) -> np.ndarray:
        return self.model.decode(prefix, self.memory, self.src_mask).data[:, -1, :]


class _DecoderOnlySteps(_Steps):
    def __init__(self, model, src, rows):
        self.model, self.caches = model, model.new_caches()
        self.prompt = src[:, 1:-1] if rows is None else src[rows, 1:-1]   # the date's 10 characters
        model(self.prompt, self.caches)            # read once; the separator <sos> is step 0's token

    def step(self, tokens, t):
        return self.model(np.asarray(tokens).reshape(-1, 1), self.caches)[:, -1, :]

    def whole(self, prefix) -> np.ndarray:
        return self.model(np.concatenate([self.prompt, prefix], axis=1)).data[:, -1, :]


def greedy_decode(model, src, max_len: int = MAX_OUTPUT, use_cache: bool = True) -> np.ndarray:
    """The most likely next token at every step. ``use_cache=False`` recomputes the
    whole prefix each step (slower; kept to test that caching changes nothing)."""
    return _decode(model, src, max_len, lambda logits: logits.argmax(axis=-1), use_cache)


def sample_decode(model, src, temperature: float = 1.0, top_k: int = None, rng=None,
                  max_len: int = MAX_OUTPUT) -> np.ndarray:
    """Draw each token from softmax(logits / temperature), optionally only among the
    ``top_k`` most likely. ``temperature=0`` means greedy."""
    if temperature == 0:
        sampler(temperature, top_k, rng)           # the same checks of top_k
        return greedy_decode(model, src, max_len)
    return _decode(model, src, max_len, sampler(temperature, top_k, rng), use_cache=True)


def sampler(temperature: float = 1.0, top_k: int = None, rng=None):
    """logits (B, vocab) -> ids (B,) drawn from softmax(logits / temperature), optionally only
    among the ``top_k`` most likely; ``temperature=0`` picks the most likely."""
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0, got {temperature}")
    if top_k is not None and top_k < 1:
        raise ValueError(f"top_k must be >= 1, got {top_k}")
    if temperature == 0:
        return lambda logits: logits.argmax(axis=-1)
    rng = rng if rng is not None else np.random.default_rng()

    def pick(logits):
        # shift by the maximum before dividing: (logits - max) / T is <= 0, so a tiny T (1e-320)
        # gives 0 for the most likely token and -inf for the others (greedy, as T -> 0 should),
        # where logits / T would overflow to inf - inf = NaN
        logits = logits.astype(np.float64)
        if top_k is not None and top_k < logits.shape[-1]:
            kth = np.partition(logits, -top_k, axis=-1)[:, -top_k][:, None]
            logits = np.where(logits < kth, -np.inf, logits)
        with np.errstate(over="ignore"):
            probs = np.exp((logits - logits.max(axis=-1, keepdims=True)) / temperature)
        probs /= probs.sum(axis=-1, keepdims=True)
        cumulative = probs.cumsum(axis=-1)
        draws = rng.random((len(probs), 1)) * cumulative[:, -1:]
        return np.minimum((cumulative < draws).sum(axis=-1), probs.shape[-1] - 1)

    return pick


def _decode(model, src, max_len, pick, use_cache):
    src = np.asarray(src)
    batch = len(src)
    out = np.full((batch, max_len), PAD, dtype=np.int64)
    done = np.zeros(batch, dtype=bool)
    with inference(model):
        steps = decoding_steps(model, src)
        tokens = np.full(batch, SOS, dtype=np.int64)
        for t in range(max_len):
            if use_cache:
                logits = steps.step(tokens, t).data
            else:
                logits = steps.whole(np.concatenate([np.full((batch, 1), SOS), out[:, :t]], axis=1))
            logits[:, [SOS, PAD]] = -np.inf          # never valid outputs
            tokens = np.where(done, PAD, pick(logits))
            out[:, t] = tokens
            done |= tokens == EOS
            if done.all():
                break
    return out


def beam_search(model, src, beam_size: int = 4, max_len: int = MAX_OUTPUT, length_penalty: float = 1.0):
    """Keep the ``beam_size`` best partial outputs per source; return the best finished one.

    Hypotheses are ranked at the end by total log-probability / length**length_penalty
    (length counted up to and including ``<eos>``), so longer outputs are not
    punished merely for having more terms. A finished hypothesis stays in the beam
    with a frozen score. With ``beam_size=1`` this is exactly greedy decoding.
    """
    if beam_size < 1:
        raise ValueError(f"beam_size must be >= 1, got {beam_size}")
    if beam_size > MAX_BEAM:
        raise ValueError(f"beam_size must be at most {MAX_BEAM}, got {beam_size}")
    src = np.asarray(src)
    batch, k = len(src), beam_size
    rows = np.repeat(np.arange(batch), k)                    # each source k times
    with inference(model):
        steps = decoding_steps(model, src, rows)
        tokens = np.full(batch * k, SOS, dtype=np.int64)
        scores = np.zeros((batch, k))
        scores[:, 1:] = -np.inf                              # all beams start identical: keep one
        seqs = np.zeros((batch * k, 0), dtype=np.int64)
        finished = np.zeros(batch * k, dtype=bool)
        for t in range(max_len):
            logp = F.log_softmax(steps.step(tokens, t)).data.astype(np.float64)
            vocab = logp.shape[-1]
            logp[:, [SOS, PAD]] = -np.inf                    # never valid outputs
            logp[finished] = -np.inf
            logp[finished, PAD] = 0.0                        # a finished beam only continues with <pad>
            candidates = (scores[:, :, None] + logp.reshape(batch, k, vocab)).reshape(batch, k * vocab)
            best = np.argsort(-candidates, axis=-1, kind="stable")[:, :k]   # (B, k)
            scores = np.take_along_axis(candidates, best, axis=-1)
            parent = (np.arange(batch)[:, None] * k + best // vocab).reshape(-1)
            tokens = (best % vocab).reshape(-1)
            seqs = np.concatenate([seqs[parent], tokens[:, None]], axis=1)
            finished = finished[parent] | (tokens == EOS)
            steps.reorder(parent)
            if finished.all():
                break
    lengths = np.where((seqs == EOS).any(axis=1), (seqs == EOS).argmax(axis=1) + 1, seqs.shape[1])
    normalised = scores.reshape(-1) / lengths ** length_penalty
    winner = np.arange(batch) * k + normalised.reshape(batch, k).argmax(axis=1)
    out = np.full((batch, max_len), PAD, dtype=np.int64)
    out[:, : seqs.shape[1]] = seqs[winner]
    return out
