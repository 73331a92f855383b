"""The heads rung with its values taken from elsewhere: what a space of their own buys.

In the heads rung each head matches in one space (its queries and keys, X W_q and X W_k) and
moves what it found in another (its values, X W_v). The two variants here are the same rung
with W_v taken away:

    ValuesAreKeys    each head moves the keys it matched on, X W_k: one space for both
    ValuesAreWords   each head moves its slice of the words' own vectors, X (as the dot product rung)

Every other weight is built the same way from the same seed (W_v is still made, then dropped,
so the random draws that follow are the heads rung's), and W_v starts as the identity, like
W_k: before training the three compute the same logits, so a difference after training is what
a separate value space lets training find.
"""
from transformer.ladder.rungs import Heads, causal_softmax


class _OtherValues(Heads):
    values_from = ""

    def __init__(self, vocab_size, d_model, max_len):
        super().__init__(vocab_size, d_model, max_len)
        del self.w_v                    # no value map: the values come from ``values``

    def context(self, x):
        heads = causal_softmax(self.scores(x)) @ self.split(self.values(x))        # (B, h, T, d/h)
        batch, _, length, _ = heads.shape
        return heads.transpose(0, 2, 1, 3).reshape(batch, length, self.d_model)


class ValuesAreKeys(_OtherValues):
    name, idea = "heads, values = keys", "each head moves the keys it matched on, X W_k: no value space of its own"

    def values(self, x):
        return self.w_k(x)


class ValuesAreWords(_OtherValues):
    name, idea = "heads, values = words", "each head moves its slice of the words' own vectors: no value map"

    def values(self, x):
        return x


VALUE_VARIANTS = {"own": Heads, "keys": ValuesAreKeys, "words": ValuesAreWords}
"""Where the heads rung's values come from -> the rung that takes them from there."""
