"""Attention by hand, checked with minigrad: the worked exercise of three words and the
averaging matrix of next-word prediction.

Three words with 2-D embeddings [1, 0], [0, 1], [1, 1] and identity W_Q = W_K = W_V:
Q = K = V = X, so the scores are X Xᵀ.
"""
import math

import numpy as np

from minigrad import Tensor
from transformer.models.attention import causal_mask, scaled_dot_product_attention

X = Tensor(np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]))
IDENTITY = Tensor(np.eye(2))


def projections():
    return X @ IDENTITY, X @ IDENTITY, X @ IDENTITY          # Q, K, V


def test_scores_by_hand():
    q, k, _ = projections()
    scores = q @ k.swapaxes(-1, -2)
    np.testing.assert_array_equal(scores.data, [[1, 0, 1], [0, 1, 1], [1, 1, 2]])


def test_scaled_weights_of_the_third_word():
    q, k, v = projections()
    _, weights = scaled_dot_product_attention(q, k, v)      # divides by sqrt(d_k) = sqrt(2)
    # the exercise's answer [0.248, 0.248, 0.504] is rounded so that the row sums to 1;
    # to three places the last weight is 0.503 (0.50349)
    np.testing.assert_allclose(weights.data[2], [0.248, 0.248, 0.504], atol=1e-3)
    assert np.round(weights.data[2], 3).tolist() == [0.248, 0.248, 0.503]
    # by hand: the third row's scores 1, 1, 2 over sqrt(2)
    e = [math.exp(s / math.sqrt(2)) for s in (1, 1, 2)]
    np.testing.assert_allclose(weights.data[2], [x / sum(e) for x in e], rtol=1e-12)


def test_causal_mask_second_row():
    q, k, v = projections()
    _, weights = scaled_dot_product_attention(q, k, v, mask=causal_mask(3))
    np.testing.assert_allclose(weights.data[1], [0.330, 0.670, 0.0], atol=5e-4)
    assert weights.data[1, 2] == 0.0 and weights.data[0, 1:].tolist() == [0.0, 0.0]
    np.testing.assert_allclose(weights.data.sum(axis=-1), 1.0, rtol=1e-12)


def averaging_by_loop(x):
    """Row t of the result is the mean of x[0..t] (the running average, as a double loop)."""
    out = np.zeros_like(x)
    for t in range(x.shape[0]):
        for s in range(t + 1):
            out[t] += x[s] / (t + 1)
    return out


def test_averaging_matrix_row_i_holds_one_over_i_plus_one():
    T = 5
    tril = Tensor(np.tril(np.ones((T, T))))
    average = tril / tril.sum(axis=-1, keepdims=True)                    # row i: 1/(i+1) on 0..i
    zeros_softmax = Tensor(np.zeros((T, T))).masked_fill(~causal_mask(T), -np.inf).softmax(axis=-1)
    expected = np.array([[1 / (i + 1) if j <= i else 0.0 for j in range(T)] for i in range(T)])
    np.testing.assert_allclose(average.data, expected, rtol=1e-15)
    np.testing.assert_allclose(zeros_softmax.data, expected, rtol=1e-15)
    x = np.random.default_rng(0).standard_normal((T, 3))
    np.testing.assert_allclose((average @ Tensor(x)).data, averaging_by_loop(x), rtol=1e-12)

    one_over_t = np.tril(np.full((T, T), 1 / T))
    assert not np.allclose(one_over_t, average.data), (
        "with 1/T in every lower-triangular cell, row i sums to (i+1)/T, not 1: the first word's "
        "'average' would be a fifth of its embedding. Row i averages i+1 words, so it holds 1/(i+1)")
    np.testing.assert_allclose(average.data.sum(axis=-1), 1.0, rtol=1e-15,
                               err_msg="each row of the averaging matrix must sum to 1: it averages the "
                                       "words so far, and row i has i+1 of them, so it holds 1/(i+1), not 1/T")
    np.testing.assert_allclose(one_over_t.sum(axis=-1), np.arange(1, T + 1) / T)
