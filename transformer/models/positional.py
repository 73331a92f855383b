"""Positional information: the sinusoidal table of "Attention Is All You Need", or a learned embedding.

PE(pos, 2i)   = sin(pos / 10000^(2i / d_model))
PE(pos, 2i+1) = cos(pos / 10000^(2i / d_model))

For example PE(3, 0) = sin(3 / 10000^0) = sin 3 = 0.1411 (``dates-explain`` prints the whole table).
"""
import numpy as np

from minigrad import nn


def sinusoidal_encoding(length: int, d_model: int) -> np.ndarray:
    """(length, d_model) float64 table; works for odd d_model too (the last cos column is dropped)."""
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

    def forward(self, x, offset: int = 0):
        _check_length(offset + x.shape[1], self.max_len)
        return x + self.table[offset: offset + x.shape[1]].astype(x.dtype, copy=False)


class LearnedPositions(nn.Module):
    """Adds a trained vector per position."""

    def __init__(self, max_len: int, d_model: int):
        self.max_len = max_len
        self.embedding = nn.Embedding(max_len, d_model)

    def forward(self, x, offset: int = 0):
        _check_length(offset + x.shape[1], self.max_len)
        return x + self.embedding.weight[offset: offset + x.shape[1]]


def _check_length(length, max_len):
    if length > max_len:
        raise ValueError(f"sequence of length {length} is longer than the model's max_len {max_len}")
