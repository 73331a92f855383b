"""The blocks of the encoder and decoder (post-LN, as in "Attention Is All You Need"):

    EncoderLayer:  x = LN(x + SelfAttn(x));  x = LN(x + FFN(x))
    DecoderLayer:  x = LN(x + MaskedSelfAttn(x));  x = LN(x + CrossAttn(x, memory));  x = LN(x + FFN(x))
    DecoderOnlyLayer:  x = LN(x + MaskedSelfAttn(x));  x = LN(x + FFN(x))    (a decoder-only model's block)
"""
from minigrad import nn

from transformer.models.attention import CrossAttention, SelfAttention


class FeedForward(nn.Module):
    """Position-wise: Linear(d_model, d_ff) -> ReLU -> dropout -> Linear(d_ff, d_model)."""

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0):
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return self.linear2(self.dropout(self.linear1(x).relu()))


class EncoderLayer(nn.Module):
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


class DecoderOnlyLayer(EncoderLayer):
    """A decoder-only (GPT-style) block: the encoder's two sublayers and norms, its self-attention
    given a causal mask, and the key/value cache of incremental decoding (a decoder without
    cross-attention: nothing to attend to but its own earlier positions).

    ``mask``: True = may attend (``causal_mask``). ``cache`` (a dict): x holds only the newest
    position(s), whose keys/values are appended to the cached ones (``SelfAttention``'s cache).
    """

    def forward(self, x, mask=None, cache=None):
        x = self.norm1(x + self.dropout(self.self_attn(x, mask, cache=cache)))
        return self.norm2(x + self.dropout(self.feed_forward(x)))
