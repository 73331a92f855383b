"""The two-layer rung less one of its training aids: what each buys.

The second layer is what recall needs to be *expressible* (one layer cannot do two steps). The
rest of the rung is about whether training finds it on the ladder's budget: the residuals, layer
norm, W_o, the own classifier, the random maps and the learning rate. Each variant is the rung
with one of them taken away (or two, where one alone was not enough), built from the same seed
(what they share starts the same):

    two layers, without residuals        each layer's output replaces its input
    two layers, without layer norm       each layer's sum is not normalised
    two layers, identity maps            every map starts as the identity, as on the rungs below
                                         (the second layer's W_v at zero: it adds nothing at first)
    two layers, without own classifier   the words scored by their embeddings and a bias, as below
    two layers, without W_o              each layer's heads are not mixed by a map
    two layers, without W_o and own classifier
    two layers, lr 1e-2                  the one-layer rungs' learning rate
"""
from transformer.ladder.rungs import TwoLayers


def variant(name: str, **changes) -> type:
    """The two-layer rung with ``changes`` to its class attributes (``residuals=False``, ...)."""
    return type("TwoLayersVariant", (TwoLayers,), {"name": name, **changes})


class AtTheRungsRate(TwoLayers):
    name = "two layers, lr 1e-2"

    @classmethod
    def learning_rate(cls, config) -> float:
        return config.lr


LAYER_VARIANTS = {v.name: v for v in (
    variant("two layers, without residuals", residuals=False),
    variant("two layers, without layer norm", layer_norm=False),
    variant("two layers, identity maps", random_maps=False),
    variant("two layers, without own classifier", own_classifier=False),
    variant("two layers, without W_o", output_maps=False),
    variant("two layers, without W_o and own classifier", output_maps=False, own_classifier=False),
    AtTheRungsRate)}
