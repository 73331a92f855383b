"""The attention ladder's rungs side by side on the page's sentence: each rung's weights (how
much each position's context vector takes from each word) and the word it predicts next.

The rungs (``transformer.ladder.RUNGS``, one idea each) are trained here as
``attention-ladder`` trains them (``train_rung``: the same seed, batches and learning rates),
for ``steps`` Adam steps each; ``attention-ladder`` itself trains 2,500. They are kept in
memory, so the served page runs every typed sentence through all of them.
"""
import time

import numpy as np
from threadpoolctl import threadpool_limits

import minigrad
from transformer.tasks import language


def train_rungs(steps: int, seed: int = 0, say=None) -> list:
    """[(rung class, trained model)] for every rung of the ladder, in ladder order."""
    from transformer.ladder.experiment import LadderConfig, train_rung
    from transformer.ladder.rungs import RUNGS
    config, data = LadderConfig(seeds=(seed,), steps=steps), language.Language(seed)
    trained = []
    for rung in RUNGS:
        start = time.perf_counter()
        # the kernels (the page's own step runs on their numpy twins) and one BLAS thread, as
        # attention-ladder trains: many threads on these small products only wait for each other
        with minigrad.kernels.use_backend("numba"), threadpool_limits(limits=1, user_api="blas"):
            trained.append((rung, train_rung(rung, config, data, seed)))
        if say:
            say(f"  ladder: {rung.name} trained {steps} steps in {time.perf_counter() - start:.1f} s")
    return trained


def ladder_data(rungs: list, words, steps: int) -> dict:
    """The page's ``ladder``: the sentence's tokens, and per rung its name, idea, (T, T) weights
    and its most likely next word with the probability."""
    ids = np.array([[language.BOS] + language.encode(words)], dtype=np.int64)
    last = np.array([ids.shape[1] - 1])
    shown = []
    with minigrad.no_grad():
        for rung, model in rungs:
            weights = np.asarray(model.weights(ids))[0]                      # (T, T)
            logits = model(ids, last).data[0].astype(np.float64)
            logits[[language.PAD, language.BOS]] = -np.inf
            p = np.exp(logits - logits.max())
            p /= p.sum()
            best = int(p.argmax())
            shown.append({"name": rung.name, "idea": getattr(rung, "idea", ""),
                          "weights": np.round(weights.astype(np.float64), 4).tolist(),
                          "predicted": language.VOCAB[best], "probability": round(float(p[best]), 4)})
    return {"tokens": [language.VOCAB[i] for i in ids[0]], "steps": steps, "rungs": shown}
