"""The attention ladder's rungs side by side on the page's sentence: each rung's weights (how
much each position's context vector takes from each word) and the word it predicts next.

The rungs (``transformer.ladder.RUNGS``, one idea each) are trained here as
``attention-ladder`` trains them (``train_rung``: the same seed, batches and learning rates),
for ``steps`` Adam steps each; ``attention-ladder`` itself trains 2,500. They are kept in
memory, so the served page runs every typed sentence through all of them.

Training them is most of ``next-word-explore``'s start (minutes on a busy machine), and they
depend only on the language, their seed and these settings, not on the run: ``ladder_rungs``
trains them once and keeps them beside the run (``RUNGS_FILE``, read back as distrustfully as a
checkpoint: ``transformer.files.rungs_file``), so the page and the served page of a run, and
every later start, reuse them. Beside the run, because that is where the learner looks: the
file goes where the run goes and is deleted with it, and no hidden cache folder is needed.
"""
import hashlib
import os
import sys
import time
from dataclasses import asdict

import numpy as np
from threadpoolctl import threadpool_limits

import minigrad
from transformer.tasks import language


RUNGS_FILE = "ladder_rungs.npz"      # beside the run's model.npz


def ladder_rungs(steps: int, folder=None, seed: int = 0, say=None) -> list:
    """[(rung class, trained model)] as ``train_rungs`` trains them: read from ``folder``'s
    ``RUNGS_FILE`` when it holds rungs trained with the same settings, else trained and kept
    there (``folder`` None: trained and not kept). Says in one line (``say``, default: stderr)
    which it was; a file it cannot use is ignored with one ``note:`` line."""
    from transformer.files.rungs_file import RungsFileError, load_rungs, save_rungs
    say = say or (lambda line: print(line, file=sys.stderr, flush=True))
    settings = training_settings(steps, seed)
    path = None if folder is None else os.path.join(folder, RUNGS_FILE)
    if path is not None:
        fresh = fresh_rungs()
        try:
            trained = load_rungs(path, [model for _, model in fresh], settings)
            say(f"ladder rungs: reused from {path} (trained {steps} steps each on {trained['date']}, "
                f"in {trained['seconds']:.0f} s)")
            return fresh
        except RungsFileError as error:
            if not error.missing:
                say(f"note: ignoring {path} ({error.reason}): training the rungs again")
    say(f"training the attention ladder's rungs for the page, {steps} steps each ...")
    start = time.perf_counter()
    rungs = train_rungs(steps, seed, say)
    seconds = time.perf_counter() - start
    if path is None:
        say(f"trained the ladder's {len(rungs)} rungs in {seconds:.0f} s (not kept: there is no run folder)")
        return rungs
    try:
        save_rungs(path, [model for _, model in rungs], settings, seconds)
        say(f"trained the ladder's {len(rungs)} rungs in {seconds:.0f} s, kept in {path} for the next start")
    except OSError as error:        # a run folder we may read but not write: the page goes on
        say(f"note: could not keep the ladder's rungs in {path} ({error.strerror or error}): "
            "the next start trains them again")
    return rungs


def training_settings(steps: int, seed: int) -> dict:
    """Everything the trained rungs depend on, recorded beside them and compared on reading."""
    from transformer.ladder.experiment import MAX_LEN, LadderConfig, mix
    from transformer.ladder.rungs import RUNGS
    config = {k: v for k, v in asdict(LadderConfig(seeds=(seed,), steps=steps)).items()
              if k not in ("seeds", "jobs", "eval_per_kind")}      # how many at once, and scoring: not training
    return {"rungs": [rung.name for rung in RUNGS], "seed": seed, **config, "mix": list(mix(language.KINDS)),
            "vocabulary": list(language.VOCAB), "max_len": MAX_LEN, "code": training_code_digest()}


def training_code_digest() -> str:
    """A hash of the files whose code decides the trained weights (the rungs, their training loop,
    the language's sentences): an edit to any of them retrains rather than reuse stale rungs."""
    import transformer.ladder.experiment
    import transformer.ladder.rungs
    digest = hashlib.sha256()
    for module in (transformer.ladder.rungs, transformer.ladder.experiment, language):
        with open(module.__file__, "rb") as file:
            digest.update(file.read())
    return digest.hexdigest()[:16]


def fresh_rungs() -> list:
    """[(rung class, untrained model)] built as ``train_rung`` builds them: what a kept file loads into."""
    from transformer.ladder.experiment import MAX_LEN, LadderConfig
    from transformer.ladder.rungs import RUNGS
    return [(rung, rung(len(language.VOCAB), LadderConfig().d_model, MAX_LEN)) for rung in RUNGS]


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
