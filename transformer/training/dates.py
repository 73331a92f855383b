"""Training the date model: the date task for the generic ``Trainer``.

One step samples a batch of training days, feeds ``<sos> + target`` to the decoder and
scores its predictions of ``target + <eos>`` with cross-entropy that ignores ``<pad>``
(teacher forcing). Either architecture (``transformer.models.build_model``): the
encoder-decoder reads the date in its encoder; the decoder-only model reads one sequence,
the date's characters, ``<sos>``, the target (``dates.join_for_decoder_only``), and only
the answer's tokens are scored (``teacher_forced``). The rest of a run (the step, the
schedule, the stopping rule, checkpoints, resume) is ``trainer.Trainer``'s.
"""
import numpy as np

from minigrad import functional as F
from transformer.models.config import ModelConfig
from transformer.models.decoder_only import IGNORE, DecoderOnlyTransformer, scored_targets
from transformer.tasks.dates import PAD, PROMPT_LEN, DateDataset, join_for_decoder_only
from transformer.training.evaluation import evaluate
from transformer.training.snapshots import date_probe
from transformer.training.trainer import TrainConfig, Trainer


class DateTrainer(Trainer):
    """``Trainer`` on the date task: ``1845-01-05`` -> ``January 5, 1845``, exact match on held-out dates."""
    TASK = "dates"

    def __init__(self, model_config: ModelConfig = None, train_config: TrainConfig = None, out_dir="runs/dates"):
        super().__init__(model_config or ModelConfig(), train_config or TrainConfig(), out_dir)

    def make_data(self):
        return DateDataset()

    def sample_batch(self) -> tuple:
        """One training batch: (dates, their answers), a row per example."""
        return self.data.sample_batch(self.data_rng, self.config.batch_size)

    def batch_forward(self, batch: tuple):
        """-> (mean loss over the scored tokens, logits) of a batch, teacher-forced."""
        src, tgt = batch
        loss, logits, _ = teacher_forced(self.model, src, tgt, self.config.label_smoothing)
        return loss, logits

    def batch_outcome(self, batch: tuple, logits):
        """-> (how many tokens are scored, which rows were exactly right) of a batch."""
        targets = teacher_forced_targets(self.model, *batch)
        return int(scored(targets).sum()), rows_exactly_right(logits, targets)

    def batch_estimate(self, rows) -> float:
        """The batch's free estimate of held-out exact match (``teacher_forced_exact_match``: the
        stopping rule's cool-down signal), from which of its rows were exactly right."""
        return float(rows.mean())

    def snapshot_probe(self, model):
        return date_probe(model)

    def evaluate(self, limit: int = None, show_wrong: int = 5) -> dict:
        src, tgt = self.data.test_src, self.data.test_tgt
        if limit:
            src, tgt = src[:limit], tgt[:limit]
        return evaluate(self.model, src, tgt, show_wrong=show_wrong)


def teacher_forced(model, src, tgt, label_smoothing: float = 0.0):
    """-> (loss, logits, targets) of one batch of dates, every answer token predicted from the
    true ones before it; targets that are not scored hold ``<pad>`` or ``decoder_only.IGNORE``."""
    if isinstance(model, DecoderOnlyTransformer):
        return model.next_token_loss(*decoder_only_sequences(src, tgt), label_smoothing)
    logits = model(src, tgt[:, :-1])
    loss = F.cross_entropy(logits, tgt[:, 1:], ignore_index=PAD, label_smoothing=label_smoothing)
    return loss, logits, tgt[:, 1:]


def decoder_only_sequences(src, tgt):
    """-> (each date and its answer as one sequence, which of its tokens are predicted: the answer's)."""
    sequences = join_for_decoder_only(src, tgt)
    return sequences, (np.arange(sequences.shape[1]) >= PROMPT_LEN) & (sequences != PAD)


def teacher_forced_targets(model, src, tgt) -> np.ndarray:
    """The targets ``teacher_forced`` scores the logits against, as an array."""
    if isinstance(model, DecoderOnlyTransformer):
        return scored_targets(*decoder_only_sequences(src, tgt))
    return tgt[:, 1:]


def scored(targets: np.ndarray) -> np.ndarray:
    """Which targets count: neither ``<pad>`` nor ``IGNORE``."""
    return (targets != PAD) & (targets != IGNORE)


def teacher_forced_exact_match(logits: np.ndarray, targets: np.ndarray) -> float:
    """Fraction of rows whose every next-token argmax equals the target (``<pad>`` and
    ``IGNORE`` ignored).

    When every teacher-forced prediction is right, greedy decoding feeds itself the same
    prefixes and writes exactly the target: so this is the batch's greedy exact match
    before the update, for free (the logits exist already). The stopping rule starts the
    learning-rate cool-down from it (``stopping.TargetStop``), without a second of decoding.
    """
    return float(rows_exactly_right(logits, targets).mean())


def rows_exactly_right(logits: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """Per row: is every next-token argmax the target (``<pad>`` and ``IGNORE`` ignored)?"""
    right = (logits.argmax(axis=-1) == targets) | ~scored(targets)
    return right.all(axis=1)
