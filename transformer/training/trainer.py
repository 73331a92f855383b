"""The training loop: Adam with warm-up, a learning-rate schedule, checkpoints, resume.

One step reads as the textbook's (``Trainer.train_step``): a batch, its forward, loss and
``loss.backward()`` (``piece_backward``), clip the gradients' norm, an Adam step, the schedule.
A task gives its data, batches, a batch's loss and evaluation (``dates.DateTrainer``,
``next_word.NextWordTrainer``). How a batch is spread over workers (its fixed pieces, on one or
two threads, or over the processes of an MPI job: ``transformer/parallel/``) is one seam, as
nanoGPT's gradient accumulation and DDP are: the step hands the batch to
``self.gradients(batch)``, which runs ``piece_backward`` on each piece and adds their gradients
into ``.grad``, and ``run`` enters ``self.gradients.running()`` once around the steps.

Everything random (initial weights, dropout, batches) comes from generators
seeded by ``TrainConfig.seed`` whose states go into every checkpoint, so a run
resumed from a checkpoint continues exactly as the uninterrupted run would.
"""
import contextlib
import math
import os
import time
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass

import numpy as np

import minigrad
from minigrad import optim
from minigrad.flat import FlatParameters
from transformer.parallel.ranks import step_gradients, writes_the_run

from transformer.files.checkpoint import CheckpointError, check_savable, load_checkpoint, save_checkpoint
from transformer.files.run_dir import CHECKPOINT_NAME, LOG_NAME
from transformer.files.trained_model import check_task
from transformer.models import build_model
from transformer.models.config import model_config_from_dict
from transformer.training.session import CheckpointCadence, ProgressBar, TrainingClock, TrainingLog, step_profile
from transformer.training.snapshots import SNAPSHOTS_NAME, AttentionSnapshots
from transformer.training.stopping import TargetStop
from transformer.training.traced_pieces import TracedPieceBackward

SCHEDULES = ("plateau", "cosine", "inverse_sqrt", "constant")
MAX_PIECES = 64


@dataclass
class TrainConfig:
    steps: int = 600              # at most this many optimizer steps (the run stops earlier at the target)
    batch_size: int = 128
    lr: float = 2e-3              # peak learning rate, reached at the end of warm-up
    warmup: int = 50              # linear warm-up steps
    schedule: str = "plateau"     # after warm-up: plateau (peak until cooldown_at, then cool-down),
                                  # cosine (to 0 at `steps`), inverse_sqrt, constant
    cooldown: int = 50            # plateau: steps of cosine decay to final_lr_fraction * lr; also
                                  # the window that confirms the target (any schedule)
    final_lr_fraction: float = 0.1
    target_accuracy: float = 0.999  # stop when held-out exact match reaches it (confirmed); 0 = never
    cooldown_at: float = 0.98     # training batches' exact match that starts the cool-down (at most the target)
    betas: tuple = (0.9, 0.98)    # Adam, as in the paper
    eps: float = 1e-9
    clip: float = 1.0             # max global gradient norm (0 = no clipping)
    label_smoothing: float = 0.0
    seed: int = 0
    eval_every: int = 0           # also evaluate every this many steps, for the log (0 = only when
                                  # the target looks reached and at the end)
    checkpoint_every: int = 100   # save every this many steps (0 = only at the end)
    snapshot_every: int = 0       # record the attention maps of a probe input every this many steps
                                  # (snapshots.AttentionSnapshots; 0 = never)
    pieces: int = 2               # each batch is cut into this many fixed pieces, whose gradients are
                                  # added in order (transformer/parallel/): part of the run's arithmetic

    def __post_init__(self):
        self.betas = tuple(self.betas)
        if self.schedule not in SCHEDULES:
            raise ValueError(f"schedule must be one of {', '.join(SCHEDULES)}, got {self.schedule!r}")
        for name, low in (("steps", 1), ("batch_size", 1), ("warmup", 0), ("cooldown", 1), ("seed", 0),
                          ("eval_every", 0), ("checkpoint_every", 0), ("snapshot_every", 0), ("pieces", 1)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
        for name, low, high in (("lr", 0.0, 1.0), ("clip", 0.0, math.inf), ("label_smoothing", 0.0, 1.0),
                                ("target_accuracy", 0.0, 1.0), ("cooldown_at", 0.0, 1.0),
                                ("final_lr_fraction", 0.0, 1.0),
                                ("eps", 0.0, 1.0)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                    or not low <= value <= high:
                raise ValueError(f"{name} must be a finite number in [{low:g}, {high:g}], got {value!r}")
        if self.lr == 0:
            raise ValueError("lr must be positive, got 0")
        if self.pieces > MAX_PIECES:                   # each piece keeps a flat gradient array
            raise ValueError(f"pieces must be at most {MAX_PIECES}, got {self.pieces}")
        if len(self.betas) != 2 or not all(isinstance(b, (int, float)) and 0 <= b < 1 for b in self.betas):
            raise ValueError(f"betas must be two numbers in [0, 1), got {self.betas!r}")


class Trainer(ABC):
    """Holds the model, optimizer, schedule, data, RNGs and stopping rule of one training run.

    A task is a subclass (``dates.DateTrainer``, ``next_word.NextWordTrainer``) that gives
    ``make_data``, ``sample_batch``, ``batch_forward``, ``batch_outcome``, ``batch_estimate`` and ``evaluate``; the
    step, the schedule, the stopping rule, checkpoints and resume are the same for every task.
    """
    TASK = None                                  # the task of the models it trains (config.task)
    HELD_OUT = "held-out dates"                  # what an evaluation scores, in messages
    METRIC = "held-out exact match"              # the evaluation's "exact_match", in messages
    ESTIMATE = "training batches at {:.1%} exact match"   # batch_estimate's value, in messages

    def __init__(self, model_config, train_config: TrainConfig, out_dir: str):
        self.model_config = model_config
        self.config = train_config
        self.out_dir = out_dir
        minigrad.manual_seed(self.config.seed)
        self.model = build_model(self.model_config)
        self._dropouts = [m for _, m in self.model.named_modules() if isinstance(m, minigrad.nn.Dropout)]
        # one flat array of values and one of gradients: Adam updates all in one call (minigrad/flat.py)
        self.flat_params = FlatParameters(self.model.parameters())
        # runs piece_backward on the batch's fixed pieces, over one or two threads or the processes
        # of an MPI job (transformer/parallel/), and adds their gradients: the same numbers every way
        self.gradients = step_gradients(self.flat_params, self.piece_backward, self._draws_dropout(),
                                        self.config.pieces)
        self.trace_pieces(True)
        self.writer = writes_the_run()   # False on an MPI job's ranks but 0: rank 0 writes for all
        self.optimizer = optim.Adam(self.flat_params, lr=self.config.lr, betas=self.config.betas,
                                    eps=self.config.eps)
        self.schedule = self._make_schedule()
        self.stopper = TargetStop(self.config.target_accuracy, self.config.cooldown, self.config.cooldown_at)
        self.data = self.make_data()
        self.data_rng = np.random.default_rng(self.config.seed)
        self.step = 0
        self.elapsed = 0.0         # training seconds before this session (a resumed run continues it)
        self.history = []          # eval records: {"step", "exact_match", "char_accuracy", ...}
        self.resumed_from = None   # the checkpoint this run continues, if any

    def _make_schedule(self):
        c = self.config
        if c.schedule == "plateau":
            return optim.WarmupPlateauCooldown(self.optimizer, c.lr, c.warmup, c.cooldown, c.steps,
                                               min_lr=c.final_lr_fraction * c.lr)
        if c.schedule == "cosine":
            return optim.WarmupCosine(self.optimizer, c.lr, c.warmup, c.steps)
        if c.schedule == "inverse_sqrt":
            return optim.WarmupInverseSqrt(self.optimizer, c.lr, c.warmup)
        return optim.WarmupConstant(self.optimizer, c.lr, c.warmup)

    # ----------------------------------------------------------------- the task's
    @abstractmethod
    def make_data(self):
        """The task's data (``self.data``)."""

    @abstractmethod
    def sample_batch(self) -> tuple:
        """One training batch: a tuple of arrays whose rows are its examples."""

    @abstractmethod
    def batch_forward(self, batch: tuple):
        """The model's forward and loss on ``batch``: -> (mean loss Tensor over its scored tokens,
        the logits Tensor). Tensors only, read nothing back: a trace records it as it is."""

    @abstractmethod
    def batch_outcome(self, batch: tuple, logits: np.ndarray):
        """What the step reports of ``batch``, from its forward's logits: -> (how many tokens the
        loss is over, an array with one entry per row for ``batch_estimate`` or None)."""

    def batch_loss(self, batch: tuple):
        """The forward on ``batch``: -> (mean loss Tensor over its scored tokens, how many tokens,
        the per-row outcome or None)."""
        loss, logits = self.batch_forward(batch)
        return (loss, *self.batch_outcome(batch, logits.data))

    @abstractmethod
    def batch_estimate(self, rows) -> float:
        """A free estimate of held-out accuracy after a step, from the batch's per-row outcome
        (``batch_loss``'s third value): the stopping rule's cool-down signal."""

    @abstractmethod
    def evaluate(self, limit: int = None, show_wrong: int = 5) -> dict:
        """Held-out evaluation: a dict with at least "exact_match" and "char_accuracy"."""

    @abstractmethod
    def snapshot_probe(self, model):
        """-> (model inputs, probe rows in words, {attention kind: (query tokens, key tokens)}): the
        input whose attention the snapshots record while the run trains (``snapshots.py``)."""

    def kind_scorer(self, per_kind: int):
        """A task whose examples come in kinds: (the kinds, model -> each kind's accuracy on a fixed
        held-out set of ``per_kind`` examples each), which the attention snapshots record; else None."""
        return None

    # ----------------------------------------------------------------- steps
    def train_step(self) -> dict:
        """One optimizer step: a fresh batch, its loss and gradients, clip, Adam, the learning-rate schedule."""
        batch = self.sample_batch()
        lr = self.optimizer.lr
        # piece_backward on each of the batch's pieces (on threads or MPI ranks: transformer/parallel/),
        # their gradients added by share of tokens: every .grad is the whole batch's loss.backward()
        computed = self.gradients(batch)
        estimate = self.batch_estimate(computed.rows)       # of the model this batch saw
        grad_norm = optim.clip_grad_norm(self.flat_params, self.config.clip) if self.config.clip else None
        self.optimizer.step()
        self.schedule.step()
        self.step += 1
        return {"step": self.step, "loss": computed.loss, "lr": lr, "grad_norm": grad_norm,
                "tokens": computed.tokens, "batch_exact_match": estimate,
                "blas_threads": computed.blas_threads, "workers": computed.workers}

    def piece_backward(self, piece: tuple):
        """Forward, loss and backward of one piece of a batch, as a single process trains on a whole
        batch (nanoGPT's micro-step). The seam runs it for each piece, each on its own thread with
        its own gradient bucket; -> (the loss, its scored tokens, the per-row outcome)."""
        loss, tokens, rows = self.batch_loss(piece)     # forward: the mean loss over the piece's scored tokens
        loss.backward()                                 # the gradients, into this piece's bucket
        return loss, tokens, rows

    def trace_pieces(self, traced: bool = True):
        """Let the seam run each piece as a recorded program (``minigrad.trace``: the same forward,
        loss and backward as ``piece_backward``, replayed from a tape with the same bits and less
        Python; ``traced_pieces.py``), the default, or as ``piece_backward`` itself (``--eager``)."""
        self.gradients.piece_backward = TracedPieceBackward(self) if traced else self.piece_backward

    def _draws_dropout(self) -> bool:
        """Whether the model draws dropout masks: then its pieces run one after the other (one
        generator, a fixed order of draws), whatever the worker count."""
        return any(m.p > 0 for m in self._dropouts)

    # ------------------------------------------------------------------- run
    def run(self, progress: bool = True, log_path: str = None, checkpoint_path: str = None,
            profile_step: int = None, blas_threads=None) -> dict:
        """Train until the target accuracy is confirmed or ``config.steps``; returns a summary.

        Ctrl-C or SIGTERM: the current step finishes, a checkpoint of it is saved and
        ``TrainingInterrupted`` (a KeyboardInterrupt) is raised. ``profile_step``: that step
        runs inside ``minigrad.profile()`` and its table is printed. ``blas_threads``: a count
        or ``"auto"`` (``transformer.parallel.threads.TrainingThreads``; default one thread, repeatable).
        """
        log_path = log_path or os.path.join(self.out_dir, LOG_NAME)
        checkpoints = CheckpointCadence(self, checkpoint_path or os.path.join(self.out_dir, CHECKPOINT_NAME))
        clock = TrainingClock(self.elapsed)
        every = self.config.snapshot_every if self.writer else 0
        snapshots = AttentionSnapshots(self, every, os.path.join(self.out_dir, SNAPSHOTS_NAME))
        stop = self.stopper.confirmed(self.step)   # a finished run resumed: nothing to train
        with self.gradients.running(blas_threads) as interrupt:     # threads, memory, Ctrl-C: once a run
            last_eval = self._steps(clock, checkpoints, snapshots, log_path, progress, profile_step, stop,
                                    interrupt)
        return self._summary(last_eval, clock, checkpoints.path, log_path)

    def _steps(self, clock, checkpoints, snapshots, log_path, progress, profile_step, stop, interrupt) -> dict:
        """``run``'s loop: steps until the target is confirmed or ``config.steps``; the last evaluation."""
        last_eval = record = None
        log = TrainingLog(log_path, self.step, self.resumed_from) if self.writer else _Unwritten()
        with log, ProgressBar(self.config.steps, progress) as bar, snapshots:
            while self.step < self.config.steps and not stop:
                record = self._timed_step(clock, bar, profile=self.step + 1 == profile_step)
                interrupt.armed = True             # from now on there is a step worth saving
                if self.stopper.record_batch(self.step, record["batch_exact_match"]):
                    self._start_cooldown(bar)
                if self._evaluation_due():
                    last_eval = self.evaluate(show_wrong=5)
                    stop = self._record_evaluation(last_eval, record, clock.seconds(), bar)
                record["elapsed"] = round(clock.seconds(), 3)
                log.write(record)
                checkpoints.after_step(clock.seconds(), stop)
                snapshots.after_step(record, saved=checkpoints.saved_step == self.step)
                if interrupt.requested and not (self.step == self.config.steps or stop):
                    raise checkpoints.interrupted(clock.seconds())   # a finished run just finishes
                bar.step_done(self.step, record)
            snapshots.finished(record)
        if last_eval is None:      # nothing trained in this session (a finished run resumed)
            last_eval = self.evaluate(show_wrong=5)
        return last_eval

    def _timed_step(self, clock: TrainingClock, bar: ProgressBar, profile: bool) -> dict:
        """One training step, timed (and profiled when asked: its pieces then run on this thread,
        the one the profiler watches)."""
        start = time.perf_counter()
        with step_profile(profile, bar.write):
            record = self.train_step()
        seconds = clock.step_took(time.perf_counter() - start)
        record.update(seconds=round(seconds, 5), tokens_per_s=round(record["tokens"] / seconds, 1))
        return record

    def _evaluation_due(self) -> bool:
        """Held-out evaluation after this step: every ``eval_every`` steps (logged only), at the
        last step, and when the stopping rule asks for its confirmation."""
        c = self.config
        return bool(c.eval_every and self.step % c.eval_every == 0 or self.step == c.steps
                    or self.stopper.evaluation_due(self.step))

    def _summary(self, last_eval: dict, clock: TrainingClock, checkpoint_path: str, log_path: str) -> dict:
        return {"steps": self.step, "wall_seconds": clock.wall_seconds(), "training_seconds": clock.seconds(),
                "median_step_ms": clock.median_step_ms(),
                "exact_match": last_eval["exact_match"], "char_accuracy": last_eval["char_accuracy"],
                "count": last_eval["count"], "wrong": last_eval["wrong"], "evaluation": last_eval,
                "target": self.config.target_accuracy if self.stopper.enabled else None,
                "target_confirmed": self.stopper.confirmed(self.step),
                "reached_step": self.stopper.reached_step, "reached_seconds": self.stopper.reached_seconds,
                "cooldown_step": self.stopper.hit_step,
                "checkpoint": checkpoint_path, "log": log_path}

    def _record_evaluation(self, result, record, seconds, bar) -> bool:
        """Log a held-out evaluation and apply the stopping rule; True when the run is done."""
        record.update(exact_match=result["exact_match"], char_accuracy=result["char_accuracy"])
        self.history.append({"step": self.step, "exact_match": result["exact_match"],
                             "char_accuracy": result["char_accuracy"], "loss": record["loss"]})
        outcome = self.stopper.record_evaluation(self.step, result["exact_match"], seconds)
        note = {"confirmed": "  -> target confirmed: stopping", "missed": "  -> below the target after the cool-down"}
        bar.write(f"step {self.step:5d}  loss {record['loss']:.4f}  {self.METRIC} "
                  f"{result['exact_match']:.2%}{note.get(outcome, '')}")
        return outcome == "confirmed"

    def _start_cooldown(self, bar):
        """The training batches are nearly all right: settle the model, then check held-out dates."""
        s = self.stopper
        bar.write(f"step {self.step:5d}  {self.ESTIMATE.format(s.hit_at)}: cooling down; "
                  f"{self.HELD_OUT} are checked at step {s.hit_step + s.confirm_steps}")
        if hasattr(self.schedule, "start_cooldown"):
            self.schedule.start_cooldown()

    # ----------------------------------------------------------- checkpoints
    def save(self, path: str, elapsed: float = None):
        if not self.writer:       # another process of the job writes the same state
            return
        meta = {
            "model_config": self.model_config.to_dict(),
            "train_config": asdict(self.config),
            "step": self.step,
            "elapsed": self.elapsed if elapsed is None else elapsed,
            "schedule": self.schedule.state_dict(),
            "stopper": self.stopper.state_dict(),
            "minigrad_rng": minigrad.get_rng_state(),
            "data_rng": self.data_rng.bit_generator.state,
            "history": self.history,
        }
        model_state, optimizer_state = self.model.state_dict(), self.optimizer.state_dict()
        check_savable(path, model_state, optimizer_state)      # a diverged run keeps the last good file
        save_checkpoint(path, model_state, optimizer_state, meta)

    @classmethod
    def resume(cls, path: str, out_dir: str = None, steps: int = None, **overrides) -> "Trainer":
        """Rebuild a run from its checkpoint. ``steps`` may change the maximum, ``overrides``
        other TrainConfig fields (e.g. target_accuracy); unchanged, the run continues exactly
        as the uninterrupted one would."""
        model_state, optimizer_state, meta = load_checkpoint(path)
        try:
            train_values = dict(meta["train_config"])
            if steps is not None:
                train_values["steps"] = steps
            train_values.update(overrides)
            model_config = model_config_from_dict(meta["model_config"])
            train_config = TrainConfig(**train_values)
        except (KeyError, ValueError, TypeError) as error:
            raise CheckpointError(f"checkpoint {path} does not describe a training run this code can "
                                  f"resume ({error})") from None
        check_task(path, model_config, cls.TASK)
        trainer = cls(model_config, train_config, out_dir or os.path.dirname(os.path.abspath(path)))
        try:
            trainer.model.load_state_dict(model_state)
            trainer.flat_params.gather()            # the loaded values back into the flat array
            trainer.optimizer.load_state_dict(optimizer_state)
            trainer.schedule.load_state_dict(meta["schedule"])
            trainer.stopper.load_state_dict(meta.get("stopper", {}))
            trainer.step = int(meta["step"])
            trainer.elapsed = float(meta.get("elapsed", 0.0))
            trainer.history = list(meta.get("history", []))
            minigrad.set_rng_state(meta["minigrad_rng"])
            trainer.data_rng.bit_generator.state = meta["data_rng"]
        except (KeyError, ValueError, TypeError, AttributeError) as error:
            raise CheckpointError(f"checkpoint {path} does not describe a training run this code can "
                                  f"resume ({error})") from None
        trainer.resumed_from = os.fspath(path)
        return trainer


class _Unwritten(contextlib.nullcontext):
    """The log of a process that does not write the run's files (every rank of an MPI job but 0)."""

    def write(self, record: dict):
        pass
