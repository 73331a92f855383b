"""The rungs: from the last word to self-attention and two layers, one idea each; then the project's model.

Every rung turns the words so far into one *context vector* per position, and (rungs 1-8) the same
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
    TwoLayers     H = LN(X + heads(X) W_o); context = LN(H + heads'(H) W_o')   a second layer reads the first's output

and after the ladder, trained alike to compare with its top, the project's model:

    FullBlock     the decoder-only model: two layers plus a feed-forward, biases, Xavier init, ...

Rungs 4-7 start where the rung below stands (a new map as the identity, positions as zero);
heads starts close to positions but not exactly (each head scores in its own d/4 dimensions).
The two-layer rung carries, besides its idea, what makes two layers trainable on the ladder's
budget: residuals, post-norm layer norm, W_o, an own classifier, maps drawn at random and a rate of
3e-3. docs/ladder.md measures what each buys (``layer_variants.py``: the rung less one of them) and
lists every difference between neighbouring rungs (tests/test_ladder_rung_differences.py).

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

from minigrad import Tensor, nn, rng

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
    """A further layer's own W_q, W_k and W_v, built as identity maps (W_v at zero where the layer is
    added to its input, so that such a layer adds nothing before training); the two-layer rung then
    draws them at random (``draw_at_random``)."""

    def __init__(self, d_model: int, values_start_at_zero: bool):
        self.w_q, self.w_k, self.w_v = identity_map(d_model), identity_map(d_model), identity_map(d_model)
        if values_start_at_zero:
            self.w_v.weight.data[:] = 0.0


def draw_at_random(maps) -> None:
    """Redraw each map's weight as minigrad's Linear draws it, U(-1/sqrt(d), 1/sqrt(d)), instead of the
    identity: with identity maps every head starts by pulling the words most like the word itself,
    and two layers started so learn recall on no seed (docs/ladder.md measures it)."""
    for layer in maps:
        bound = 1.0 / math.sqrt(layer.weight.shape[0])
        layer.weight.data = rng.generator().uniform(-bound, bound, layer.weight.shape).astype(layer.weight.dtype)


class TwoLayers(Heads):
    """The heads rung, then a second layer of four heads that reads the first layer's output. Recall
    needs it: each place must first take in the name before it, then the name asked about pulls its
    place, two steps, one per layer.

    The rest is what makes two layers *trainable* on the ladder's budget, each measured by the rung
    without it (docs/ladder.md, "What makes two layers trainable"; ``layer_variants.py``): each layer's
    output added to its input (a residual) and the sum normalised (post-norm layer norm, as the
    project's model), a map W_o mixing each layer's heads, the words scored by a classifier of their
    own, every map drawn at random as minigrad's Linear draws it, and the project's model's learning
    rate. The flags below let a variant take one of them away."""

    name, idea = "two layers", "a second layer of heads reads the first layer's output"
    residuals = layer_norm = output_maps = own_classifier = random_maps = True

    def __init__(self, vocab_size, d_model, max_len):
        super().__init__(vocab_size, d_model, max_len)
        self.layer2 = LayerMaps(d_model, values_start_at_zero=self.residuals)
        if self.layer_norm:
            self.norms = nn.ModuleList([nn.LayerNorm(d_model), nn.LayerNorm(d_model)])
        if self.output_maps:
            self.w_o = nn.ModuleList([identity_map(d_model), identity_map(d_model)])
        if self.own_classifier:
            del self.bias                                             # the classifier has its own
            self.classifier = nn.Linear(d_model, vocab_size)
        if self.random_maps:
            draw_at_random(self.maps())

    def maps(self) -> list:
        """Every d x d map: W_q, W_k, W_v of both layers, then each layer's W_o."""
        layer1, layer2 = (self.w_q, self.w_k, self.w_v), (self.layer2.w_q, self.layer2.w_k, self.layer2.w_v)
        return [*layer1, *layer2, *(self.w_o if self.output_maps else ())]

    @classmethod
    def learning_rate(cls, config) -> float:
        return config.full_block_lr      # the project's model's 3e-3: at 1e-2 two layers learn less recall

    def classify(self, context):
        return self.classifier(context) if self.own_classifier else super().classify(context)

    def attention(self, x, index: int, maps=None):
        """Layer ``index``'s (0, 1) heads side by side on ``x``, mixed by its W_o: (B, T, d)."""
        heads = self.attend(x, maps)
        return self.w_o[index](heads) if self.output_maps else heads

    def layer(self, x, index: int, maps=None):
        """Layer ``index`` on ``x``: its attention's output, added to ``x`` (the residual), normalised."""
        out = self.attention(x, index, maps)
        out = x + out if self.residuals else out
        return self.norms[index](out) if self.layer_norm else out

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


# The ladder's rungs, each one idea; then the project's model, trained alike to compare with the top rung
# (it is not a rung: it adds no idea a kind needs, docs/ladder.md "The project's model")
LADDER = (LastWord, Average, DotProduct, Values, SharedMap, SeparateMaps, Positions, Heads, TwoLayers)
PROJECTS_MODEL = FullBlock
RUNGS = LADDER + (PROJECTS_MODEL,)
