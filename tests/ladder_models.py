"""Shared by the tests of the ladder's variants (tests/test_ladder_layer_variants.py,
tests/test_full_block_parts.py): a rung built as ``train_rung`` builds it, and its logits at the
scored positions of a few held-out sentences of each kind."""
import numpy as np

import minigrad
from transformer.ladder import LadderConfig
from transformer.ladder.experiment import MAX_LEN
from transformer.tasks.language import VOCAB, Language, encode_batch


def build(rung_class, seed=0):
    minigrad.manual_seed(seed)
    return rung_class(len(VOCAB), LadderConfig().d_model, MAX_LEN)


def logits(model) -> np.ndarray:
    batch = encode_batch(Language(seed=0).evaluation_set(per_kind=5), "answer", MAX_LEN)
    with minigrad.no_grad():
        return model(batch.inputs, batch.answer_position).data
