"""The encoder-decoder Transformer of "Attention Is All You Need", the whole model in this file.

    src ids (B, S) -> embed * sqrt(d) + positions -> EncoderLayer x N -> memory (B, S, D)
    tgt ids (B, T) -> embed * sqrt(d) + positions -> DecoderLayer x N (masked self-attention,
                      cross-attention over memory) -> Linear -> logits (B, T, vocab)

Read it top to bottom: the config (numbers only: the task supplies the vocabulary size, the
longest sequence and the padding id), the encoder's block (two residual lines), the decoder's
(three: its self-attention, the cross-attention over the encoder's output, the feed-forward),
then the model. Its parts are the decoder-only model's (``decoder_only.py``: the feed-forward,
the positions, the initialisation and the id check) and the attention module's; what it adds is
the encoder, cross-attention and the padding mask.

``encode`` and ``decode`` are separate so decoding encodes the source once; ``decode_step`` adds
one token at a time using per-layer key/value caches.
"""
import math
from dataclasses import dataclass

import numpy as np

from minigrad import Tensor, nn

from transformer.models.attention import CrossAttention, SelfAttention, causal_mask, padding_mask
from transformer.models.decoder_only import FeedForward, Shape, check_ids, positions, xavier_init


@dataclass
class ModelConfig(Shape):
    d_model: int = 64          # width of every token vector
    num_heads: int = 4         # attention heads; d_model must divide evenly among them
    num_encoder_layers: int = 2
    num_decoder_layers: int = 2
    d_ff: int = 256            # hidden width of the position-wise feed-forward
    dropout: float = 0.0       # the date task is clean and plentiful: dropout only slows it
    positional: str = "sinusoidal"  # or "learned" (a trained position embedding)
    vocab_size: int = 68       # the task's (the default: the date task's characters)
    max_len: int = 20          # the task's longest sequence (the default: a date's answer)
    pad_id: int = 67           # the task's padding token, hidden from attention (the date task's <pad>)
    architecture: str = "encoder-decoder"

    def __post_init__(self):
        self.check("encoder-decoder", ("d_model", "num_heads", "num_encoder_layers", "num_decoder_layers",
                                       "d_ff", "vocab_size", "max_len"))
        if isinstance(self.pad_id, bool) or not isinstance(self.pad_id, int) \
                or not 0 <= self.pad_id < self.vocab_size:
            raise ValueError(f"pad_id must be a token id in 0..{self.vocab_size - 1}, got {self.pad_id!r}")

    def num_parameters(self) -> int:
        """The parameter count of ``Transformer(self)``, computed without building it."""
        d, v = self.d_model, self.vocab_size
        learned = 2 * self.max_len * d if self.positional == "learned" else 0
        return (2 * v * d + learned + self.num_encoder_layers * self.block_parameters(1, 2)
                + self.num_decoder_layers * self.block_parameters(2, 3) + d * v + v)


class EncoderLayer(nn.Module):
    """Self-attention over the whole source (padding hidden), then the feed-forward."""

    def __init__(self, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.0):
        self.self_attn = SelfAttention(d_model, num_heads, dropout)
        self.norm1 = nn.LayerNorm(d_model)
        self.feed_forward = FeedForward(d_model, d_ff, dropout)
        self.norm2 = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, mask=None):
        x = self.norm1(x + self.dropout(self.self_attn(x, mask)))
        return self.norm2(x + self.dropout(self.feed_forward(x)))


class DecoderLayer(nn.Module):
    """Masked self-attention, cross-attention over the encoder's output ``memory``, the feed-forward."""

    def __init__(self, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.0):
        self.self_attn = SelfAttention(d_model, num_heads, dropout)
        self.norm1 = nn.LayerNorm(d_model)
        self.cross_attn = CrossAttention(d_model, num_heads, dropout)
        self.norm2 = nn.LayerNorm(d_model)
        self.feed_forward = FeedForward(d_model, d_ff, dropout)
        self.norm3 = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, memory, self_mask=None, memory_mask=None, cache=None):
        """``cache`` (a dict, incremental decoding): x holds only the newest position(s);
        their keys/values are appended to the cached ones (``cache["self"]``), and the
        memory's keys/values are projected once and reused (``cache["memory"]``). Without a
        cache x is the whole prefix."""
        self_cache = None if cache is None else cache.setdefault("self", {})
        memory_cache = None if cache is None else cache.setdefault("memory", {})
        x = self.norm1(x + self.dropout(self.self_attn(x, self_mask, cache=self_cache)))
        x = self.norm2(x + self.dropout(self.cross_attn(x, memory, memory_mask, cache=memory_cache)))
        return self.norm3(x + self.dropout(self.feed_forward(x)))


class Encoder(nn.Module):
    def __init__(self, config: ModelConfig):
        self.layers = nn.ModuleList(
            EncoderLayer(config.d_model, config.num_heads, config.d_ff, config.dropout)
            for _ in range(config.num_encoder_layers))

    def forward(self, x, mask):
        for layer in self.layers:
            x = layer(x, mask)
        return x


class Decoder(nn.Module):
    def __init__(self, config: ModelConfig):
        self.layers = nn.ModuleList(
            DecoderLayer(config.d_model, config.num_heads, config.d_ff, config.dropout)
            for _ in range(config.num_decoder_layers))

    def forward(self, x, memory, self_mask, memory_mask, caches=None):
        for i, layer in enumerate(self.layers):
            x = layer(x, memory, self_mask, memory_mask, None if caches is None else caches[i])
        return x


class Transformer(nn.Module):
    def __init__(self, config: ModelConfig = None):
        self.config = config = config or ModelConfig()
        d = config.d_model
        self.src_embed = nn.Embedding(config.vocab_size, d)
        self.tgt_embed = nn.Embedding(config.vocab_size, d)
        self.src_positions = positions(config)
        self.tgt_positions = positions(config)
        self.embed_dropout = nn.Dropout(config.dropout)
        self.encoder = Encoder(config)
        self.decoder = Decoder(config)
        self.output = nn.Linear(d, config.vocab_size)
        xavier_init(self)

    # ----------------------------------------------------------------- parts
    def embed(self, ids, embedding, positions, offset=0):
        x = embedding(ids) * math.sqrt(self.config.d_model)
        return self.embed_dropout(positions(x, offset))

    def encode(self, src):
        """Source ids (B, S) -> (memory (B, S, D), source mask (B, 1, 1, S))."""
        src = check_ids(src, "source", self.config)
        src_mask = padding_mask(src, self.config.pad_id)
        x = self.embed(src, self.src_embed, self.src_positions)
        return self.encoder(x, src_mask), src_mask

    def decode(self, tgt_in, memory, src_mask):
        """Teacher-forced decoder: target ids (B, T) -> logits (B, T, vocab)."""
        tgt_in = check_ids(tgt_in, "target", self.config)
        length = tgt_in.shape[1]
        self_mask = padding_mask(tgt_in, self.config.pad_id, causal=causal_mask(length))   # (B, 1, T, T)
        y = self.embed(tgt_in, self.tgt_embed, self.tgt_positions)
        return self.output(self.decoder(y, memory, self_mask, src_mask))

    def forward(self, src, tgt_in):
        memory, src_mask = self.encode(src)
        return self.decode(tgt_in, memory, src_mask)

    # ----------------------------------------------------- incremental decode
    def new_caches(self):
        """One empty key/value cache per decoder layer."""
        return [{} for _ in range(self.config.num_decoder_layers)]

    def decode_step(self, tokens, position, memory, src_mask, caches):
        """Logits (B, vocab) for the next token after feeding ``tokens`` (B,) at ``position``.

        Only the new position is computed: each layer appends its keys/values to
        ``caches`` (from ``new_caches()``), so T steps cost O(T) positions, not O(T^2).
        """
        tokens = np.asarray(tokens).reshape(-1, 1)
        y = self.embed(tokens, self.tgt_embed, self.tgt_positions, offset=position)
        # the cached keys are all earlier positions, so no causal mask is needed
        out = self.decoder(y, memory, None, src_mask, caches)
        return self.output(out)[:, 0, :]

    def reorder_caches(self, caches, order):
        """Keep the self-attention cache rows ``order`` (beam search reorders and copies
        beams). The memory's keys/values need no reordering: beams only ever move within
        the rows of their own source, whose memory rows are identical."""
        for cache in caches:
            if "kv" in cache.get("self", {}):
                cache["self"]["kv"] = Tensor(cache["self"]["kv"].data[order])
