"""Held-out accuracy: exact match of whole outputs, and per-character accuracy."""
import numpy as np

from transformer.tasks.dates import PAD, decode_batch
from transformer.decoding import beam_search, greedy_decode


def evaluate(model, src, tgt, batch_size: int = 1000, beam_size: int = 1, show_wrong: int = 5) -> dict:
    """Decode ``src`` and compare with ``tgt`` (ids with <sos>, as made by ``dates.encode``),
    ``batch_size`` sequences at a time (``batch_size // beam_size`` sources with a beam search,
    so memory does not grow with the beam).

    exact_match     fraction of outputs equal to the target up to and including <eos>
    char_accuracy   fraction of target positions (up to and including <eos>) predicted right
    wrong           up to ``show_wrong`` (input, predicted, expected) string triples
    """
    src, tgt = np.asarray(src), np.asarray(tgt)
    expected = tgt[:, 1:]
    rows = max(1, batch_size // beam_size)      # a beam search decodes beam_size copies of each row
    predicted = np.concatenate([
        greedy_decode(model, src[i:i + rows]) if beam_size == 1
        else beam_search(model, src[i:i + rows], beam_size)
        for i in range(0, len(src), rows)])
    width = min(predicted.shape[1], expected.shape[1])
    predicted, expected = predicted[:, :width], expected[:, :width]
    counted = expected != PAD                          # target positions up to and including <eos>
    row_correct = ((predicted == expected) | ~counted).all(axis=1)
    char_correct = ((predicted == expected) & counted).sum() / counted.sum()
    wrong_rows = np.flatnonzero(~row_correct)[:show_wrong]
    wrong = list(zip(decode_batch(src[wrong_rows]), decode_batch(predicted[wrong_rows]),
                     decode_batch(tgt[wrong_rows])))
    return {"exact_match": float(row_correct.mean()), "char_accuracy": float(char_correct),
            "count": int(len(src)), "wrong": wrong}
