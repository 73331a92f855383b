"""Watch attention form: the attention maps of a fixed probe input, recorded while a run trains.

``dates-train --snapshot-every N`` (and ``next-word-train``) runs the model on its probe every
N steps (and at step 0, before any training, and at the run's last step) and keeps every
attention module's weights: every layer, head and kind the model has. ``dates-explore`` then
puts a training-step slider over them, so the pattern can be watched as it appears.

The probes: for the dates, ``1845-01-05`` teacher-forced on its answer ``January 5, 1845`` (the
date every viz command draws by default); for next-word prediction, the first held-out sentence
of each kind in the language's fixed evaluation set (``Language.evaluation_set``), one row each,
then the same swap and recall sentences with the other animal and the other name asked: a
circuit that answers "the first place stated" gets one recall row right and the other wrong,
one that recalls gets both. A next-word run also scores each kind's held-out accuracy at every
snapshot, on a fixed set (``KIND_ACCURACY_PER_KIND`` sentences per kind), for the curves.

The file, ``attention_snapshots.npz`` in the run folder, loads without pickle, every member checked
against the model first (``load_snapshots``, ``transformer/files/snapshots_file.py``):

    steps         (S,) int64          the steps recorded, increasing
    loss          (S,) float32        that step's training loss (NaN at step 0)
    accuracy      (S,) float32        that step's ``batch_exact_match`` (the stopping rule's estimate)
    accuracy_name ()   str            what ``accuracy`` is, in words
    every         ()   int64          N
    probe         (P,) str            the probe rows, in words
    modules       (M,) str            e.g. decoder.layers.1.cross_attn; kinds (M,) str; layers (M,) int64
    held_out_kinds (K,) str           next-word only: the sentence kinds, and
    held_out_accuracy (S, K) float32  each kind's held-out accuracy at each step
    weights.m     (S, P, heads, Tq, Tk) float16    module m's weights
    queries.m, keys.m   (P, Tq), (P, Tk) str       module m's query and key tokens

float16 keeps three significant digits, plenty for a heatmap, and half the bytes (a default
date run at N = 10: about 0.2 MB). The file is rewritten whole, atomically, when the trainer
saves a checkpoint and when the session ends, so it never holds fewer steps than the
checkpoint; a resumed run first drops the snapshots after its checkpoint's step (as the log is
cut back) and then continues them.
"""
import os
import sys

import numpy as np

from transformer.models.attention import CrossAttention, SelfAttention
from transformer.files.checkpoint import write_npz_atomically
from transformer.files.snapshots_file import MAX_SNAPSHOT_BYTES, SnapshotError, SnapshotLayout, read_snapshots
from transformer.models.decoder_only import DecoderOnlyTransformer
from transformer.decoding import inference

SNAPSHOTS_NAME = "attention_snapshots.npz"
PROBE_DATE = "1845-01-05"
ACCURACY_NAMES = {"dates": "training batch exact match", "next-word": "held-out sample accuracy, lowest kind"}
KIND_ACCURACY_PER_KIND = 40     # held-out sentences per kind scored at each next-word snapshot


# --------------------------------------------------------------------- probes
def date_probe(model):
    """-> (model inputs, probe rows in words, {module kind: (query tokens, key tokens)})."""
    from transformer.tasks.dates import VOCAB, encode, translate_reference
    answer = translate_reference(PROBE_DATE)
    src = encode(PROBE_DATE)[None].astype(np.int64)
    tgt_in = encode(answer)[None, :-1].astype(np.int64)          # <sos> + answer, as teacher forcing feeds it

    def tokens(ids):
        return np.array([["␣" if VOCAB[i] == " " else VOCAB[i] for i in row] for row in ids])
    if isinstance(model, DecoderOnlyTransformer):
        sequence = tokens(np.concatenate([src[:, 1:-1], tgt_in], axis=1))
        return ((np.concatenate([src[:, 1:-1], tgt_in], axis=1),), [f"{PROBE_DATE} -> {answer}"],
                {"decoder-self": (sequence, sequence)})
    source, target = tokens(src), tokens(tgt_in)
    return ((src, tgt_in), [f"{PROBE_DATE} -> {answer}"],
            {"encoder-self": (source, source), "decoder-self": (target, target), "cross": (target, source)})


def sentence_probe(model, kinds):
    """The first held-out sentence of each of ``kinds``, one row each (padded to the longest), then
    the swap and the recall sentence again with the other animal and the other name asked."""
    from transformer.tasks import language
    examples = language.Language(kinds=kinds).evaluation_set(per_kind=1)   # the split next-word runs train on
    first = {example.kind: example for example in examples}
    for kind in ("swap", "recall"):
        *rest, asked = first[kind].combination
        examples.append(language.make_example(kind, (*rest, 1 - asked)))
    inputs = language.encode_batch(examples).inputs
    words = np.array([[language.VOCAB[i] for i in row] for row in inputs])
    rows = [f"{example.kind}: {' '.join(example.words)}" for example in examples]
    return (inputs,), rows, {"decoder-self": (words, words)}




def attention_modules(model) -> list:
    """[(name, kind, layer, module)] of every attention module, in the model's order."""
    found = []
    for name, module in model.named_modules():
        if isinstance(module, (SelfAttention, CrossAttention)):
            kind = "cross" if isinstance(module, CrossAttention) else \
                "encoder-self" if name.startswith("encoder.") else "decoder-self"
            found.append((name, kind, int(name.split(".")[2]), module))
    return found


# ------------------------------------------------------------------ recorder
class AttentionSnapshots:
    """The session's snapshot observer (``Trainer.run``): ``after_step`` records every ``every``
    steps, the file is written when a checkpoint is and when the session ends. ``every`` = 0:
    does nothing."""

    def __init__(self, trainer, every: int, path: str):
        self.trainer, self.every, self.path = trainer, every, path
        if not every:
            return
        model = trainer.model
        self.probe_of_model = trainer.snapshot_probe(model)    # (inputs, rows, {kind: (query, key tokens)})
        self.inputs, self.probe, labels = self.probe_of_model
        self.modules = attention_modules(model)
        self.labels = [labels[kind] for _, kind, _, _ in self.modules]
        self.scorer = trainer.kind_scorer(KIND_ACCURACY_PER_KIND)
        self.records = []          # per step: (step, loss, accuracy, [weights per module], [accuracy per kind])
        self.full = False          # the records reached the file's size limit

    def __enter__(self):
        if self.every:
            self._continue_earlier(self.trainer.step)
            if not self.records:      # the untrained model's attention, or the resumed one's when its run's are lost
                self.record(float("nan"), float("nan"))
        return self

    def after_step(self, record: dict, saved: bool):
        """After each step: record on the cadence; write when the checkpoint was just saved."""
        if not self.every:
            return
        if record["step"] % self.every == 0:
            self.record(record["loss"], record["batch_exact_match"])
        if saved:
            self.write()

    def finished(self, record: dict):
        """The run ended normally: its last step is recorded too (the model in the checkpoint)."""
        if self.every and record is not None and (not self.records or self.records[-1][0] != record["step"]):
            self.record(record["loss"], record["batch_exact_match"])

    def __exit__(self, *exc):
        if self.every:
            self.write()

    def record(self, loss: float, accuracy: float):
        model = self.trainer.model
        with inference(model):
            model(*self.inputs)
        weights = [np.asarray(module.last_weights, dtype=np.float16) for _, _, _, module in self.modules]
        if (len(self.records) + 1) * sum(w.nbytes for w in weights) > MAX_SNAPSHOT_BYTES - 2 ** 20:
            if not self.full:           # a file no reader would accept: stop recording, say so once
                print(f"note: attention snapshots stop at step {self.records[-1][0] if self.records else 0}: more "
                      f"would pass the file's limit of {MAX_SNAPSHOT_BYTES // 2 ** 20} MB (raise --snapshot-every)",
                      file=sys.stderr, flush=True)
            self.full = True
            return
        kinds = self.scorer[1](model) if self.scorer else []
        self.records.append((self.trainer.step, loss, accuracy, weights, kinds))

    def write(self):
        if not self.records:
            return
        arrays = {"steps": np.array([r[0] for r in self.records], dtype=np.int64),
                  "loss": np.array([r[1] for r in self.records], dtype=np.float32),
                  "accuracy": np.array([r[2] for r in self.records], dtype=np.float32),
                  "accuracy_name": np.array(ACCURACY_NAMES[self.trainer.TASK]),
                  "every": np.array(self.every, dtype=np.int64), "probe": np.array(self.probe),
                  "modules": np.array([m[0] for m in self.modules]), "kinds": np.array([m[1] for m in self.modules]),
                  "layers": np.array([m[2] for m in self.modules], dtype=np.int64)}
        for m, (queries, keys) in enumerate(self.labels):
            arrays[f"weights.{m}"] = np.stack([r[3][m] for r in self.records])
            arrays[f"queries.{m}"], arrays[f"keys.{m}"] = queries, keys
        if self.scorer:
            arrays["held_out_kinds"] = np.array(self.scorer[0])
            arrays["held_out_accuracy"] = np.array([r[4] for r in self.records], dtype=np.float32)
        write_npz_atomically(self.path, arrays, compressed=True)

    def _continue_earlier(self, step: int):
        """A resumed run: the snapshots up to its checkpoint's ``step``, from the folder it was
        resumed from, else its own; when that file cannot be read or is another model's or
        probe's, one line says so and the run records its own from ``step``."""
        if not step:
            return
        resumed_from = self.trainer.resumed_from
        sources = [self.path] + ([os.path.join(os.path.dirname(os.path.abspath(resumed_from)), SNAPSHOTS_NAME)]
                                 if resumed_from else [])
        for source in reversed(sources):          # the checkpoint's own folder first
            if not os.path.lexists(source):
                continue
            try:
                earlier = load_snapshots(source, self.trainer.model, self.probe_of_model)
            except SnapshotError as error:
                print(f"note: the attention snapshots are not continued: {error}; this run records its own "
                      f"from step {step}", file=sys.stderr, flush=True)
                return
            kinds = earlier.get("held_out_accuracy")
            for i, s in enumerate(earlier["steps"]):
                if s <= step:
                    scored = [float(a) for a in kinds[i]] if kinds is not None else \
                        [float("nan")] * len(self.scorer[0]) if self.scorer else []
                    self.records.append((int(s), float(earlier["loss"][i]), float(earlier["accuracy"][i]),
                                         [w[i].astype(np.float16) for w in earlier["weights"]], scored))
            return


# -------------------------------------------------------------------- reading
def snapshots_beside(checkpoint) -> str:
    """The snapshots file in a checkpoint's run folder, or None when it has none."""
    if not checkpoint:
        return None
    path = os.path.join(os.path.dirname(os.path.abspath(checkpoint)), SNAPSHOTS_NAME)
    return path if os.path.lexists(path) else None


def snapshot_layout(model, probe) -> SnapshotLayout:
    """What the snapshots of ``model`` on ``probe`` (its task's ``snapshot_probe(model)``) hold: its
    modules, heads, probe rows and tokens, to check a file against."""
    _, rows, labels = probe
    return SnapshotLayout(rows, [(name, kind, layer, module.num_heads, *labels[kind])
                                 for name, kind, layer, module in attention_modules(model)])


def load_snapshots(path, model=None, probe=None) -> dict:
    """The file's arrays, every member checked against ``model`` and its ``probe`` (its task's
    ``snapshot_probe(model)``) before use, or without them against each other
    (``transformer.files.snapshots_file``); ``weights`` and ``queries``/``keys`` as lists by
    module. SnapshotError in one line otherwise."""
    return read_snapshots(path, None if model is None else snapshot_layout(model, probe))
