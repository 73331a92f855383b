"""Training the date model: teacher forcing, Adam with warm-up, checkpoints, resume.

One step: sample a batch of training days, feed ``<sos> + target`` to the
decoder, score its predictions of ``target + <eos>`` with cross-entropy that
ignores ``<pad>``, backpropagate, clip the gradient norm, take an Adam step and
advance the learning-rate schedule.

Everything random (initial weights, dropout, batches) comes from generators
seeded by ``TrainConfig.seed`` whose states go into every checkpoint, so a run
resumed from a checkpoint continues exactly as the uninterrupted run would.
"""
import json
import os
import time
from dataclasses import asdict, dataclass

import numpy as np

import minigrad
from minigrad import functional as F
from minigrad import optim
from minigrad.threads import TrainingThreads

from .checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from .config import ModelConfig
from .dates import PAD, DateDataset
from .evaluation import evaluate
from .model import Transformer

SCHEDULES = ("cosine", "inverse_sqrt", "constant")


@dataclass
class TrainConfig:
    steps: int = 600              # optimizer steps in the whole run
    batch_size: int = 128
    lr: float = 1e-3              # peak learning rate, reached at the end of warm-up
    warmup: int = 100             # linear warm-up steps
    schedule: str = "cosine"      # decay after warm-up: cosine (to 0 at `steps`), inverse_sqrt, constant
    betas: tuple = (0.9, 0.98)    # Adam, as in the paper
    eps: float = 1e-9
    clip: float = 1.0             # max global gradient norm (0 = no clipping)
    label_smoothing: float = 0.0
    seed: int = 0
    eval_every: int = 100         # held-out exact match every this many steps (0 = only at the end)
    checkpoint_every: int = 100   # save every this many steps (0 = only at the end)

    def __post_init__(self):
        self.betas = tuple(self.betas)
        if self.schedule not in SCHEDULES:
            raise ValueError(f"schedule must be one of {', '.join(SCHEDULES)}, got {self.schedule!r}")
        for name in ("steps", "batch_size", "warmup"):
            if getattr(self, name) < (0 if name == "warmup" else 1):
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if not 0.0 <= self.label_smoothing <= 1.0:
            raise ValueError(f"label_smoothing must be in [0, 1], got {self.label_smoothing}")
        if self.clip < 0:
            raise ValueError(f"clip must be >= 0 (0 = no clipping), got {self.clip}")


class Trainer:
    """Holds the model, optimizer, schedule, data and RNGs of one training run."""

    def __init__(self, model_config: ModelConfig = None, train_config: TrainConfig = None, out_dir="runs/dates"):
        self.model_config = model_config or ModelConfig()
        self.config = train_config or TrainConfig()
        self.out_dir = out_dir
        minigrad.manual_seed(self.config.seed)
        self.model = Transformer(self.model_config)
        self.optimizer = optim.Adam(self.model.parameters(), lr=self.config.lr, betas=self.config.betas,
                                    eps=self.config.eps)
        self.schedule = self._make_schedule()
        self.data = DateDataset()
        self.data_rng = np.random.default_rng(self.config.seed)
        self.step = 0
        self.history = []          # eval records: {"step", "exact_match", "char_accuracy", ...}

    def _make_schedule(self):
        c = self.config
        if c.schedule == "cosine":
            return optim.WarmupCosine(self.optimizer, c.lr, c.warmup, c.steps)
        if c.schedule == "inverse_sqrt":
            return optim.WarmupInverseSqrt(self.optimizer, c.lr, c.warmup)
        return optim.WarmupConstant(self.optimizer, c.lr, c.warmup)

    # ----------------------------------------------------------------- steps
    def train_step(self) -> dict:
        src, tgt = self.data.sample_batch(self.data_rng, self.config.batch_size)
        lr = self.optimizer.lr
        logits = self.model(src, tgt[:, :-1])
        loss = F.cross_entropy(logits, tgt[:, 1:], ignore_index=PAD, label_smoothing=self.config.label_smoothing)
        self.optimizer.zero_grad()
        loss.backward()
        grad_norm = optim.clip_grad_norm(self.optimizer.params, self.config.clip) if self.config.clip else None
        self.optimizer.step()
        self.schedule.step()
        self.step += 1
        return {"step": self.step, "loss": loss.item(), "lr": lr, "grad_norm": grad_norm,
                "tokens": int((tgt[:, 1:] != PAD).sum())}

    def evaluate(self, limit: int = None, show_wrong: int = 5) -> dict:
        src, tgt = self.data.test_src, self.data.test_tgt
        if limit:
            src, tgt = src[:limit], tgt[:limit]
        return evaluate(self.model, src, tgt, show_wrong=show_wrong)

    # ------------------------------------------------------------------- run
    def run(self, progress: bool = True, log_path: str = None, checkpoint_path: str = None) -> dict:
        """Train up to ``config.steps``; returns a summary (final accuracy, steps, wall time)."""
        from tqdm.auto import tqdm

        log_path = log_path or os.path.join(self.out_dir, "train_log.jsonl")
        checkpoint_path = checkpoint_path or os.path.join(self.out_dir, "model.npz")
        os.makedirs(os.path.dirname(os.path.abspath(log_path)), exist_ok=True)
        c = self.config
        start = time.perf_counter()
        step_times = []
        blas_threads = TrainingThreads()   # BLAS threads per step, chosen by timing (minigrad/threads.py)
        log_mode = "a" if self.step else "w"
        with open(log_path, log_mode) as log, tqdm(total=c.steps, initial=self.step, disable=not progress,
                                                   desc="training", unit="step", mininterval=0.5) as bar:
            while self.step < c.steps:
                t0 = time.perf_counter()
                with blas_threads.step():
                    record = self.train_step()
                seconds = time.perf_counter() - t0
                step_times.append(seconds)
                record.update(seconds=round(seconds, 5), tokens_per_s=round(record["tokens"] / seconds, 1),
                              elapsed=round(time.perf_counter() - start, 3))
                if c.eval_every and self.step % c.eval_every == 0 or self.step == c.steps:
                    result = self.evaluate(show_wrong=0)
                    record.update(exact_match=result["exact_match"], char_accuracy=result["char_accuracy"])
                    self.history.append({"step": self.step, "exact_match": result["exact_match"],
                                         "char_accuracy": result["char_accuracy"], "loss": record["loss"]})
                    bar.write(f"step {self.step:5d}  loss {record['loss']:.4f}  "
                              f"held-out exact match {result['exact_match']:.2%}")
                log.write(json.dumps(record) + "\n")
                log.flush()
                if c.checkpoint_every and self.step % c.checkpoint_every == 0 or self.step == c.steps:
                    self.save(checkpoint_path)
                bar.set_postfix(loss=f"{record['loss']:.4f}", lr=f"{record['lr']:.2e}",
                                tok_s=f"{record['tokens_per_s']:.0f}", refresh=False)
                bar.update(1)
        final = self.history[-1] if self.history else {}
        return {"steps": self.step, "wall_seconds": time.perf_counter() - start,
                "median_step_ms": 1e3 * float(np.median(step_times)) if step_times else None,
                "exact_match": final.get("exact_match"), "char_accuracy": final.get("char_accuracy"),
                "checkpoint": checkpoint_path, "log": log_path}

    # ----------------------------------------------------------- checkpoints
    def save(self, path: str):
        meta = {
            "model_config": self.model_config.to_dict(),
            "train_config": asdict(self.config),
            "step": self.step,
            "schedule": self.schedule.state_dict(),
            "minigrad_rng": minigrad.get_rng_state(),
            "data_rng": self.data_rng.bit_generator.state,
            "history": self.history,
        }
        save_checkpoint(path, self.model.state_dict(), self.optimizer.state_dict(), meta)

    @classmethod
    def resume(cls, path: str, out_dir: str = None, steps: int = None) -> "Trainer":
        """Rebuild a run from its checkpoint; ``steps`` may extend the total."""
        model_state, optimizer_state, meta = load_checkpoint(path)
        try:
            train_values = dict(meta["train_config"])
            if steps is not None:
                train_values["steps"] = steps
            trainer = cls(ModelConfig.from_dict(meta["model_config"]), TrainConfig(**train_values),
                          out_dir or os.path.dirname(os.path.abspath(path)))
            trainer.model.load_state_dict(model_state)
            trainer.optimizer.load_state_dict(optimizer_state)
            trainer.schedule.load_state_dict(meta["schedule"])
            trainer.step = int(meta["step"])
            trainer.history = list(meta.get("history", []))
            minigrad.set_rng_state(meta["minigrad_rng"])
            trainer.data_rng.bit_generator.state = meta["data_rng"]
        except (KeyError, ValueError, TypeError) as error:
            raise CheckpointError(f"checkpoint {path} does not describe a training run this code can "
                                  f"resume ({error})") from None
        return trainer


def load_model(path: str) -> Transformer:
    """The trained model in a checkpoint, ready for decoding."""
    model_state, _, meta = load_checkpoint(path)
    try:
        model = Transformer(ModelConfig.from_dict(meta["model_config"]))
        model.load_state_dict(model_state)
    except (KeyError, ValueError, TypeError) as error:
        raise CheckpointError(f"checkpoint {path} does not fit the model it describes ({error})") from None
    return model.eval()
