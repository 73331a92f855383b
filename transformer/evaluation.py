"""Held-out accuracy: exact match of whole outputs, and per-character accuracy."""
import numpy as np

from .dates import PAD, decode_batch
from .decoding import beam_search, greedy_decode


def evaluate(model, src, tgt, batch_size: int = 1000, beam_size: int = 1, show_wrong: int = 5) -> dict:
    """Decode ``src`` and compare with ``tgt`` (ids with <sos>, as made by ``dates.encode``).

    exact_match     fraction of outputs equal to the target up to and including <eos>
    char_accuracy   fraction of target positions (up to and including <eos>) predicted right
    wrong           up to ``show_wrong`` (input, predicted, expected) string triples
    """
    src, tgt = np.asarray(src), np.asarray(tgt)
    expected = tgt[:, 1:]
    predicted = np.concatenate([
        greedy_decode(model, src[i:i + batch_size]) if beam_size == 1
        else beam_search(model, src[i:i + batch_size], beam_size)
        for i in range(0, len(src), batch_size)])
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
