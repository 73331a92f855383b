"""The full block with one of its parts taken away: which of them does recall need?

Against the heads rung the full block (``rungs.FullBlock``, the decoder-only model) adds ten things
at once. ``full_block_without(part)`` is the full block built exactly as the ladder builds it (the
same seed draws the same weights), then with ``part`` removed:

    feed-forward      each block is attention alone (no feed-forward sublayer)
    residuals         each sublayer's output replaces its input instead of being added to it
    layer norm        no layer norm after either sublayer
    second layer      one block instead of two
    W_o and biases    the heads side by side are the attention's output (no W_o), Q, K, V without biases
    own classifier    the classifier is the embedding table plus a bias per word, as on the rungs
    embedding scale   the embeddings are not multiplied by sqrt(d)
    Xavier init       every matrix drawn as minigrad's layers draw it (Linear: uniform within
                      1/sqrt(fan in); embeddings and positions N(0, 1/d), as on the rungs)
    random positions  the positions start at zero, as on the rungs
    lr 3e-3           trained at the rungs' learning rate, 1e-2

With nothing removed it computes the full block's logits (tested), so every difference in what it
learns is the part's.
"""
import math

import numpy as np

from minigrad import nn, rng
from minigrad import functional as F

from transformer.models.attention import causal_mask
from transformer.ladder.rungs import FullBlock, row_numbers

PARTS = ("feed-forward", "residuals", "layer norm", "second layer", "W_o and biases", "own classifier",
         "embedding scale", "Xavier init", "random positions", "lr 3e-3")
RUNG_LR_PART = "lr 3e-3"       # the part that is the training's, not the model's


class FullBlockWithout(FullBlock):
    """``FullBlock`` less the parts in ``removed`` (a class attribute: ``full_block_without`` makes one
    class per part, so the ladder's trainer builds it as it builds a rung)."""

    removed = frozenset()

    @classmethod
    def learning_rate(cls, config) -> float:
        return config.lr if RUNG_LR_PART in cls.removed else config.full_block_lr

    def __init__(self, vocab_size, d_model, max_len):
        super().__init__(vocab_size, d_model, max_len)
        model, removed = self.model, self.removed
        if "Xavier init" in removed:
            redraw_as_layers_do(model, d_model)
        if "random positions" in removed:
            model.positions.embedding.weight.data[:] = 0.0
        if "second layer" in removed:
            model.decoder.layers = nn.ModuleList(list(model.decoder.layers)[:1])
        for block in model.decoder.layers:
            if "feed-forward" in removed:
                block.feed_forward = block.norm2 = None
            if "layer norm" in removed:
                block.norm1 = block.norm2 = None
            if "W_o and biases" in removed:
                block.self_attn.w_o = None
                block.self_attn.w_qkv.bias = None
        if "own classifier" in removed:
            model.output = None
            self.bias = nn.Parameter(np.zeros(vocab_size))       # the rungs' classifier bias

    def forward(self, ids, at=None):
        model, removed = self.model, self.removed
        x = model.embedding(ids)
        if "embedding scale" not in removed:
            x = x * math.sqrt(self.model.config.d_model)
        x = model.positions(x)
        mask = causal_mask(ids.shape[1])
        for block in model.decoder.layers:
            x = self.sublayer(block, x, self.attend(block.self_attn, x, mask), block.norm1)
            if block.feed_forward is not None:
                x = self.sublayer(block, x, block.feed_forward(x), block.norm2)
        if at is not None:
            x = x[row_numbers(len(at)), at]
        if model.output is None:
            return x @ model.embedding.weight.T + self.bias
        return model.output(x)

    def sublayer(self, block, x, out, norm):
        """The sublayer's ``out`` added to its input ``x`` (residuals), then normalised (layer norm)."""
        if "residuals" not in self.removed:
            out = x + out
        return out if norm is None else norm(out)

    @staticmethod
    def attend(attention, x, mask):
        """The block's attention, run as ``CausalSelfAttention`` runs it (the fused kernel), and without
        ``W_o`` where it has none."""
        qkv = attention.w_qkv(x)
        out, attention.last_weights = F.self_attention(qkv, attention.num_heads, mask)
        return out if attention.w_o is None else attention.w_o(out)


def redraw_as_layers_do(model, d_model: int):
    """Every matrix of ``model`` drawn again as minigrad's layers draw it, the embeddings as the rungs'."""
    for name, p in model.named_parameters():
        if p.ndim != 2:
            continue
        if name.endswith("embedding.weight"):
            p.data = (rng.generator().standard_normal(p.shape) / math.sqrt(d_model)).astype(p.dtype)
        else:
            bound = 1.0 / math.sqrt(p.shape[0])
            p.data = rng.generator().uniform(-bound, bound, p.shape).astype(p.dtype)


def full_block_without(*parts) -> type:
    """The full block's class with ``parts`` (names of ``PARTS``) removed; ValueError for another name."""
    unknown = [part for part in parts if part not in PARTS]
    if unknown:
        raise ValueError(f"unknown part {unknown[0]!r} of the full block; the parts are {', '.join(PARTS)}")
    name = "full block" + "".join(f", without {part}" for part in parts)
    return type("FullBlockWithout", (FullBlockWithout,), {"removed": frozenset(parts), "name": name})
