"""Where a rung's next-word loss is taken: at the scored word only, or at every position.

The ladder scores one word per sentence, the answer, and by default trains on it alone
(``answer``): the words before it are mostly a free choice of the language (which name, which
shop). A language model is trained to predict at every position (``all``): every word of the
sentence from the words before it, and the ``<eos>`` after the last. Both are scored the same
way, on the answer of held-out sentences.
"""
import numpy as np

from minigrad import functional as F

from transformer.models.decoder_only import IGNORE
from transformer.tasks.language import Batch

LOSS_POSITIONS = ("answer", "all")


def check_loss_positions(positions: str) -> str:
    if positions not in LOSS_POSITIONS:
        raise ValueError(f"loss positions must be one of {', '.join(LOSS_POSITIONS)}, got {positions!r}")
    return positions


def rung_loss(model, batch: Batch, positions: str = "answer"):
    """Mean cross-entropy of a rung (``model(ids, at)``) on ``batch``, encoded with
    ``loss_on="sentence"`` so that its mask holds every real target. ``answer``: the scored word
    of each sentence, computed as the ladder has always computed it (the classifier run at that
    position only); ``all``: every position of the mask."""
    check_loss_positions(positions)
    if positions == "answer":
        rows = np.arange(len(batch.answer_position))
        logits = model(batch.inputs, batch.answer_position)                        # (B, vocab)
        return F.cross_entropy(logits, batch.targets[rows, batch.answer_position])
    targets = np.where(batch.loss_mask, batch.targets, IGNORE)                      # (B, T)
    return F.cross_entropy(model(batch.inputs), targets, ignore_index=IGNORE)
