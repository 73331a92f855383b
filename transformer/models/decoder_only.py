"""A decoder-only (GPT-style) Transformer on minigrad, the whole model in this file: predict the
next token at every position.

    ids (B, T) -> embed * sqrt(d) + positions -> Block x N (causal self-attention, feed-forward)
               -> Linear -> logits (B, T, vocab)

Read it top to bottom: the config (numbers only: the task that trains the model supplies its
vocabulary size and longest sequence), ``CausalSelfAttention`` (step by step, with the fused
kernel beside it as the fast alternative), ``FeedForward``, the two-line ``Block``, the
positions, then the model with its ``forward``, loss and ``generate``, and last the
initialisation and the id check. From the rest of the project it takes only the attention
module (``attention.py``: the masks and ``scaled_dot_product_attention``). The encoder-decoder
(``encoder_decoder.py``) is built from the same parts.

Row t of the logits scores every vocabulary entry as the token after position t. Next-token
prediction is multiclass classification: the last block's vector at position t (the *context
vector*) is multiplied with the head's weight matrix, one column per vocabulary entry, and the
largest score is the prediction.

Causal: position t attends to positions <= t only (``causal_mask``, lower triangular), so one
sequence is T training examples at once and no logit depends on a later token (tested: the
gradient of position t's loss with respect to every later input vector is exactly zero, and
changing a later token leaves earlier logits bit-identical). Padding only ever follows a
sequence's last real token, so the causal mask already hides it from every real position and no
padding mask is needed; the padded positions' own predictions are not scored.

The loss (``next_token_loss``): cross-entropy of logits[:, t] against token t + 1, counted only
where token t + 1 is to be predicted (``predict``): the answer, not the prompt it is given, not
padding (``next_token_targets`` writes ``IGNORE`` there, as minGPT's -1).

Post-norm, as in "Attention Is All You Need" (nanoGPT normalises before each sublayer instead),
and no weight tying: the head is its own ``Linear(d_model, vocab)`` with a bias. A token's input
vector (what it means when read) and its output column (when it is the word to write) may differ
(the date task reads digits and writes month names), the embedding is scaled by sqrt(d_model) for
the blocks while the head wants unscaled scores, and tying saves only vocab x d_model weights
(4,352 of the date model's ~108,000). The weights are laid out as PyTorch's
``TransformerEncoderLayer`` stack with a causal mask plus a Linear, so ``dates-export`` maps them
name for name.

Generation (``generate``) feeds the prompt once, then one token per step: each block's attention
appends its keys and values to a cache (``new_caches``), so a step computes only the new
position. Cached and uncached logits agree to rounding (tested at every position: 1e-12 in
float64, 1e-5 in float32).
"""
import math
from dataclasses import asdict, dataclass, fields

import numpy as np

from minigrad import Tensor, concatenate, nn, rng
from minigrad import functional as F

from transformer.models.attention import (PACKED_PROJECTIONS, SelfAttention, causal_mask, check_mask,
                                          scaled_dot_product_attention)

IGNORE = -1                   # a target with nothing to predict (prompt, padding): no loss, no gradient
MAX_POSITIONS = 4096          # max_len cap: the sinusoidal table is max_len x d_model
MAX_VOCAB = 100_000           # vocab_size cap (the embedding is vocab x d_model)


# --------------------------------------------------------------------- config
class Shape:
    """What the configs of both architectures share: their checks, their dict form (saved with
    every checkpoint as JSON) and the parameter count of one block. A config checks its values
    when made, so a bad stored config (``num_heads = 0``) is one clear error before any weight
    is allocated."""

    def check(self, architecture: str, sizes):
        if self.architecture != architecture:
            raise ValueError(f"architecture must be {architecture!r} for {type(self).__name__}, "
                             f"got {self.architecture!r}")
        for name in sizes:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if self.d_model % self.num_heads:
            raise ValueError(f"d_model {self.d_model} is not divisible by num_heads {self.num_heads}")
        if self.positional not in ("sinusoidal", "learned"):
            raise ValueError(f"positional must be 'sinusoidal' or 'learned', got {self.positional!r}")
        if isinstance(self.dropout, bool) or not isinstance(self.dropout, (int, float)) \
                or not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout!r}")
        if self.vocab_size > MAX_VOCAB:
            raise ValueError(f"vocab_size must be at most {MAX_VOCAB:,}, got {self.vocab_size}")
        if self.max_len > MAX_POSITIONS:
            raise ValueError(f"max_len must be at most {MAX_POSITIONS}, got {self.max_len}")

    def block_parameters(self, attentions: int, norms: int) -> int:
        """One block: ``attentions`` attention modules (w_qkv or w_q + w_kv, and w_o: 4 d x d
        matrices and biases), the feed-forward and ``norms`` layer norms."""
        d, f = self.d_model, self.d_ff
        return attentions * 4 * (d * d + d) + (d * f + f + f * d + d) + norms * 2 * d

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, values: dict):
        if not isinstance(values, dict):
            raise ValueError(f"the model config must be a JSON object, got {type(values).__name__}")
        unknown = set(values) - {f.name for f in fields(cls)}
        if unknown:
            raise ValueError(f"unknown model config keys: {', '.join(sorted(unknown))}")
        return cls(**values)


@dataclass
class DecoderOnlyConfig(Shape):
    d_model: int = 64          # width of every token vector
    num_heads: int = 4         # attention heads; d_model must divide evenly among them
    num_layers: int = 2        # blocks of causal self-attention + feed-forward
    d_ff: int = 256            # hidden width of the feed-forward
    dropout: float = 0.0
    positional: str = "sinusoidal"  # or "learned" (a trained position embedding)
    vocab_size: int = 68       # the task's (the default: the date task's characters)
    max_len: int = 30          # the task's longest sequence (the default: a date, then its answer)
    task: str = "dates"        # what it is trained on ("dates", "next-word"): a label for the commands
    architecture: str = "decoder-only"

    def __post_init__(self):
        self.check("decoder-only", ("d_model", "num_heads", "num_layers", "d_ff", "vocab_size", "max_len"))
        if not isinstance(self.task, str):
            raise ValueError(f"task must be a string, got {self.task!r}")

    def num_parameters(self) -> int:
        """The parameter count of ``DecoderOnlyTransformer(self)``, computed without building it."""
        d, v = self.d_model, self.vocab_size
        learned = self.max_len * d if self.positional == "learned" else 0
        return v * d + learned + self.num_layers * self.block_parameters(1, 2) + d * v + v


# ------------------------------------------------------------------ the block
class CausalSelfAttention(SelfAttention):
    """Every position attends to itself and the positions before it (the mask says which).

    A ``SelfAttention`` (so the tools that look for attention modules find it), written out here.
    """

    def __init__(self, d_model: int, num_heads: int, dropout: float = 0.0, fused: bool = True):
        self.d_model, self.num_heads, self.d_k = d_model, num_heads, d_model // num_heads
        self.w_qkv = nn.Linear(d_model, 3 * d_model)   # [W_q | W_k | W_v]: one product (nanoGPT's c_attn)
        self.w_o = nn.Linear(d_model, d_model)         # mixes the heads' outputs (nanoGPT's c_proj)
        self.dropout_p = dropout                       # on the attention weights, while training
        self.fused = fused                             # the one-kernel path below (viz turns it off)
        self.last_weights = None                       # (B, heads, Tq, Tk) of the last call, for heatmaps

    def forward(self, x: Tensor, mask=None, cache=None) -> Tensor:
        """x (B, T, d_model) -> (B, T, d_model). ``mask`` (T, Tk): True = may attend. ``cache`` (a
        dict, generation): x holds only the newest position(s); their keys and values are
        appended to ``cache["kv"]`` and the queries attend over all of them."""
        self._check_input(x, "x")
        d, heads = self.d_model, self.num_heads
        qkv = self.w_qkv(x).named("qkv")                                 # (B, T, 3d): [Q | K | V]
        if cache is not None:          # generation: the earlier positions' keys and values are cached
            kv = qkv[..., d:]                                            # (B, T, 2d): [K | V]
            cache["kv"] = kv if "kv" not in cache else concatenate([cache["kv"], kv], axis=1)
        batch, length = x.shape[0], x.shape[1]
        keys = length if cache is None else cache["kv"].shape[1]
        if mask is not None:
            mask = check_mask(mask, (batch, heads, length, keys))
        if self.fused and not (self.training and self.dropout_p > 0):
            # The fast alternative (nanoGPT's flash branch): one Numba op reads Q, K and V straight
            # out of the packed projection and does every head in one pass; the same values and
            # gradients as the steps below (tested), a training step ~1.3x faster.
            if cache is None:
                out, self.last_weights = F.self_attention(qkv, heads, mask)
            else:
                out, self.last_weights = F.cross_attention(qkv[..., :d], cache["kv"], heads, mask)
            return self.w_o(out.named("attention output"))
        # Step by step: Q, K, V, each cut into heads (B, heads, T, d_k); softmax(Q Kᵀ / sqrt(d_k)) V
        # in every head (dropout on the weights while training); the heads side by side again.
        q = qkv[..., :d]
        if cache is None:
            k, v = qkv[..., d:2 * d], qkv[..., 2 * d:]
        else:
            k, v = cache["kv"][..., :d], cache["kv"][..., d:]
        q, k, v = (t.reshape(batch, t.shape[1], heads, self.d_k).transpose(0, 2, 1, 3).named(name)
                   for t, name in ((q, "Q"), (k, "K"), (v, "V")))
        out, weights = scaled_dot_product_attention(q, k, v, mask, self.dropout_p, self.training)
        self.last_weights = weights.data
        out = out.transpose(0, 2, 1, 3).reshape(batch, length, d).named("heads concatenated")
        return self.w_o(out)


class FeedForward(nn.Module):
    """Position-wise: Linear(d_model, d_ff) -> ReLU -> dropout -> Linear(d_ff, d_model) (nanoGPT's MLP)."""

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0):
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return self.linear2(self.dropout(self.linear1(x).relu()))


class Block(nn.Module):
    """Causal self-attention, then the feed-forward, each added to its input and normalised."""

    def __init__(self, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.0):
        self.self_attn = CausalSelfAttention(d_model, num_heads, dropout)
        self.norm1 = nn.LayerNorm(d_model)
        self.feed_forward = FeedForward(d_model, d_ff, dropout)
        self.norm2 = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, mask=None, cache=None):
        x = self.norm1(x + self.dropout(self.self_attn(x, mask, cache)))
        return self.norm2(x + self.dropout(self.feed_forward(x)))


DecoderOnlyLayer = Block      # its name before it had a file of its own


class CausalStack(nn.Module):
    """N blocks, one after the other (named ``decoder.layers.N`` in the model)."""

    def __init__(self, config: DecoderOnlyConfig):
        self.layers = nn.ModuleList(Block(config.d_model, config.num_heads, config.d_ff, config.dropout)
                                    for _ in range(config.num_layers))

    def forward(self, x, mask, caches=None):
        for i, block in enumerate(self.layers):
            x = block(x, mask, None if caches is None else caches[i])
        return x


# ------------------------------------------------------------------ positions
def sinusoidal_encoding(length: int, d_model: int) -> np.ndarray:
    """(length, d_model) float64 table of "Attention Is All You Need"; works for odd d_model too
    (the last cos column is dropped):

        PE(pos, 2i)   = sin(pos / 10000^(2i / d_model))
        PE(pos, 2i+1) = cos(pos / 10000^(2i / d_model))

    For example PE(3, 0) = sin(3 / 10000^0) = sin 3 = 0.1411 (``dates-explain`` prints the table).
    """
    if length < 0 or d_model < 1:
        raise ValueError(f"sinusoidal_encoding needs length >= 0 and d_model >= 1, got {length}, {d_model}")
    pos = np.arange(length, dtype=np.float64)[:, None]
    two_i = np.arange(0, d_model, 2, dtype=np.float64)          # 2i for every sin/cos pair
    angle = pos / np.power(10000.0, two_i / d_model)             # (length, ceil(d/2))
    table = np.zeros((length, d_model))
    table[:, 0::2] = np.sin(angle)
    table[:, 1::2] = np.cos(angle[:, : d_model // 2])
    return table


class SinusoidalPositions(nn.Module):
    """Adds the fixed table (no parameters) to token vectors (B, T, D), starting at ``offset``."""

    def __init__(self, max_len: int, d_model: int):
        self.max_len = max_len
        self.table = sinusoidal_encoding(max_len, d_model)
        self.rows = {}    # (dtype, offset, length) -> those rows as a constant Tensor, made once

    def forward(self, x, offset: int = 0):
        check_length(offset + x.shape[1], self.max_len)
        key = (x.dtype, offset, x.shape[1])
        rows = self.rows.get(key)
        if rows is None:    # the same tensor on every call: a traced step may keep it (a new one looks like data)
            rows = self.rows[key] = Tensor(self.table[offset: offset + x.shape[1]].astype(x.dtype))
        return x + rows


class LearnedPositions(nn.Module):
    """Adds a trained vector per position."""

    def __init__(self, max_len: int, d_model: int):
        self.max_len = max_len
        self.embedding = nn.Embedding(max_len, d_model)

    def forward(self, x, offset: int = 0):
        check_length(offset + x.shape[1], self.max_len)
        return x + self.embedding.weight[offset: offset + x.shape[1]]


def positions(config) -> nn.Module:
    """The position module ``config.positional`` names."""
    Positions = SinusoidalPositions if config.positional == "sinusoidal" else LearnedPositions
    return Positions(config.max_len, config.d_model)


# ------------------------------------------------------------------ the model
class DecoderOnlyTransformer(nn.Module):
    def __init__(self, config: DecoderOnlyConfig = None):
        self.config = config = config or DecoderOnlyConfig()
        self.embedding = nn.Embedding(config.vocab_size, config.d_model)
        self.positions = positions(config)
        self.embed_dropout = nn.Dropout(config.dropout)
        self.decoder = CausalStack(config)
        self.output = nn.Linear(config.d_model, config.vocab_size)
        xavier_init(self)

    def embed(self, ids, offset: int = 0) -> Tensor:
        """Token ids (B, T) at positions offset.. -> input vectors (B, T, d_model)."""
        x = self.embedding(ids) * math.sqrt(self.config.d_model)
        return self.embed_dropout(self.positions(x, offset))

    def forward(self, ids, caches=None) -> Tensor:
        """Token ids (B, T) -> logits (B, T, vocab). With ``caches`` (from ``new_caches``) ids are
        the next T positions after the ones the caches hold."""
        ids = check_ids(ids, "token", self.config)
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

    def generate(self, prompt, max_new_tokens: int, pick=None, stop=None, fill=None, use_cache=True) -> np.ndarray:
        """Continue every row of ``prompt`` (B, P) by ``max_new_tokens`` tokens -> (B, max_new_tokens).

        ``pick`` (logits (B, vocab) -> ids (B,)) chooses each token (default: the most likely);
        after a row writes ``stop`` it gets ``fill``. ``use_cache=False`` recomputes the whole
        sequence every step (slower; kept to test that caching changes nothing). Call it under
        ``no_grad`` in eval mode (``decoding.inference(model)``).
        """
        prompt = check_ids(prompt, "prompt", self.config)
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

    def new_caches(self):
        """One empty key/value cache per block."""
        return [{} for _ in range(self.config.num_layers)]

    def reorder_caches(self, caches, order):
        """Keep the cached rows ``order`` (beam search reorders and copies its beams)."""
        for cache in caches:
            if "kv" in cache:
                cache["kv"] = Tensor(cache["kv"].data[order])


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
    # the targets by an op: a traced step computes them (and so the count scored) for every batch
    return ids[:, :-1], F.array_function(scored_targets, ids, predict)


def scored_targets(ids, predict):
    """Each position's next token where it is predicted, else ``IGNORE`` (arrays in, array out)."""
    return np.where(predict[:, 1:], ids[:, 1:], IGNORE)


# ------------------------------------------- initialisation and input checks
def xavier_init(model: nn.Module):
    """Xavier-uniform for every matrix, as PyTorch's nn.Transformer does (its
    _reset_parameters); with embeddings scaled by sqrt(d) this trains the date task in a few
    hundred steps. A packed projection (w_qkv, w_kv) gets it block by block, as the separate
    d x d matrices it holds would."""
    for name, p in model.named_parameters():
        if p.ndim == 2:
            linear = name.split(".")[-2]             # 'w_qkv' in '...self_attn.w_qkv.weight'
            parts = len(PACKED_PROJECTIONS[linear]) if linear in PACKED_PROJECTIONS else 1
            rows, columns = p.shape[0], p.shape[1] // parts
            bound = math.sqrt(6.0 / (rows + columns))
            blocks = [rng.generator().uniform(-bound, bound, (rows, columns)) for _ in range(parts)]
            p.data = np.concatenate(blocks, axis=1).astype(p.dtype)


def check_ids(ids, what: str, config) -> np.ndarray:
    """``ids`` as an integer (batch, length) array no longer than ``config.max_len``, or a one-line error."""
    ids = np.asarray(ids.data if isinstance(ids, Tensor) else ids)
    if ids.ndim != 2:
        raise ValueError(f"{what} ids must be a (batch, length) array, got shape {ids.shape}")
    if ids.dtype.kind not in "iu":
        raise TypeError(f"{what} ids must be integers, got dtype {ids.dtype}")
    if ids.shape[1] > config.max_len:
        raise ValueError(f"{what} length {ids.shape[1]} exceeds the model's max_len {config.max_len}")
    return ids


def check_length(length: int, max_len: int):
    if length > max_len:
        raise ValueError(f"sequence of length {length} is longer than the model's max_len {max_len}")
