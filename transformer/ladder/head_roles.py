"""What each head of the heads rung reads on the blend kind: the heads specialise.

A blend sentence asks for the thing of the first thing's colour, the second thing's kind and
the third thing's rank (*ann mixes the colour of lemon , the kind of ruby and the rank of parrot
and gets* [topaz]). The rung has one layer, so all it predicts comes from the last row of its
weights, at the answer's position. ``head_roles`` measures, for each head, the mean weight that
row puts on the thing of each role over held-out blend sentences; ``role_of`` names what a head
reads from that.
"""
import numpy as np

import minigrad

from transformer.ladder.experiment import MAX_LEN
from transformer.ladder.rungs import causal_softmax
from transformer.tasks.language import encode_batch

BLEND_ROLES = ("colour", "kind", "rank")     # the blend sentence's three things, in the order written
READS = 0.5                                   # a head reads a role if it puts more than half its weight there


def role_positions(example) -> list:
    """The positions, in ``<bos>`` + the sentence, of the colour's, the kind's and the rank's thing."""
    words = ("<bos>",) + example.words
    return [words.index(thing) for thing in example.combination[1:]]


def head_weights(model, examples) -> np.ndarray:
    """(B, heads, T, T): every head's weights on each of ``examples``."""
    batch = encode_batch(examples, "answer", MAX_LEN)
    with minigrad.no_grad():
        return causal_softmax(model.scores(model.embed(batch.inputs))).data


def head_roles(model, language, per_kind: int) -> dict:
    """role -> each head's mean weight, from the answer's position, on that role's thing, over
    ``per_kind`` held-out blend sentences of ``language``."""
    examples = [e for e in language.evaluation_set(per_kind=per_kind) if e.kind == "blend"]
    weights = head_weights(model, examples)                                        # (B, h, T, T)
    last = np.array([[weights[b, :, e.answer_index, p] for p in role_positions(e)]
                     for b, e in enumerate(examples)])                             # (B, roles, h)
    return {role: [float(w) for w in last[:, r].mean(axis=0)] for r, role in enumerate(BLEND_ROLES)}


def role_of(roles: dict, head: int):
    """The role ``head`` reads (more than ``READS`` of its weight on that role's thing), or None."""
    best = max(BLEND_ROLES, key=lambda role: roles[role][head])
    return best if roles[best][head] > READS else None
