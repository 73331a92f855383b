"""The rungs: from the last word to self-attention and two layers, one idea each.

Every rung turns the words so far into one *context vector* per position, and the same
classifier scores the next word from it: the dot product of the context vector with every
word's own embedding, plus a bias per word (the embedding table is the classifier's weight,
as in GPT-2), so the word whose vector is most like the context vector wins. Only the context
vector changes (X holds the T word embeddings, one row per word):

    LastWord      x_t                                                 the last word alone
    Average       A X, A = tril(1) / row sums (row t: 1/(t+1))        every word so far, equally
    DotProduct    softmax(X Xᵀ / sqrt(d), causal) X                   words pull the words most like them
    Values        softmax(X Xᵀ / sqrt(d), causal) (X W_v)             what is moved is a learned map of the word
    SharedMap     softmax((X W)(X W)ᵀ / sqrt(d), causal) (X W_v)      a learned space to pull in (symmetric)
    SeparateMaps  softmax((X W_q)(X W_k)ᵀ / sqrt(d), causal) (X W_v)  queries and keys apart: pull can be one-way
    Positions     SeparateMaps on X + P                               where each word stands
    Heads         four SeparateMaps side by side on X + P, d/4 each   several pulls at once, each its own values
    TwoLayers     H = X + heads(X); context = H + heads'(H)           a second layer reads the first's output
    LayerNorm     the same, each sum normalised: LN(X + heads(X))     every layer's output kept at one scale
    FullBlock     the project's decoder-only model                     (and W_o, own classifier, feed-forward, ...)

Rungs 4-7 start where the rung below stands (a new map as the identity, positions as zero);
heads starts close to positions but not exactly (each head scores in its own d/4 dimensions).
Two layers share the heads rung's weights and add a second layer whose W_v starts at zero, so the
second layer adds nothing before training (the residual does: each word's own vector). Both
two-layer rungs train at 3e-3, not 1e-2 (docs/ladder.md measures why). The full block is the whole
decoder-only model: besides the layer norm rung's ideas it has W_o and biases, its own classifier, a
feed-forward, Xavier initialisation, random positions and embeddings scaled by sqrt(d);
docs/ladder.md lists every difference and measures what each buys
(tests/test_ladder_rung_differences.py).

Why Values is a rung of its own: with the classifier tied to the embeddings, a word that is
moved as itself votes for the words like it, and "like" is symmetric (x_a · x_b = x_b · x_a),
so no embedding lets rock vote for paper, paper for scissors and scissors for rock at once.
W_v moves each word to where its vote should go.

Every dot-product rung divides its scores by sqrt(d_k) (d_k = d, or d/4 per head): without
it these one-layer models (no residual, no layer norm) sharpen their softmax onto one word
early in training and then get almost no gradient to learn which word (the notebook measures
it). The full block keeps the same division per head.
"""
import functools
import math

import numpy as np

from minigrad import Tensor, nn

from transformer.models.attention import causal_mask, future_mask
from transformer.models.config import DecoderOnlyConfig
from transformer.models.decoder_only import DecoderOnlyTransformer


@functools.lru_cache(maxsize=16)
def averaging_matrix(length: int, dtype=np.float64) -> np.ndarray:
    """(T, T): row t holds 1/(t+1) in columns 0..t, so A @ X averages the words so far. Made
    once per length and read-only (a traced step may keep it: a new array would look like data)."""
    tril = np.tril(np.ones((length, length)))
    average = (tril / tril.sum(axis=1, keepdims=True)).astype(dtype)
    average.flags.writeable = False
    return average


@functools.lru_cache(maxsize=16)
def row_numbers(batch: int) -> np.ndarray:
    """0..batch-1, made once and read-only: a traced step may keep it (a new array looks like data)."""
    rows = np.arange(batch)
    rows.flags.writeable = False
    return rows


@functools.lru_cache(maxsize=16)
def averaging_tensor(length: int, dtype) -> Tensor:
    """``averaging_matrix`` as a Tensor, made once (``Tensor()`` copies its array, as ``torch.tensor`` does)."""
    return Tensor(averaging_matrix(length, dtype))


def causal_softmax(scores: Tensor) -> Tensor:
    """Row-wise softmax of (B, T, T) scores; a later word gets weight exactly 0."""
    return scores.masked_fill(future_mask(scores.shape[-1]), -np.inf).softmax(axis=-1)


def identity_map(d: int) -> nn.Linear:
    """A learned d x d map that starts as the identity: a rung begins where the one before it
    stands, and its new map changes only as far as training moves it."""
    layer = nn.Linear(d, d, bias=False)
    layer.weight.data[:] = np.eye(d)
    return layer


class Rung(nn.Module):
    """Embedding -> ``context`` (one vector per position) -> classifier."""

    name = idea = ""

    def __init__(self, vocab_size: int, d_model: int, max_len: int):
        self.d_model = d_model
        self.embedding = nn.Embedding(vocab_size, d_model)
        self.embedding.weight.data *= 1 / math.sqrt(d_model)      # vectors of length about 1
        self.bias = nn.Parameter(np.zeros(vocab_size))            # the classifier's own: how common a word is

    @classmethod
    def learning_rate(cls, config) -> float:
        """Adam's rate for this rung under ``config`` (an ``experiment.LadderConfig``)."""
        return config.lr

    def embed(self, ids) -> Tensor:
        return self.embedding(ids)                                 # (B, T, d)

    def forward(self, ids, at=None) -> Tensor:
        """ids (B, T) -> logits (B, T, vocab), or (B, vocab) at the positions ``at`` (B,) only."""
        context = self.context(self.embed(ids))                    # (B, T, d)
        if at is not None:
            context = context[row_numbers(len(at)), at]            # (B, d)
        return self.classify(context)

    def classify(self, context) -> Tensor:
        """Context vectors (..., d) -> a score per word (..., vocab)."""
        return context @ self.embedding.weight.T + self.bias       # each word: its vector · the context

    def weights(self, ids) -> np.ndarray:
        """(B, T, T): how much position t's context vector takes from each word (row t)."""
        return causal_softmax(self.scores(self.embed(ids))).data


class LastWord(Rung):
    name, idea = "last word", "the context is the last word alone"

    def context(self, x):
        return x

    def weights(self, ids):
        length = ids.shape[1]
        return np.broadcast_to(np.eye(length), (len(ids), length, length))


class Average(Rung):
    name, idea = "average", "the average of all the words so far (a lower-triangular matrix product)"

    def context(self, x):
        return averaging_tensor(x.shape[1], x.dtype) @ x                     # (T, T) @ (B, T, d)

    def weights(self, ids):
        length = ids.shape[1]
        return np.broadcast_to(averaging_matrix(length), (len(ids), length, length))


class DotProduct(Rung):
    name, idea = "dot product", "a weighted average: each word pulls the words most like it, softmax(X Xᵀ) X"

    def scores(self, x):
        return x @ x.swapaxes(-1, -2) / math.sqrt(self.d_model)              # (B, T, T)

    def context(self, x):
        return causal_softmax(self.scores(x)) @ x


class Values(DotProduct):
    name, idea = "values", "what is moved is a learned map of each word, X W_v: rock can send paper"

    def __init__(self, vocab_size, d_model, max_len):
        super().__init__(vocab_size, d_model, max_len)
        self.w_v = identity_map(d_model)

    def context(self, x):
        return causal_softmax(self.scores(x)) @ self.w_v(x)


class SharedMap(Values):
    name, idea = "shared map", "a learned space to pull in, one map W for queries and keys (symmetric pull)"

    def __init__(self, vocab_size, d_model, max_len):
        super().__init__(vocab_size, d_model, max_len)
        self.w_q = identity_map(d_model)                         # here the keys use the same map

    def keys(self, x):
        return self.w_q(x)

    def scores(self, x):
        return self.w_q(x) @ self.keys(x).swapaxes(-1, -2) / math.sqrt(self.d_model)


class SeparateMaps(SharedMap):
    name, idea = "separate maps", "queries and keys from different maps W_q, W_k: pull can be one-way"

    def __init__(self, vocab_size, d_model, max_len):
        super().__init__(vocab_size, d_model, max_len)
        self.w_k = identity_map(d_model)

    def keys(self, x):
        return self.w_k(x)


class Positions(SeparateMaps):
    name, idea = "positions", "a learned vector per position added to each word: order is seen"

    def __init__(self, vocab_size, d_model, max_len):
        super().__init__(vocab_size, d_model, max_len)
        self.positions = nn.Embedding(max_len, d_model)
        self.positions.weight.data[:] = 0.0           # it starts as the rung before: no position seen yet

    def embed(self, ids):
        return self.embedding(ids) + self.positions.weight[:ids.shape[1]]


class Heads(Positions):
    name, idea = "heads", "four heads side by side, each its own queries, keys and values in d/4 dimensions"
    num_heads = 4

    def split(self, x):
        batch, length, _ = x.shape
        return x.reshape(batch, length, self.num_heads, -1).transpose(0, 2, 1, 3)    # (B, h, T, d/h)

    def scores(self, x, maps=None):
        """Each head's scores (B, h, T, T) under ``maps``' W_q and W_k (default: this rung's own)."""
        maps = maps or self
        d_k = self.d_model // self.num_heads
        return self.split(maps.w_q(x)) @ self.split(maps.w_k(x)).swapaxes(-1, -2) / math.sqrt(d_k)

    def attend(self, x, maps=None):
        """The heads side by side (B, T, d): each head's weights times its values under ``maps``."""
        maps = maps or self
        heads = causal_softmax(self.scores(x, maps)) @ self.split(maps.w_v(x))      # (B, h, T, d/h)
        batch, _, length, _ = heads.shape
        return heads.transpose(0, 2, 1, 3).reshape(batch, length, self.d_model)

    def context(self, x):
        return self.attend(x)

    def weights(self, ids):
        """The heads' weights averaged: (B, T, T)."""
        return super().weights(ids).mean(axis=1)


class LayerMaps(nn.Module):
    """A further layer's own W_q, W_k and W_v. W_q and W_k start as the identity, as on every rung;
    W_v starts at zero where the layer is added to its input, so the new layer adds nothing before
    training and the rung starts where the rung below stands."""

    def __init__(self, d_model: int, values_start_at_zero: bool):
        self.w_q, self.w_k, self.w_v = identity_map(d_model), identity_map(d_model), identity_map(d_model)
        if values_start_at_zero:
            self.w_v.weight.data[:] = 0.0


class TwoLayers(Heads):
    """The heads rung, then a second layer of four heads reading the first layer's output. Each layer
    is added to its input (a residual connection): the second layer reads every word's own vector
    plus what the first layer moved to it, and the gradient reaches the first layer past the second."""

    name, idea = "two layers", "a second layer of heads reads the first's output; each layer is added to its input"
    residuals = True

    def __init__(self, vocab_size, d_model, max_len):
        super().__init__(vocab_size, d_model, max_len)
        self.layer2 = LayerMaps(d_model, values_start_at_zero=self.residuals)

    @classmethod
    def learning_rate(cls, config) -> float:
        return config.layers_lr          # at the one-layer rungs' 1e-2 layer norm learns less recall

    def attention(self, x, index: int, maps=None):
        """Layer ``index``'s (0, 1) heads side by side on ``x``: (B, T, d)."""
        return self.attend(x, maps)

    def layer(self, x, index: int, maps=None):
        """Layer ``index`` on ``x``: its attention's output, added to ``x`` (the residual)."""
        out = self.attention(x, index, maps)
        return x + out if self.residuals else out

    def layers(self, x):
        """[the input, the first layer's output, the second's]: every layer's input and output."""
        first = self.layer(x, 0)
        return [x, first, self.layer(first, 1, self.layer2)]

    def context(self, x):
        return self.layers(x)[-1]

    def attention_maps(self, ids) -> np.ndarray:
        """(layers, B, heads, T, T): every head's weights on ``ids``."""
        x, first, _ = self.layers(self.embed(ids))
        return np.stack([causal_softmax(self.scores(x)).data, causal_softmax(self.scores(first, self.layer2)).data])

    def weights(self, ids):
        """The second layer's weights, averaged over its heads: (B, T, T)."""
        return self.attention_maps(ids)[-1].mean(axis=1)


class LayerNorm(TwoLayers):
    """Two layers, each layer's sum (its input plus its output) normalised: post-norm, as in the
    project's model and "Attention Is All You Need"."""

    name, idea = "layer norm", "each layer's sum is normalised to mean 0 and variance 1 (then a learned scale and shift)"

    def __init__(self, vocab_size, d_model, max_len):
        super().__init__(vocab_size, d_model, max_len)
        self.norms = nn.ModuleList([nn.LayerNorm(d_model), nn.LayerNorm(d_model)])

    def layer(self, x, index, maps=None):
        return self.norms[index](super().layer(x, index, maps))


class FullBlock(nn.Module):
    """The decoder-only model of ``transformer.models.decoder_only``: two blocks, each causal multi-head
    self-attention (softmax(Q Kᵀ / sqrt(d_k)) V per head) and a feed-forward layer, each with a
    residual connection and layer norm; learned positions."""

    name, idea = "full block", "the transformer block: feed-forward, residuals, layer norm, and a second layer"

    def __init__(self, vocab_size, d_model, max_len, num_heads: int = 4, num_layers: int = 2):
        self.model = DecoderOnlyTransformer(DecoderOnlyConfig(
            d_model=d_model, num_heads=num_heads, num_layers=num_layers, d_ff=4 * d_model,
            vocab_size=vocab_size, max_len=max_len, task="next-word", positional="learned"))

    @classmethod
    def learning_rate(cls, config) -> float:
        return config.full_block_lr          # its post-norm blocks do not learn recall at the rungs' 1e-2

    def forward(self, ids, at=None):
        model = self.model
        if at is None:
            return model(ids)
        hidden = model.decoder(model.embed(ids), causal_mask(ids.shape[1]))   # (B, T, d)
        return model.output(hidden[row_numbers(len(at)), at])                    # (B, vocab)

    def attention_maps(self, ids) -> np.ndarray:
        """(layers, B, heads, T, T): every head's weights on ``ids``."""
        self.model(ids)
        return np.stack([layer.self_attn.last_weights for layer in self.model.decoder.layers])

    def weights(self, ids):
        """The last layer's weights, averaged over its heads: (B, T, T)."""
        return self.attention_maps(ids)[-1].mean(axis=1)


RUNGS = (LastWord, Average, DotProduct, Values, SharedMap, SeparateMaps, Positions, Heads, TwoLayers, LayerNorm, FullBlock)
