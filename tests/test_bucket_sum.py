"""The halves' weighted gradient sum over flat buckets: chunk by chunk and on two workers it gives
the bits of the whole-array numpy expression, for small and large arrays and any piece count."""
import numpy as np
import pytest

from transformer.parallel import data_parallel


class Flat:
    """The two things ``_add_buckets`` uses of a ``FlatParameters``."""

    def __init__(self, size):
        self.grads, self.dtype, self.set = np.full(size, np.nan, np.float32), np.dtype(np.float32), False

    def set_grads(self):
        self.set = True


@pytest.mark.parametrize("size", [1, 1000, data_parallel.SPLIT_FROM - 1, data_parallel.SPLIT_FROM + 12345])
@pytest.mark.parametrize("pieces", [2, 4])
@pytest.mark.parametrize("workers", [1, 2])
def test_the_sum_has_the_bits_of_whole_array_numpy(size, pieces, workers):
    rng = np.random.default_rng(size + pieces)
    buckets = [rng.standard_normal(size, dtype=np.float32) * np.float32(10.0 ** rng.integers(-3, 3))
               for _ in range(pieces)]
    tokens = rng.integers(500, 700, pieces)
    shares = [t / tokens.sum() for t in tokens]
    expected = buckets[0] * np.float32(shares[0])
    for share, bucket in zip(shares[1:], buckets[1:]):
        expected += bucket * np.float32(share)
    flat = Flat(size)
    data_parallel._add_buckets(flat, shares, buckets, workers)
    assert flat.set and flat.grads.tobytes() == expected.tobytes()
