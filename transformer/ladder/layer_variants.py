"""The two-layer rungs less one thing, or with one more of the full block's parts: what each buys.

A second layer is what recall needs to be *expressible* (one layer cannot do two steps); the
residuals, layer norm, the learning rate, ``W_o``, the own classifier and the initialisation are
about whether training finds it. Each variant is built from the same seed as the rung it starts
from (what they share starts the same), and differs in one thing from the variant or rung above it:

    two layers, without residuals   the two-layer rung, each layer's output replacing its input (the
                                    second layer's W_v starts as the identity, as every new map of
                                    the ladder: at zero it would pass nothing on)
    layer norm, lr 1e-2             the layer norm rung at the one-layer rungs' learning rate
    layer norm + W_o                the layer norm rung, each layer mixing its heads' outputs with a
                                    map W_o (starting as the identity: the same logits before training)
    layer norm + W_o + own classifier
                                    and the words scored by a Linear(d, vocab) of their own, not by
                                    their embeddings
    ..., random maps                and every map (W_q, W_k, W_v, W_o of both layers) drawn at random
                                    as minigrad's Linear draws it, instead of as the identity (the
                                    full block's maps start random too)
"""
import math

from minigrad import nn, rng

from transformer.ladder.rungs import LayerNorm, TwoLayers, identity_map


class TwoLayersWithoutResiduals(TwoLayers):
    name = "two layers, without residuals"
    residuals = False


class LayerNormAtTheRungsRate(LayerNorm):
    name = "layer norm, lr 1e-2"

    @classmethod
    def learning_rate(cls, config) -> float:
        return config.lr


class OutputMaps(LayerNorm):
    """Each layer mixes its heads' outputs with one more map, W_o, before adding them to its input: a
    head's output no longer lands in its own d/4 dimensions only."""

    name = "layer norm + W_o"

    def __init__(self, vocab_size, d_model, max_len):
        super().__init__(vocab_size, d_model, max_len)
        self.output_maps = nn.ModuleList([identity_map(d_model), identity_map(d_model)])

    def attention(self, x, index, maps=None):
        return self.output_maps[index](super().attention(x, index, maps))


class OwnClassifier(OutputMaps):
    """The words scored by a Linear(d, vocab) with a bias per word, instead of the embedding table: what
    a word means when read and how its score is read off the last layer may differ."""

    name = "layer norm + W_o + own classifier"

    def __init__(self, vocab_size, d_model, max_len):
        super().__init__(vocab_size, d_model, max_len)
        del self.bias                                             # the classifier has its own
        self.classifier = nn.Linear(d_model, vocab_size)

    def classify(self, context):
        return self.classifier(context)


class RandomMaps(OwnClassifier):
    name = "layer norm + W_o + own classifier, random maps"

    def __init__(self, vocab_size, d_model, max_len):
        super().__init__(vocab_size, d_model, max_len)
        bound = 1.0 / math.sqrt(d_model)
        for layer in (self.w_q, self.w_k, self.w_v, self.layer2.w_q, self.layer2.w_k, self.layer2.w_v,
                      *self.output_maps):
            layer.weight.data = rng.generator().uniform(-bound, bound, layer.weight.shape).astype(layer.weight.dtype)


LAYER_VARIANTS = {variant.name: variant for variant in
                  (TwoLayersWithoutResiduals, LayerNormAtTheRungsRate, OutputMaps, OwnClassifier, RandomMaps)}
