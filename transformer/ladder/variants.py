"""Rung variants trained with a learning curve: what the sources teach, measured on the ladder.

``run_variants(config, seeds)`` trains each ``Variant`` on each seed exactly as the ladder trains
its rungs (``experiment.train_rung``: the same seeds, batches, learning rates and budget; with
``positions="answer"`` the same bits) and scores it on the held-out sentences every ``every``
steps, so that a record holds both what a variant reaches and how soon:

    heads                        the heads rung as the ladder trains it
    heads, values = keys         its values are the keys it matched on (``value_space.py``)
    heads, every position        its loss taken at every position (``loss_positions.py``)
    heads, values = words        its values are the words' own vectors
    full block                   the project's model after the ladder: two blocks, the next-word model's kind
    full block, every position   the same, its loss at every position

For the heads rungs it also keeps ``head_roles``: each head's weight, from the answer's position of
a blend sentence, on the thing of each role (the heads specialise: ``head_roles.py``).
"""
from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, field

import numpy as np
from threadpoolctl import threadpool_limits

import minigrad
from minigrad import optim

from transformer.files.output_file import atomic_output
from transformer.ladder.experiment import MAX_LEN, LadderConfig, worker_pool, learning_rate, mix, score
from transformer.ladder.head_roles import head_roles
from transformer.ladder.loss_positions import check_loss_positions, rung_loss
from transformer.ladder.rungs import FullBlock, Heads
from transformer.ladder.value_space import VALUE_VARIANTS
from transformer.parallel.threads import arithmetic
from transformer.tasks.batch_sampler import BatchSampler
from transformer.tasks.language import VOCAB, Language

CURVE_EVERY = 100           # steps between two scorings of the learning curve
CURVE_PER_KIND = 100        # held-out sentences per kind in each scoring (the first of the final 200)


@dataclass(frozen=True)
class Variant:
    name: str
    rung: str = "heads"             # "heads" or "full block"
    values: str = "own"             # heads only: "own" (W_v), "keys" or "words"
    positions: str = "answer"       # where the loss is taken: "answer" or "all"

    def rung_class(self):
        return FullBlock if self.rung == "full block" else VALUE_VARIANTS[self.values]


VARIANTS = (Variant("heads"), Variant("heads, values = keys", values="keys"),
            Variant("heads, every position", positions="all"), Variant("heads, values = words", values="words"),
            Variant("full block", "full block"), Variant("full block, every position", "full block", positions="all"))
VARIANT_NAMES = tuple(v.name for v in VARIANTS)


def train_with_curve(rung_class, config: LadderConfig, seed: int, positions: str = "answer",
                     every: int = CURVE_EVERY, per_kind: int = CURVE_PER_KIND):
    """``experiment.train_rung`` with its loss taken at ``positions``, scored on ``per_kind``
    held-out sentences of each kind after every ``every`` steps (scoring draws no random numbers,
    so the training is the same with or without it). -> (model, {kind: [accuracy at each scoring]})."""
    check_loss_positions(positions)
    language = Language(seed=seed, kinds=config.kinds)
    probe = language.evaluation_set(per_kind=per_kind)
    minigrad.manual_seed(seed)
    model = rung_class(len(VOCAB), config.d_model, MAX_LEN)
    lr = rung_class.learning_rate(config)
    optimizer = optim.Adam(model.parameters(), lr=lr)
    batches = np.random.default_rng([seed, 2])
    sampler = BatchSampler(language, "train", mix=mix(language.kinds), loss_on="sentence", length=MAX_LEN)
    curve = {kind: [] for kind in config.kinds}
    for step in range(1, config.steps + 1):
        optimizer.lr = learning_rate(config, lr, step)
        batch = sampler.sample(config.batch_size, batches)
        loss = rung_loss(model, batch, positions)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % every == 0:
            for kind, accuracy in score(model, probe)[0].items():
                curve[kind].append(accuracy)
    return model, curve


@dataclass
class VariantRun:
    """One variant trained on one seed."""
    variant: str
    seed: int
    accuracy: dict              # kind -> held-out accuracy at the end (``config.eval_per_kind`` per kind)
    curve: dict                 # kind -> held-out accuracy after every CURVE_EVERY steps
    seconds: float              # CPU seconds of the training
    head_roles: dict = field(default_factory=dict)      # heads rungs: role -> each head's mean weight


def run_variant(name: str, seed: int, config: LadderConfig) -> VariantRun:
    variant = VARIANTS[VARIANT_NAMES.index(name)]
    with threadpool_limits(limits=1, user_api="blas"):
        start = time.process_time()
        model, curve = train_with_curve(variant.rung_class(), config, seed, variant.positions)
        seconds = time.process_time() - start
        language = Language(seed=seed, kinds=config.kinds)
        accuracy, _ = score(model, language.evaluation_set(per_kind=config.eval_per_kind))
        roles = head_roles(model, language, config.eval_per_kind) if isinstance(model, Heads) else {}
        return VariantRun(name, seed, accuracy, curve, seconds, roles)


def _run_task(task):
    return run_variant(*task)


def variant_option(name: str) -> str:
    """A variant's name as one word: 'heads, values = keys' -> 'heads-values-keys'."""
    return name.replace(", ", "-").replace(" = ", "-").replace(" ", "-")


def cell_path(folder, name: str, seed: int) -> str:
    return os.path.join(folder, f"{variant_option(name)}-seed{seed}.json")


def kept_run(folder, name: str, seed: int, config: LadderConfig):
    """The run of ``name`` on ``seed`` that an earlier, interrupted call left in ``folder``, if
    it was trained with ``config`` on this machine's arithmetic; else None."""
    path = cell_path(folder, name, seed)
    if not os.path.exists(path):
        return None
    with open(path) as file:
        kept = json.load(file)
    if kept.pop("config") != _config_json(config) or kept.pop("arithmetic") != arithmetic():
        return None
    return VariantRun(**kept)


def run_variants(config: LadderConfig, names=VARIANT_NAMES, progress=None, keep=None) -> dict:
    """Every variant of ``names`` on every seed of ``config``, ``config.jobs`` at a time.
    -> the record (``to_record``'s form), the same whatever ``jobs`` or the order. ``keep``: a
    folder where each run is written as it ends, and read back instead of trained again (a long
    run on a busy machine can be stopped and resumed)."""
    done = {}
    if keep:
        os.makedirs(keep, exist_ok=True)
        done = {(name, seed): run for name in names for seed in config.seeds
                if (run := kept_run(keep, name, seed, config)) is not None}
    tasks = [(name, seed, config) for name in names for seed in config.seeds if (name, seed) not in done]
    start = time.perf_counter()
    pool = worker_pool(config.jobs)
    try:
        for run in pool.imap_unordered(_run_task, tasks, chunksize=1):
            done[run.variant, run.seed] = run
            if keep:
                with atomic_output(cell_path(keep, run.variant, run.seed)) as tmp, open(tmp, "w") as file:
                    json.dump(dict(asdict(run), config=_config_json(config), arithmetic=arithmetic()), file)
            if progress:
                progress(run)
        pool.close()
    finally:
        pool.terminate()
        pool.join()
    runs = {name: [done[name, seed] for seed in config.seeds] for name in names}
    return to_record(config, runs, time.perf_counter() - start)


def to_record(config: LadderConfig, runs: dict, seconds: float) -> dict:
    """The JSON record: per variant, each number as a list over the seeds (4 decimals)."""
    def per_seed(getter, keys):
        return {key: [getter(run, key) for run in variant_runs] for key in keys}
    variants = []
    for name, variant_runs in runs.items():
        first = variant_runs[0]
        entry = dict(asdict(VARIANTS[VARIANT_NAMES.index(name)]),
                     accuracy=per_seed(lambda r, k: round(r.accuracy[k], 4), first.accuracy),
                     curve=per_seed(lambda r, k: [round(a, 4) for a in r.curve[k]], first.curve),
                     seconds=[round(r.seconds, 1) for r in variant_runs])
        if first.head_roles:
            entry["head_roles"] = per_seed(lambda r, k: [round(w, 4) for w in r.head_roles[k]], first.head_roles)
        variants.append(entry)
    return {"config": _config_json(config),
            "arithmetic": arithmetic(), "curve_every": CURVE_EVERY, "curve_per_kind": CURVE_PER_KIND,
            "seconds": round(seconds, 1), "variants": variants}


def _config_json(config: LadderConfig) -> dict:
    return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(config).items()}


def steps_to(curve, level: float, every: int = CURVE_EVERY):
    """The first step of a learning curve at which accuracy reached ``level`` (None: never)."""
    reached = np.flatnonzero(np.asarray(curve) >= level)
    return int((reached[0] + 1) * every) if len(reached) else None


# The page states the AVX2 record, the arithmetic of the ladder's own table (docs/ladder.md); the
# AVX-512 one beside it is checked by the same bounds.
SHOWN_ARITHMETIC_ENDS = "32-byte vectors"


def load_records(path) -> dict:
    """The records kept in ``path``: {arithmetic: record}, one per machine that made one."""
    with open(path) as file:
        return json.load(file)["machines"]


def load_record(path, made_with: str | None = None) -> dict:
    """The record of ``path`` made with the arithmetic ``made_with`` (None: the one the page
    states, AVX2's); KeyError naming the arithmetics it holds if there is none."""
    records = load_records(path)
    wanted = [name for name in records if (name == made_with if made_with else name.endswith(SHOWN_ARITHMETIC_ENDS))]
    if not wanted:
        raise KeyError(f"{path} holds no record made with {made_with or SHOWN_ARITHMETIC_ENDS!r}, only with "
                       f"{', '.join(records)}")
    return records[wanted[0]]


def keep_record(path, record: dict, command: str) -> str:
    """The file's text with ``record`` kept under its arithmetic, beside the other machines'
    records already in ``path`` (a record of the same arithmetic is replaced)."""
    kept = {"command": command, "machines": {}}
    if os.path.exists(path):
        with open(path) as file:
            found = json.load(file)
        kept["machines"] = found.get("machines", {})
    kept["machines"][record["arithmetic"]] = record
    return json.dumps(kept, indent=2) + "\n"
