"""Train every rung on every seed with the same budget, and score it per sentence kind.

``run_ladder(config)`` -> ``LadderResult``: for each rung its held-out next-word accuracy per
kind and seed (``transformer.tasks.language``), one held-out sentence it gets wrong with its
prediction and the reason, the pull statistic on the swap kind, and (first seed) its T x T
weights on a few probe sentences. A rung on a seed is seeded alike (the split, the batches,
the initial weights) and runs with one BLAS thread, so its numbers do not depend on the
machine's load or on ``jobs``; with ``jobs=2`` two trainings run at once, one per core.
"""
from __future__ import annotations

import json
import multiprocessing
import os
import signal
import threading
import time
from dataclasses import asdict, dataclass, field

import numpy as np
from threadpoolctl import threadpool_limits

import minigrad
from minigrad import functional as F
from minigrad import optim

from transformer.parallel.children import die_with_parent
from transformer.parallel.threads import arithmetic
from transformer.tasks.batch_sampler import BatchSampler
from transformer.tasks.language import (BLEND_ROLES, KINDS, VOCAB, Language, blend_roles_kept, encode_batch,
                                       make_example)
from transformer.ladder.rungs import RUNGS

MAX_LEN = 20        # the longest sentence (19 words, blend) + <bos>
# Each batch takes the kinds in this order, again and again: every kind once, swap and blend
# twice, and recall four times (the full block learns it last: at two in eleven it stayed at
# 88% on seed 1). Every rung sees the same batches.
EXTRA = ("swap", "blend", "recall", "recall", "recall")


def mix(kinds) -> tuple:
    """The batches' order of kinds for a language of ``kinds``: each once, then ``EXTRA``'s."""
    return tuple(kinds) + tuple(kind for kind in EXTRA if kind in kinds)

# Why a rung gets a sentence of a kind wrong: the kind the next rung wins on, said in one sentence.
REASONS = {
    ("last word", "topic"): "It sees only the last word, and every topic sentence ends in 'a'; the shop that "
                            "decides the answer is further back.",
    ("average", "colour"): "The average adds one vote per word present, and the same things come with every "
                           "colour asked, so no sum of votes can name the category of the one asked about.",
    ("dot product", "game"): "The word moved is the word itself, and it votes for the words like it: 'like' is "
                             "symmetric, so rock cannot vote for paper, paper for scissors and scissors for rock.",
    ("values", "swap"): "Pull is the dot product of the words themselves: the animal asked about, written "
                        "twice, pulls itself harder than the other animal pulls it.",
    ("shared map", "swap"): "One map for queries and keys makes pull symmetric: of two animals, one always "
                            "pulls itself at least as hard as it pulls the other, so one order of each pair "
                            "gets its own voice back.",
    ("separate maps", "order"): "Without positions 'ann gave the cup to bob' and 'bob gave the cup to ann' are "
                                "the same words, so it can only guess which name came second.",
    ("positions", "blend"): "One head moves every word with the same W_v: each thing sends its colour, kind "
                            "and rank whatever it was asked for, and one set of weights can only weigh the "
                            "three things against each other.",
    ("heads", "recall"): "One layer cannot do two steps: each place must first take in the name before it, "
                         "then the name asked about can pull its place.",
}
FAILING_KIND = {rung: kind for rung, kind in REASONS}
PULL_KIND = "swap"          # the kind whose pull statistic is measured
# Kinds whose answer is one of two words of the sentence: a rung blind to which is which can
# be right half the time by naming one of them; below half, it names other words as well.
CANDIDATES = {"order": lambda c: (c[0], c[1]), "recall": lambda c: (c[1], c[3])}
# The minimal pair: the same words in another order. Anything blind to order (the average,
# attention without positions) computes the same context for both and so predicts one name twice.
MINIMAL_PAIR = (("order", ("ann", "bob", "cup")), ("order", ("bob", "ann", "cup")))


@dataclass
class LadderConfig:
    seeds: tuple = (0, 1, 2, 3, 4)
    steps: int = 2500           # Adam steps per rung
    batch_size: int = 64
    lr: float = 1e-2            # the one-layer rungs' Adam learning rate
    full_block_lr: float = 3e-3  # the project's model's, and the two-layer rung's (at 1e-2 neither learns recall)
    warmup: int = 100           # linear warm-up steps
    decay: float = 0.2          # the last fraction of the steps, in which the rate falls linearly to 0
    d_model: int = 32
    eval_per_kind: int = 200    # held-out sentences scored per kind
    jobs: int = 2               # trainings at once (one core each)
    kinds: tuple = KINDS        # the language's kinds (fewer: what a rung does without the others)
    eager: bool = False         # each step through the eager engine, not replayed from its tape (same bits)


@dataclass
class RungRun:
    """One rung trained on one seed."""
    index: int
    seed: int
    accuracy: dict              # kind -> fraction of held-out sentences right
    wrong: dict                 # kind -> the first held-out sentence it gets wrong
    seconds: float
    pull: dict = field(default_factory=dict)        # the pull statistic (rungs with scores)
    self_pull: dict = field(default_factory=dict)   # the colour kind's self-pull statistic (rungs with scores)
    candidates: dict = field(default_factory=dict)  # kind -> share of answers naming one of CANDIDATES
    pair: list = field(default_factory=list)        # its predictions on MINIMAL_PAIR
    weights: dict = field(default_factory=dict)     # kind -> (T, T) weights on a probe sentence
    scores: dict = field(default_factory=dict)      # kind -> (T, T) raw scores (one-head dot-product rungs)
    maps: dict = field(default_factory=dict)        # kind -> (layers, heads, T, T) (the full block)
    right_swap: dict = field(default_factory=dict)  # a swap sentence it gets right: words, weights


@dataclass
class RungResult:
    name: str
    idea: str
    accuracy: dict              # kind -> [fraction per seed]
    example: dict               # a held-out sentence it gets wrong (or {} if none)
    seconds: list               # per seed
    pull: dict = field(default_factory=dict)        # statistic -> [value per seed]
    self_pull: dict = field(default_factory=dict)   # statistic -> [value per seed]
    candidates: dict = field(default_factory=dict)  # kind -> [share per seed]
    pair: list = field(default_factory=list)        # first seed
    weights: dict = field(default_factory=dict)     # first seed, as in RungRun
    scores: dict = field(default_factory=dict)
    maps: dict = field(default_factory=dict)
    right_swap: dict = field(default_factory=dict)

    def mean(self, kind: str) -> float:
        return float(np.mean(self.accuracy[kind]))


@dataclass
class LadderResult:
    config: LadderConfig
    kinds: tuple
    seeds: tuple
    rungs: list
    probes: dict                # kind -> the probe sentence's words (with <bos>), first seed
    seconds: float
    cpu_seconds: float          # the trainings' own CPU time, summed
    arithmetic: str = field(default_factory=arithmetic)    # what rounded its floats (BLAS kernels, vectors)

    def to_json(self) -> dict:
        def rung(r):
            table = {"name": r.name, "idea": r.idea,
                     "accuracy": {k: [rounded(v) for v in r.accuracy[k]] for k in self.kinds},
                     "example": r.example, "seconds": [round(s, 1) for s in r.seconds]}
            if r.candidates:
                table["candidates"] = {k: [rounded(v) for v in values] for k, values in r.candidates.items()}
            for name in ("pull", "self_pull"):
                if getattr(r, name):
                    table[name] = {k: [rounded(v) for v in values] for k, values in getattr(r, name).items()}
            table["pair"] = [list(p) for p in r.pair]
            return table
        return {"kinds": list(self.kinds), "seeds": list(self.seeds), "config": asdict(self.config),
                "seconds": round(self.seconds, 1), "cpu_seconds": round(self.cpu_seconds, 1),
                "arithmetic": self.arithmetic, "rungs": [rung(r) for r in self.rungs]}

    @classmethod
    def from_json(cls, table: dict) -> "LadderResult":
        """A table ``to_json`` wrote, read back: every number per seed, the first seed's minimal
        pair; not the pictures' weights (``to_json`` does not write them)."""
        config = LadderConfig(**{k: tuple(v) if isinstance(v, list) else v for k, v in table["config"].items()})
        rungs = [RungResult(r["name"], r["idea"], r["accuracy"], r["example"], r["seconds"],
                            pull=r.get("pull", {}), self_pull=r.get("self_pull", {}),
                            candidates=r.get("candidates", {}), pair=[tuple(p) for p in r.get("pair", [])])
                 for r in table["rungs"]]
        return cls(config, tuple(table["kinds"]), tuple(table["seeds"]), rungs, {}, table["seconds"],
                   table["cpu_seconds"], table.get("arithmetic", "not recorded"))

    @classmethod
    def load(cls, path) -> "LadderResult":
        """``from_json`` of the file at ``path`` (what ``attention-ladder --json`` wrote)."""
        with open(path) as file:
            return cls.from_json(json.load(file))


def rounded(value):
    """A number as ``LadderResult.to_json`` writes it: 4 decimals (None stays None)."""
    return None if value is None else round(float(value), 4)


def learning_rate(config: LadderConfig, base: float, step: int) -> float:
    """Warm up, then decay linearly to 0 over the last ``decay`` of the steps: the last steps
    settle instead of jumping between solutions."""
    return base * min(step / config.warmup, (config.steps - step + 1) / max(1.0, config.decay * config.steps), 1.0)


def answer_loss_and_backward(model):
    """A step's forward and backward, as ``train_rung`` traces it: (ids, answer positions, answers)
    -> the cross-entropy of the answers' logits, after ``loss.backward()``."""
    def loss_and_backward(inputs, at, answers):
        logits = model(inputs, at)                                                 # (B, vocab)
        loss = F.cross_entropy(logits, answers)
        loss.backward()
        return loss
    return loss_and_backward


def train_rung(rung_class, config: LadderConfig, language: Language, seed: int):
    """A fresh rung trained on ``config.steps`` batches: the same batches for every rung."""
    minigrad.manual_seed(seed)
    model = rung_class(len(VOCAB), config.d_model, MAX_LEN)
    lr = rung_class.learning_rate(config)
    optimizer = optim.Adam(model.parameters(), lr=lr)
    batches = np.random.default_rng([seed, 2])
    sampler = BatchSampler(language, "train", mix=mix(language.kinds), loss_on="answer", length=MAX_LEN)
    rows = np.arange(config.batch_size)
    loss_and_backward = answer_loss_and_backward(model)
    # recorded once, then replayed from its tape: the same bits, less Python (docs/tracing.md)
    forward_backward = loss_and_backward if config.eager else minigrad.trace(loss_and_backward)
    for step in range(1, config.steps + 1):
        optimizer.lr = learning_rate(config, lr, step)
        batch = sampler.sample(config.batch_size, batches)    # encode_batch(language.sample(...)), gathered
        optimizer.zero_grad()
        forward_backward(batch.inputs, batch.answer_position, batch.targets[rows, batch.answer_position])
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


def seen_facts(language) -> set:
    """Every (name, place) stated in some training recall sentence of ``language``."""
    seen = set()
    for name1, place1, name2, place2, _ in language.combinations("train", "recall"):
        seen |= {(name1, place1), (name2, place2)}
    return seen


def candidate_shares(model, examples, language) -> dict:
    """For each kind of CANDIDATES: the share of ``examples`` of it where the rung's answer is one
    of the two words the answer is chosen from (right or not). For recall also ``recall_seen``:
    the share where it names a place the asked name is stated at in some training sentence (a
    memorised fact; in most held-out sentences that is the other name's place). For blend, per
    role (``blend_colour``, ``blend_kind``, ``blend_rank``): the share of answers that have the
    role right, right answer or not (a one-head rung can settle some roles and guess the rest)."""
    predicted = predict(model, examples)
    shares = {}
    for kind, candidates in CANDIDATES.items():
        rows = [i for i, e in enumerate(examples) if e.kind == kind]
        if rows:
            shares[kind] = float(np.mean([VOCAB[predicted[i]] in candidates(examples[i].combination) for i in rows]))
    if "recall" in shares:
        seen = seen_facts(language)
        rows = [i for i, e in enumerate(examples) if e.kind == "recall"]
        asked = [examples[i].combination[2 * examples[i].combination[4]] for i in rows]
        shares["recall_seen"] = float(np.mean([(name, VOCAB[predicted[i]]) in seen for name, i in zip(asked, rows)]))
    blends = [i for i, e in enumerate(examples) if e.kind == "blend"]
    if blends:
        kept = np.array([blend_roles_kept(examples[i].combination, VOCAB[predicted[i]]) for i in blends])
        shares.update({f"blend_{role}": float(share) for role, share in zip(BLEND_ROLES, kept.mean(axis=0))})
    return shares


def swap_positions(example):
    """(the asked animal's positions, the other animal's position) in ``<bos>`` + the context:
    the asked animal is written twice (in the pair and last), the other once."""
    first, second, asked = example.combination
    asked_at, other_at = (2, 5) if asked == 0 else (5, 2)
    return [asked_at, len(example.context)], other_at


def pull_statistic(model, examples) -> dict:
    """Over ``examples`` (swap sentences): how often the other animal out-pulls the asked one
    (its weight in the last row beats the asked animal's two cells together), and the share
    right in each case (None where a case never happens)."""
    batch = encode_batch(examples, "answer", MAX_LEN)
    with minigrad.no_grad():
        weights = model.weights(batch.inputs)                                    # (B, T, T)
    out_pulls = np.empty(len(examples), dtype=bool)
    for b, example in enumerate(examples):
        asked, other = swap_positions(example)
        row = weights[b, batch.answer_position[b]]
        out_pulls[b] = row[other] > row[asked].sum()
    return right_by_case(model, examples, out_pulls)


def right_by_case(model, examples, out_pulls) -> dict:
    """How often ``out_pulls`` holds over ``examples``, and the share the rung gets right where
    it holds and where it does not (None where a case never happens)."""
    right = predict(model, examples) == np.array([VOCAB.index(e.answer) for e in examples])

    def share(mask):
        return float(right[mask].mean()) if mask.any() else None
    return {"out_pulls": float(out_pulls.mean()), "right_when_out_pulls": share(out_pulls),
            "right_when_not": share(~out_pulls)}


def self_pull_statistic(model, examples) -> dict:
    """Over ``examples`` (colour sentences, *... i point at the yellow* -> fruit): how often the
    thing of the asked colour out-pulls the colour word itself in the last row of the weights,
    the share right in each case, and the colour word's mean weight on itself."""
    batch = encode_batch(examples, "answer", MAX_LEN)
    with minigrad.no_grad():
        weights = model.weights(batch.inputs)                                    # (B, T, T)
    last = batch.answer_position
    own = weights[np.arange(len(examples)), last, last]
    thing = weights[np.arange(len(examples)), last, [4 + 3 * e.combination[3] for e in examples]]  # <bos> i see a X , a Y and a Z
    return dict(right_by_case(model, examples, thing > own), own_weight=float(own.mean()))


def probe_examples(language: Language) -> dict:
    """One held-out sentence per kind, the same for every rung (for the weight tables)."""
    return {e.kind: e for e in language.evaluation_set(per_kind=1)}


def probe_ids(example) -> np.ndarray:
    """(1, n): <bos> and the context, up to the word before the scored one."""
    batch = encode_batch([example], "answer")
    return batch.inputs[:, :batch.answer_position[0] + 1]


def run_rung(index: int, seed: int, config: LadderConfig, pictures: bool = True) -> RungRun:
    """Train and score rung ``index`` on ``seed`` (a function of its own so that worker processes
    can run it); ``pictures``: also keep its weights on the probe sentences."""
    with threadpool_limits(limits=1, user_api="blas"):
        start = time.process_time()
        language = Language(seed=seed, kinds=config.kinds)
        rung_class = RUNGS[index]
        model = train_rung(rung_class, config, language, seed)
        seconds = time.process_time() - start
        held_out = language.evaluation_set(per_kind=config.eval_per_kind)
        accuracy, wrong = score(model, held_out)
        run = RungRun(index, seed, accuracy, wrong, seconds, candidates=candidate_shares(model, held_out, language))
        pair = [make_example(kind, combination) for kind, combination in MINIMAL_PAIR]
        run.pair = [(" ".join(e.context), VOCAB[p], e.answer) for e, p in zip(pair, predict(model, pair))]
        swaps = ([make_example(PULL_KIND, c) for c in language.combinations("held-out", PULL_KIND)]
                 if PULL_KIND in language.kinds else [])
        one_pull = hasattr(model, "scores") and getattr(model, "num_heads", 1) == 1   # four heads' average is no one pull
        if one_pull and swaps:
            run.pull = pull_statistic(model, swaps)
        if one_pull and "colour" in language.kinds:
            run.self_pull = self_pull_statistic(model, [e for e in held_out if e.kind == "colour"])
        if not pictures:
            return run
        with minigrad.no_grad():
            for kind, example in probe_examples(language).items():
                ids = probe_ids(example)
                run.weights[kind] = np.array(model.weights(ids)[0])
                if hasattr(model, "scores"):
                    run.scores[kind] = model.scores(model.embed(ids)).data[0]
                if hasattr(model, "attention_maps"):
                    run.maps[kind] = model.attention_maps(ids)[:, 0]
            right = np.flatnonzero(predict(model, swaps) == np.array([VOCAB.index(e.answer) for e in swaps])) \
                if swaps else []
            if len(right):
                example = swaps[right[0]]
                ids = probe_ids(example)
                run.right_swap = {"words": ("<bos>",) + example.context, "answer": example.answer,
                                  "weights": np.array(model.weights(ids)[0])}
        return run


def _run_task(task):
    return run_rung(*task)


def _end_with_the_parent(parent: int):
    """In each worker: on Linux the kernel ends the worker if the parent (pid ``parent``) dies, so
    no worker trains on, or writes a BrokenPipeError traceback, after the command has gone (if the
    parent died before the request took effect, the worker ends now); and Ctrl-C is the parent's to
    handle (it stops the pool). In this order: a worker seen ignoring Ctrl-C already dies with it."""
    die_with_parent(parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def worker_pool(jobs: int):
    """``jobs`` worker processes born ignoring Ctrl-C: until a worker has run
    ``_end_with_the_parent`` it would die of a Ctrl-C with a traceback while the pool starts
    another. A Ctrl-C while the pool starts is raised once it exists, after stopping it."""
    pressed = []
    main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGINT, lambda *_: pressed.append(True)) if main else None
    try:
        pool = multiprocessing.Pool(jobs, initializer=_end_with_the_parent, initargs=(os.getpid(),))
    finally:
        if main:
            signal.signal(signal.SIGINT, previous)
    if pressed:
        pool.terminate()
        pool.join()
        raise KeyboardInterrupt
    return pool


def pick_example(name: str, runs) -> dict:
    """The wrong sentence to show: from the kind this rung is there to fail (see REASONS), on the
    first seed that has one, else from its weakest kind; {} if it gets every sentence right."""
    kind = FAILING_KIND.get(name)
    run = next((r for r in runs if kind in r.wrong), None)
    if run is None:
        run = runs[0]
        kind = min(run.wrong, key=lambda k: run.accuracy[k], default=None)
        if kind is None:
            return {}
    reason = REASONS.get((name, kind), f"Its weakest kind: {run.accuracy[kind]:.0%} of held-out {kind} "
                                       "sentences right.")
    return dict(run.wrong[kind], seed=run.seed, reason=reason)


def gather(index: int, runs) -> RungResult:
    """One rung's runs (in the order of the seeds) -> its row of the ladder."""
    rung_class, first = RUNGS[index], runs[0]
    result = RungResult(rung_class.name, rung_class.idea,
                        {k: [r.accuracy[k] for r in runs] for k in first.accuracy},
                        pick_example(rung_class.name, runs), [r.seconds for r in runs],
                        pair=first.pair, weights=first.weights, scores=first.scores, maps=first.maps,
                        right_swap=first.right_swap)
    if first.pull:
        result.pull = {k: [r.pull[k] for r in runs] for k in first.pull}
    result.candidates = {k: [r.candidates[k] for r in runs] for k in first.candidates}
    if first.self_pull:
        result.self_pull = {k: [r.self_pull[k] for r in runs] for k in first.self_pull}
    return result


def run_cells(tasks, jobs: int, progress=None) -> dict:
    """Train and score each ``(rung index, seed, config, pictures)`` of ``tasks``, ``jobs`` at a
    time (worker processes, one core each); ``progress(run)`` is called as each finishes.
    -> {(rung index, seed): RungRun}. A cell's numbers do not depend on ``jobs`` or the order."""
    done = {}
    if jobs > 1 and len(tasks) > 1:
        pool = worker_pool(jobs)
        try:
            for run in pool.imap_unordered(_run_task, tasks, chunksize=1):
                done[run.index, run.seed] = run
                if progress:
                    progress(run)
            pool.close()
        finally:
            pool.terminate()              # Ctrl-C or an error: no worker outlives the ladder
            pool.join()
    else:
        for task in tasks:
            run = _run_task(task)
            done[run.index, run.seed] = run
            if progress:
                progress(run)
    return done


def run_ladder(config: LadderConfig = None, rungs=None, progress=None) -> LadderResult:
    """Every rung (or the indices ``rungs``) on every seed, ``config.jobs`` trainings at a time;
    ``progress(run)`` is called as each finishes."""
    config = config or LadderConfig()
    indices = list(range(len(RUNGS))) if rungs is None else list(rungs)
    seeds = list(config.seeds)
    # the longest trainings (the full block, then the later rungs) first, so the cores finish together
    tasks = [(i, seed, config, seed == seeds[0]) for i in sorted(indices, reverse=True) for seed in seeds]
    start = time.perf_counter()
    done = run_cells(tasks, config.jobs, progress)
    results = [gather(i, [done[i, seed] for seed in seeds]) for i in indices]
    language = Language(seed=seeds[0], kinds=config.kinds)
    probes = {kind: ("<bos>",) + e.context for kind, e in probe_examples(language).items()}
    cpu = sum(run.seconds for run in done.values())
    return LadderResult(config, tuple(config.kinds), tuple(seeds), results, probes, time.perf_counter() - start, cpu)
