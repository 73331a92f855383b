"""A decoder-only (GPT-style) Transformer on minigrad: predict the next token at every position.

    ids (B, T) -> embed * sqrt(d) + positions -> DecoderOnlyLayer x N (causal self-attention,
                  feed-forward) -> Linear -> logits (B, T, vocab)

Row t of the logits scores every vocabulary entry as the token after position t. Next-token
prediction is multiclass classification: the last block's vector at position t (the *context
vector*) is multiplied with the head's weight matrix, one column per vocabulary entry, and the
largest score is the prediction. The blocks are the encoder-decoder's own layers
(``layers.DecoderOnlyLayer``: ``SelfAttention`` and ``FeedForward``, post-norm): a decoder
without cross-attention, its only context its own earlier positions.

Causal: position t attends to positions <= t only (``attention.causal_mask``, lower
triangular), so one sequence is T training examples at once and no logit depends on a later
token (tested: the gradient of position t's loss with respect to every later input vector is
exactly zero, and changing a later token leaves earlier logits bit-identical). Padding only
ever follows a sequence's last real token, so the causal mask already hides it from every real
position and no padding mask is needed; the padded positions' own predictions are not scored.

The loss (``next_token_loss``): cross-entropy of logits[:, t] against token t + 1, counted
only where token t + 1 is to be predicted (``predict``): the answer, not the prompt it is
given, not padding (``next_token_targets`` writes ``IGNORE`` there, as minGPT's -1).

Weight tying: none. The head is its own ``Linear(d_model, vocab)`` with a bias, as in the
encoder-decoder: a token's input vector (what it means when read) and its output column (when
it is the word to write) may differ (the date task reads digits and writes month names), the
embedding is scaled by sqrt(d_model) for the blocks while the head wants unscaled scores, and
tying saves only vocab x d_model weights (4,352 of the date model's ~108,000). The weights are
then laid out as PyTorch's ``TransformerEncoderLayer`` stack with a causal mask plus a Linear,
so ``dates-export`` maps them name for name.

Generation (``generate``) feeds the prompt once, then one token per step: each layer appends
its keys and values to a cache (``new_caches``; ``SelfAttention``'s ``cache=``, the mechanism
the encoder-decoder's decoder uses), so a step computes only the new position. Cached and
uncached logits agree to rounding (tested at every position: 1e-12 in float64, 1e-5 in float32).
"""
import math

import numpy as np

from minigrad import Tensor, nn
from minigrad import functional as F

from transformer.models.attention import causal_mask
from transformer.models.config import DecoderOnlyConfig
from transformer.models.layers import DecoderOnlyLayer
from transformer.models.encoder_decoder import _check_ids, xavier_init
from transformer.models.positional import LearnedPositions, SinusoidalPositions

IGNORE = -1        # a target with nothing to predict (prompt, padding): no loss, no gradient


class CausalStack(nn.Module):
    """N decoder-only blocks, one after the other (named ``decoder.layers.N`` in the model)."""

    def __init__(self, config: DecoderOnlyConfig):
        self.layers = nn.ModuleList(
            DecoderOnlyLayer(config.d_model, config.num_heads, config.d_ff, config.dropout)
            for _ in range(config.num_layers))

    def forward(self, x, mask, caches=None):
        for i, layer in enumerate(self.layers):
            x = layer(x, mask, None if caches is None else caches[i])
        return x


class DecoderOnlyTransformer(nn.Module):
    def __init__(self, config: DecoderOnlyConfig = None):
        self.config = config = config or DecoderOnlyConfig()
        self.embedding = nn.Embedding(config.vocab_size, config.d_model)
        Positions = SinusoidalPositions if config.positional == "sinusoidal" else LearnedPositions
        self.positions = Positions(config.max_len, config.d_model)
        self.embed_dropout = nn.Dropout(config.dropout)
        self.decoder = CausalStack(config)
        self.output = nn.Linear(config.d_model, config.vocab_size)
        xavier_init(self)

    # ----------------------------------------------------------------- parts
    def embed(self, ids, offset: int = 0) -> Tensor:
        """Token ids (B, T) at positions offset.. -> input vectors (B, T, d_model)."""
        x = self.embedding(ids) * math.sqrt(self.config.d_model)
        return self.embed_dropout(self.positions(x, offset))

    def forward(self, ids, caches=None) -> Tensor:
        """Token ids (B, T) -> logits (B, T, vocab). With ``caches`` (from ``new_caches``) ids are
        the next T positions after the ones the caches hold."""
        ids = _check_ids(ids, "token", self.config)
        return self.from_vectors(self.embed(ids, cached_length(caches)), caches)

    def from_vectors(self, x: Tensor, caches=None) -> Tensor:
        """Input vectors (B, T, d_model) (embeddings + positions) -> logits (B, T, vocab)."""
        offset, length = cached_length(caches), x.shape[1]
        # rows offset..offset+T of the causal mask; one new position may attend to everything cached
        mask = None if caches is not None and length == 1 else causal_mask(offset + length)[offset:]
        return self.output(self.decoder(x, mask, caches))

    def next_token_loss(self, ids, predict, label_smoothing: float = 0.0):
        """-> (loss, logits (B, T-1, vocab), targets (B, T-1)): teacher-forced on ids (B, T), the
        cross-entropy of each position's logits against the next token, where ``predict`` (B, T)
        is True for that token."""
        inputs, targets = next_token_targets(ids, predict)
        logits = self(inputs)
        return F.cross_entropy(logits, targets, ignore_index=IGNORE, label_smoothing=label_smoothing), logits, targets

    # ----------------------------------------------------- incremental decode
    def new_caches(self):
        """One empty key/value cache per layer."""
        return [{} for _ in range(self.config.num_layers)]

    def reorder_caches(self, caches, order):
        """Keep the cached rows ``order`` (beam search reorders and copies its beams)."""
        for cache in caches:
            if "kv" in cache:
                cache["kv"] = Tensor(cache["kv"].data[order])

    def generate(self, prompt, max_new_tokens: int, pick=None, stop=None, fill=None, use_cache=True) -> np.ndarray:
        """Continue every row of ``prompt`` (B, P) by ``max_new_tokens`` tokens -> (B, max_new_tokens).

        ``pick`` (logits (B, vocab) -> ids (B,)) chooses each token (default: the most likely);
        after a row writes ``stop`` it gets ``fill``. ``use_cache=False`` recomputes the whole
        sequence every step (slower; kept to test that caching changes nothing). Call it under
        ``no_grad`` in eval mode (``decoding.inference(model)``).
        """
        prompt = _check_ids(prompt, "prompt", self.config)
        pick = pick or (lambda logits: logits.argmax(axis=-1))
        fill = fill if fill is not None else stop if stop is not None else 0
        out = np.full((len(prompt), max_new_tokens), fill, dtype=np.int64)
        done = np.zeros(len(prompt), dtype=bool)
        caches = self.new_caches() if use_cache else None
        sequence, feed = prompt, prompt
        for t in range(max_new_tokens):
            logits = self(feed, caches).data[:, -1, :] if use_cache else self(sequence).data[:, -1, :]
            tokens = np.where(done, out[:, t], pick(logits))
            out[:, t] = tokens
            if stop is not None:
                done |= tokens == stop
            if done.all() or t == max_new_tokens - 1:
                break
            feed = tokens[:, None]
            sequence = np.concatenate([sequence, feed], axis=1)
        return out


def cached_length(caches) -> int:
    """How many positions the caches hold (0 without caches, or before the first step)."""
    if not caches or "kv" not in caches[0]:
        return 0
    return caches[0]["kv"].shape[1]


def next_token_targets(ids, predict):
    """-> (inputs ids[:, :-1], targets ids[:, 1:]) with ``IGNORE`` wherever ``predict`` is False:
    position t's target is token t + 1, scored only if that token is to be predicted."""
    ids, predict = np.asarray(ids), np.asarray(predict)
    if ids.ndim != 2 or ids.shape[1] < 2 or predict.shape != ids.shape or predict.dtype != np.bool_:
        raise ValueError(f"next_token_targets needs ids (batch, length >= 2) and a boolean predict of the "
                         f"same shape, got ids {ids.shape} and predict {predict.shape} {predict.dtype}")
    return ids[:, :-1], np.where(predict[:, 1:], ids[:, 1:], IGNORE)
