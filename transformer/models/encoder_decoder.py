"""The encoder-decoder Transformer, built only on minigrad.

    src ids (B, S) -> embed * sqrt(d) + positions -> EncoderLayer x N -> memory (B, S, D)
    tgt ids (B, T) -> embed * sqrt(d) + positions -> DecoderLayer x N (masked self-attn,
                      cross-attn over memory) -> Linear -> logits (B, T, vocab)

``encode`` and ``decode`` are separate so decoding encodes the source once;
``decode_step`` adds one token at a time using per-layer key/value caches.
"""
import math

import numpy as np

from minigrad import Tensor, nn, rng

from transformer.models.attention import PACKED_PROJECTIONS, causal_mask, padding_mask
from transformer.models.config import ModelConfig
from transformer.tasks.dates import PAD
from transformer.models.layers import DecoderLayer, EncoderLayer
from transformer.models.positional import LearnedPositions, SinusoidalPositions


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
        Positions = SinusoidalPositions if config.positional == "sinusoidal" else LearnedPositions
        self.src_positions = Positions(config.max_len, d)
        self.tgt_positions = Positions(config.max_len, d)
        self.embed_dropout = nn.Dropout(config.dropout)
        self.encoder = Encoder(config)
        self.decoder = Decoder(config)
        self.output = nn.Linear(d, config.vocab_size)
        self._init_weights()

    def _init_weights(self):
        xavier_init(self)

    # ----------------------------------------------------------------- parts
    def embed(self, ids, embedding, positions, offset=0):
        x = embedding(ids) * math.sqrt(self.config.d_model)
        return self.embed_dropout(positions(x, offset))

    def encode(self, src):
        """Source ids (B, S) -> (memory (B, S, D), source mask (B, 1, 1, S))."""
        src = _check_ids(src, "source", self.config)
        src_mask = padding_mask(src, PAD)
        x = self.embed(src, self.src_embed, self.src_positions)
        return self.encoder(x, src_mask), src_mask

    def decode(self, tgt_in, memory, src_mask):
        """Teacher-forced decoder: target ids (B, T) -> logits (B, T, vocab)."""
        tgt_in = _check_ids(tgt_in, "target", self.config)
        length = tgt_in.shape[1]
        self_mask = causal_mask(length)[None, None] & padding_mask(tgt_in, PAD)   # (B, 1, T, T)
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


def xavier_init(model: nn.Module):
    """Xavier-uniform for every matrix, as PyTorch's nn.Transformer does (its
    _reset_parameters); with embeddings scaled by sqrt(d) this trains the date task
    in a few hundred steps. A packed projection (w_qkv, w_kv) gets it block by
    block, as the separate d x d matrices it holds would."""
    for name, p in model.named_parameters():
        if p.ndim == 2:
            linear = name.split(".")[-2]             # 'w_qkv' in '...self_attn.w_qkv.weight'
            parts = len(PACKED_PROJECTIONS[linear]) if linear in PACKED_PROJECTIONS else 1
            rows, columns = p.shape[0], p.shape[1] // parts
            bound = math.sqrt(6.0 / (rows + columns))
            blocks = [rng.generator().uniform(-bound, bound, (rows, columns)) for _ in range(parts)]
            p.data = np.concatenate(blocks, axis=1).astype(p.dtype)


def _check_ids(ids, what, config):
    ids = np.asarray(ids.data if isinstance(ids, Tensor) else ids)
    if ids.ndim != 2:
        raise ValueError(f"{what} ids must be a (batch, length) array, got shape {ids.shape}")
    if ids.dtype.kind not in "iu":
        raise TypeError(f"{what} ids must be integers, got dtype {ids.dtype}")
    if ids.shape[1] > config.max_len:
        raise ValueError(f"{what} length {ids.shape[1]} exceeds the model's max_len {config.max_len}")
    return ids
