"""Next-word prediction on the generated language (``language.py``) with the decoder-only model.

Training (``NextWordTrainer``, the date trainer with another task): each step draws a batch
of training sentences (only combinations never held out) and scores the model's prediction
of each sentence's *scored word*, its last, and of the ``<eos>`` after it; the words before
are the prompt and are not scored (most are a free choice of the language: which name,
which shop). The kinds share the batch unevenly (``KIND_SHARES``): recall, which needs two
layers of attention working together (find the name asked about, copy the place after it),
gets 70% of it and swap 15%; the other kinds are learned from the rest. On seed 0 recall is
still the lowest kind when the run stops (95.5% of the held-out sentences, every other kind at
100%: ``next-word-train`` prints each kind's accuracy).

Held-out accuracy of a kind: how often the model's most likely word at the scored position
is the scored word, over a fixed set of held-out sentences (up to ``EVAL_PER_KIND`` per kind;
their names, places, things and animals never appeared together in training). The stopping
rule (``stopping.TargetStop``) reads the lowest kind's accuracy, so the target holds only
when every kind reaches it. Its cool-down starts from a small held-out sample scored every
step (``held_out_estimate``), not from the training batches as for the dates: a model
memorises which name went with which place in training long before it learns to read the
answer from the sentence, and its training accuracy would start the cool-down too early.

Completion (``complete``): greedy, or sampled with a temperature and top-k, one word at a
time through the key/value caches, until ``<eos>`` or the model's ``max_len``. Only the
scored word and ``<eos>`` were trained, so a prompt that stops elsewhere gets a guess.
"""
import numpy as np

from minigrad import functional as F

from transformer.tasks import language
from transformer.models.config import DecoderOnlyConfig
from transformer.models.decoder_only import IGNORE, DecoderOnlyTransformer
from transformer.decoding import inference, sampler
from transformer.training.snapshots import sentence_probe
from transformer.training.trainer import TrainConfig, Trainer

EVAL_PER_KIND = 200        # held-out sentences per kind in an evaluation
ESTIMATE_PER_KIND = 16     # held-out sentences per kind in each step's estimate (when to cool down)
KIND_SHARES = {"topic": 0.05, "colour": 0.05, "swap": 0.15, "order": 0.05, "recall": 0.7}
KINDS = tuple(KIND_SHARES)  # the language's kinds this model learns (game and blend are the attention ladder's)
MAX_LEN = 32               # positions: the longest sentence (17 words + <bos>) and room to complete a prompt


def default_model_config(**changes) -> DecoderOnlyConfig:
    return DecoderOnlyConfig(**{"task": "next-word", "vocab_size": len(language.VOCAB), "max_len": MAX_LEN,
                                **changes})


def default_train_config(**changes) -> TrainConfig:
    """The defaults of next-word-train: every held-out kind at 95%, confirmed after a short cool-down."""
    return TrainConfig(**{"steps": 3000, "batch_size": 128, "lr": 2e-3, "warmup": 50, "cooldown": 30,
                          "target_accuracy": 0.95, "cooldown_at": 0.98, **changes})


def scored_words(logits: np.ndarray, batch: language.Batch) -> np.ndarray:
    """(B,) bool: is the most likely word at each sentence's scored position the scored word?"""
    rows = np.arange(len(batch.answer_position))
    predicted = logits[rows, batch.answer_position].argmax(axis=-1)
    return predicted == batch.targets[rows, batch.answer_position]


def accuracy_by_kind(model, examples, show_wrong: int = 0) -> dict:
    """Held-out accuracy of each kind (fractions), their lowest, and up to ``show_wrong`` wrong
    (context, predicted, expected) triples."""
    batch = language.encode_batch(examples)
    with inference(model):
        logits = model(batch.inputs).data
    right = scored_words(logits, batch)
    kinds = np.array(batch.kinds)
    per_kind = {kind: float(right[kinds == kind].mean()) for kind in dict.fromkeys(batch.kinds)}
    rows = np.arange(len(examples))
    predicted = logits[rows, batch.answer_position].argmax(axis=-1)
    wrong = [(" ".join(examples[i].context), language.VOCAB[predicted[i]], examples[i].answer)
             for i in np.flatnonzero(~right)[:show_wrong]]
    return {"per_kind": per_kind, "lowest": min(per_kind.values()), "mean": float(right.mean()),
            "count": len(examples), "wrong": wrong}


class NextWordTrainer(Trainer):
    """``Trainer`` on the generated language: its own data, batches, loss and evaluation."""
    TASK = "next-word"
    HELD_OUT = "held-out sentences"
    METRIC = "held-out accuracy, lowest kind"
    ESTIMATE = "held-out samples at {:.1%}, lowest kind"

    def __init__(self, model_config: DecoderOnlyConfig = None, train_config: TrainConfig = None,
                 out_dir="runs/next-word"):
        super().__init__(model_config or default_model_config(), train_config or default_train_config(), out_dir)
        if not isinstance(self.model, DecoderOnlyTransformer):
            raise ValueError("next-word prediction trains a decoder-only model (DecoderOnlyConfig)")

    def make_data(self):
        self.held_out = None
        return language.Language(kinds=KINDS)      # its default split: the same for every run

    def sample_batch(self) -> tuple:
        batch = language.encode_batch(self.training_sentences(), loss_on="answer")
        scored = batch.loss_mask.copy()
        scored[np.arange(len(scored)), batch.answer_position + 1] = True    # the <eos> after the scored word
        return batch.inputs, np.where(scored, batch.targets, IGNORE)

    def batch_forward(self, batch: tuple):
        inputs, targets = batch
        logits = self.model(inputs)
        return F.cross_entropy(logits, targets, ignore_index=IGNORE, label_smoothing=self.config.label_smoothing), logits

    def batch_outcome(self, batch: tuple, logits):
        inputs, targets = batch
        return int((targets != IGNORE).sum()), None

    def snapshot_probe(self, model):
        return sentence_probe(model, KINDS)

    def kind_scorer(self, per_kind: int):
        examples = language.Language(kinds=KINDS).evaluation_set(per_kind=per_kind)
        kinds = list(dict.fromkeys(example.kind for example in examples))
        return kinds, lambda model: [accuracy_by_kind(model, examples)["per_kind"][kind] for kind in kinds]

    def batch_estimate(self, rows) -> float:
        return self.held_out_estimate()

    def held_out_estimate(self) -> float:
        """The stopping rule's cool-down signal: the lowest kind's accuracy on ``ESTIMATE_PER_KIND``
        held-out sentences per kind, drawn afresh each step (one forward pass, no backward). The
        training batches' own accuracy would mislead: a model memorises which names went with
        which places in training long before it learns to read the answer from the sentence."""
        examples = [example for kind in self.data.kinds
                    for example in self.data.sample("held-out", ESTIMATE_PER_KIND, self.data_rng, kind=kind)]
        return accuracy_by_kind(self.model, examples)["lowest"]

    def training_sentences(self) -> list:
        """One batch: each kind's share of ``KIND_SHARES`` of the batch size, drawn from its training combinations."""
        counts = {kind: int(round(share * self.config.batch_size)) for kind, share in KIND_SHARES.items()}
        counts["recall"] += self.config.batch_size - sum(counts.values())
        return [example for kind, count in counts.items()
                for example in self.data.sample("train", count, self.data_rng, kind=kind) if count]

    def evaluate(self, limit: int = None, show_wrong: int = 5) -> dict:
        """The stopping rule's "exact_match" is the lowest kind's held-out accuracy."""
        if self.held_out is None:
            self.held_out = self.data.evaluation_set(per_kind=EVAL_PER_KIND)
        examples = self.held_out[:limit] if limit else self.held_out
        result = accuracy_by_kind(self.model, examples, show_wrong)
        return {**result, "exact_match": result["lowest"], "char_accuracy": result["mean"]}


def check_prompt(model, words) -> list:
    """``<bos>`` + the ids of ``words``; LanguageError in one line for an unknown word, a marker
    (``<eos>`` ...) or too many."""
    prompt = [language.BOS] + language.prompt_ids(words)
    if not words or len(prompt) >= model.config.max_len:
        raise language.LanguageError(f"the prompt has {len(words)} words; the model continues 1 to "
                                     f"{model.config.max_len - 2} words (the start of a sentence, e.g. "
                                     f"'ann went to the bakery and bought a')")
    return prompt


def complete(model, words, max_words: int = None, temperature: float = 0.0, top_k: int = None,
             rng=None) -> list:
    """The words that follow ``words`` (a list of the language's words), one at a time until
    ``<eos>`` or ``max_words`` (default: as many as fit in the model's max_len)."""
    prompt = check_prompt(model, words)
    room = model.config.max_len - len(prompt)
    max_words = room if max_words is None else min(max_words, room)
    pick = sampler(temperature, top_k, rng)

    def pick_a_word(logits):
        logits = logits.copy()
        logits[:, [language.PAD, language.BOS]] = -np.inf       # never a word to write
        return pick(logits)

    with inference(model):
        ids = model.generate(np.array([prompt]), max_words, pick_a_word, stop=language.EOS,
                             fill=language.PAD)[0]
    return language.decode(ids)
