"""Train every rung on the same data with the same budget, and score it per sentence kind.

``run_ladder(config)`` -> ``LadderResult``: for each rung its held-out next-word accuracy per
kind (``transformer.tasks.language``), one held-out sentence it gets wrong with its prediction
and the reason, and its T x T weights on a few probe sentences. Each rung is seeded alike
(``config.seed``: the split, the batches, the initial weights) and runs with one BLAS
thread, so a rung's numbers do not depend on the machine's load or on ``jobs``; with
``jobs=2`` two rungs train at once, one per core.
"""
from __future__ import annotations

import multiprocessing
import signal
import time
from dataclasses import asdict, dataclass, field

import numpy as np
from threadpoolctl import threadpool_limits

import minigrad
from minigrad import functional as F
from minigrad import optim

from transformer.tasks.language import KINDS, VOCAB, Language, encode_batch
from transformer.ladder.rungs import RUNGS, FullBlock

MAX_LEN = 18        # the longest sentence (17 words) + <bos>
# Recall is the slowest kind to learn (two blocks must first find the name asked about, then
# the place stated next to it), so batches hold three recall sentences per sentence of each
# other kind. Every rung sees the same batches.
MIX = ("topic", "colour", "swap", "order", "recall", "recall", "recall")

# Why a rung gets a sentence of a kind wrong: the kind the next rung wins on, said in one sentence.
REASONS = {
    ("last word", "topic"): "It sees only the last word, and every topic sentence ends in 'a'; the shop that "
                            "decides the answer is further back.",
    ("average", "colour"): "The average adds one vote per word present, and the same things come with every "
                           "colour asked, so no sum of votes can name the category of the one asked about.",
    ("dot product", "swap"): "Query, key and value are all the word's own embedding: the animal asked about, "
                             "written twice, pulls itself at least as hard as the other animal pulls it.",
    ("shared map", "swap"): "One map for queries and keys makes pull symmetric: of two animals, one always "
                            "pulls itself at least as hard as it pulls the other, so one order of each pair "
                            "gets its own voice back.",
    ("separate maps", "order"): "Without positions 'ann gave the cup to bob' and 'bob gave the cup to ann' are "
                                "the same words, so it can only guess which name came second.",
    ("positions", "recall"): "One layer cannot do two steps: find which name is asked about, then the place "
                             "stated next to that name earlier.",
}
FAILING_KIND = {rung: kind for rung, kind in REASONS}


@dataclass
class LadderConfig:
    seed: int = 0
    steps: int = 2500           # Adam steps per rung
    batch_size: int = 64
    lr: float = 1e-2            # the one-layer rungs' Adam learning rate
    full_block_lr: float = 3e-3  # the full block's (its post-norm blocks do not learn recall at 1e-2)
    warmup: int = 100           # linear warm-up steps
    d_model: int = 32
    eval_per_kind: int = 200    # held-out sentences scored per kind
    jobs: int = 2               # rungs trained at once (one core each)


@dataclass
class RungResult:
    name: str
    idea: str
    accuracy: dict              # kind -> fraction of held-out sentences right
    example: dict               # a held-out sentence it gets wrong (or {} if none)
    seconds: float
    weights: dict = field(default_factory=dict)     # kind -> (T, T) weights on a probe sentence
    scores: dict = field(default_factory=dict)      # kind -> (T, T) raw scores (dot-product rungs)
    maps: dict = field(default_factory=dict)        # kind -> (layers, heads, T, T) (the full block)


@dataclass
class LadderResult:
    config: LadderConfig
    kinds: tuple
    rungs: list
    probes: dict                # kind -> the probe sentence's words (with <bos>)
    seconds: float

    def to_json(self) -> dict:
        return {"kinds": list(self.kinds), "config": asdict(self.config), "seconds": round(self.seconds, 1),
                "rungs": [{"name": r.name, "idea": r.idea, "seconds": round(r.seconds, 1),
                           "accuracy": {k: round(float(v), 4) for k, v in r.accuracy.items()},
                           "example": r.example} for r in self.rungs]}


def train_rung(rung_class, config: LadderConfig, language: Language):
    """A fresh rung trained on ``config.steps`` batches: the same batches for every rung."""
    minigrad.manual_seed(config.seed)
    model = rung_class(len(VOCAB), config.d_model, MAX_LEN)
    lr = config.full_block_lr if rung_class is FullBlock else config.lr
    optimizer = optim.Adam(model.parameters(), lr=lr)
    batches = np.random.default_rng([config.seed, 2])
    rows = np.arange(config.batch_size)
    for step in range(1, config.steps + 1):
        optimizer.lr = lr * min(1.0, step / config.warmup)
        batch = encode_batch(language.sample("train", config.batch_size, batches, mix=MIX), "answer", MAX_LEN)
        logits = model(batch.inputs, batch.answer_position)                       # (B, vocab)
        loss = F.cross_entropy(logits, batch.targets[rows, batch.answer_position])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return model


def predict(model, examples) -> np.ndarray:
    """The argmax word id at each example's scored position."""
    batch = encode_batch(examples, "answer", MAX_LEN)
    with minigrad.no_grad():
        return model(batch.inputs, batch.answer_position).data.argmax(axis=-1)


def score(model, examples):
    """-> (accuracy per kind, the first wrong example of each kind as a dict)."""
    predicted = predict(model, examples)
    accuracy, wrong = {}, {}
    for kind in dict.fromkeys(e.kind for e in examples):
        rows = [i for i, e in enumerate(examples) if e.kind == kind]
        right = [VOCAB[predicted[i]] == examples[i].answer for i in rows]
        accuracy[kind] = float(np.mean(right))
        miss = next((i for i, ok in zip(rows, right) if not ok), None)
        if miss is not None:
            e = examples[miss]
            wrong[kind] = {"kind": kind, "context": " ".join(e.context), "answer": e.answer,
                           "predicted": VOCAB[predicted[miss]]}
    return accuracy, wrong


def pick_example(name: str, accuracy: dict, wrong: dict) -> dict:
    """The wrong sentence to show: from the kind this rung is there to fail (see REASONS),
    else from its weakest kind; {} if it gets every held-out sentence right."""
    kind = FAILING_KIND.get(name)
    if kind not in wrong:
        kind = min((k for k in wrong), key=lambda k: accuracy[k], default=None)
    if kind is None:
        return {}
    reason = REASONS.get((name, kind), f"Its weakest kind: {accuracy[kind]:.0%} of held-out {kind} sentences right.")
    return dict(wrong[kind], reason=reason)


def probe_examples(language: Language) -> dict:
    """One held-out sentence per kind, the same for every rung (for the weight tables)."""
    return {e.kind: e for e in language.evaluation_set(per_kind=1)}


def probe_ids(example) -> np.ndarray:
    """(1, n): <bos> and the context, up to the word before the scored one."""
    batch = encode_batch([example], "answer")
    return batch.inputs[:, :batch.answer_position[0] + 1]


def run_rung(index: int, config: LadderConfig) -> RungResult:
    """Train and score rung ``index`` (a function of its own so that worker processes can run it)."""
    with threadpool_limits(limits=1, user_api="blas"):
        start = time.perf_counter()
        language = Language(seed=config.seed)
        rung_class = RUNGS[index]
        model = train_rung(rung_class, config, language)
        seconds = time.perf_counter() - start
        accuracy, wrong = score(model, language.evaluation_set(per_kind=config.eval_per_kind))
        result = RungResult(rung_class.name, rung_class.idea, accuracy,
                            pick_example(rung_class.name, accuracy, wrong), seconds)
        with minigrad.no_grad():
            for kind, example in probe_examples(language).items():
                ids = probe_ids(example)
                result.weights[kind] = np.array(model.weights(ids)[0])
                if hasattr(model, "scores"):
                    result.scores[kind] = model.scores(model.embed(ids)).data[0]
                if hasattr(model, "attention_maps"):
                    result.maps[kind] = model.attention_maps(ids)[:, 0]
        return result


def _leave_interrupts_to_the_parent():
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def run_ladder(config: LadderConfig = None, rungs=None) -> LadderResult:
    """Every rung (or the indices ``rungs``), ``config.jobs`` at a time."""
    config = config or LadderConfig()
    indices = list(range(len(RUNGS))) if rungs is None else list(rungs)
    start = time.perf_counter()
    if config.jobs > 1 and len(indices) > 1:
        # the longest rung (the full block) first, so that the other core works through the rest
        order = sorted(indices, key=lambda i: -i)
        # leaving the block terminates the workers: Ctrl-C stops the whole ladder at once
        with multiprocessing.Pool(config.jobs, initializer=_leave_interrupts_to_the_parent) as pool:
            done = dict(zip(order, pool.starmap(run_rung, [(i, config) for i in order], chunksize=1)))
        results = [done[i] for i in indices]
    else:
        results = [run_rung(i, config) for i in indices]
    language = Language(seed=config.seed)
    probes = {kind: ("<bos>",) + e.context for kind, e in probe_examples(language).items()}
    return LadderResult(config, KINDS, results, probes, time.perf_counter() - start)
