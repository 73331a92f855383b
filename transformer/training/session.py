"""The bookkeeping around the steps of one training session, one small piece per concern.

``Trainer.run`` (trainer.py) reads as the steps of training; what happens around each
step lives here:

    TrainingClock      training seconds (a resumed run continues its clock), step times
    TrainingLog        the JSON-lines log, one record per step (cut back on resume)
    ProgressBar        the tqdm bar, and where messages go while it is shown
    CheckpointCadence  when to save, and the save before stopping on Ctrl-C
    step_profile       one step inside ``minigrad.profile()``, its table printed

The attention snapshots (``--snapshot-every``) are an observer of the same kind, in
``snapshots.AttentionSnapshots``.

The thread policy is ``transformer.parallel.threads.TrainingThreads``, the interrupt
``transformer.parallel.interrupt.GracefulInterrupt``, the evaluation cadence and stopping rule
``Trainer._evaluation_due`` and ``stopping.TargetStop``.
"""
import contextlib
import json
import os
import time

import numpy as np

import minigrad

from transformer.files.run_dir import LOG_NAME, cut_log


class TrainingInterrupted(KeyboardInterrupt):
    """Raised by ``Trainer.run`` after it saved the last completed step (Ctrl-C, SIGTERM)."""

    def __init__(self, step: int, checkpoint: str):
        super().__init__(f"interrupted at step {step}; checkpoint saved to {checkpoint}")
        self.step, self.checkpoint = step, checkpoint


class TrainingClock:
    """Seconds of training: those before this session (a resumed run continues them) plus this one's."""

    def __init__(self, before: float = 0.0):
        self.before = before
        self.start = time.perf_counter()
        self.step_times = []

    def step_took(self, seconds: float) -> float:
        self.step_times.append(seconds)
        return seconds

    def seconds(self) -> float:
        return self.before + self.wall_seconds()

    def wall_seconds(self) -> float:
        return time.perf_counter() - self.start

    def median_step_ms(self):
        return 1e3 * float(np.median(self.step_times)) if self.step_times else None


class TrainingLog:
    """The run's log: one JSON record per step, flushed at once (a crash loses nothing).

    A resumed run (``step`` > 0) first cuts the log back to exactly the steps its checkpoint
    holds: from the checkpoint's own folder when it resumes into another one.
    """

    def __init__(self, path: str, step: int = 0, resumed_from: str = None):
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        if step:
            source = os.path.join(os.path.dirname(os.path.abspath(resumed_from)), LOG_NAME) \
                if resumed_from else path
            cut_log(source, path, step)
        self.file = open(path, "a" if step else "w")

    def write(self, record: dict):
        self.file.write(json.dumps(record) + "\n")
        self.file.flush()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.file.close()


class ProgressBar:
    """The training progress bar (loss, learning rate, tokens/s). It starts after the first
    step, so its rate and ETA do not count kernel compilation; until then messages are printed."""

    def __init__(self, total_steps: int, enabled: bool = True):
        self.total_steps, self.enabled = total_steps, enabled
        self.bar = None

    def write(self, message: str):
        (self.bar.write if self.bar is not None else print)(message)

    def step_done(self, step: int, record: dict):
        if self.bar is None:
            # plain tqdm, not tqdm.auto: in a Jupyter kernel without ipywidgets, tqdm.auto's import
            # prints a TqdmWarning (with the machine's site-packages path) into the notebook
            from tqdm import tqdm
            self.bar = tqdm(total=self.total_steps, initial=step, disable=not self.enabled, desc="training",
                            unit="step", mininterval=0.5)
        else:
            self.bar.update(1)
        self.bar.set_postfix(loss=f"{record['loss']:.4f}", lr=f"{record['lr']:.2e}",
                             tok_s=f"{record['tokens_per_s']:.0f}", refresh=False)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.bar is not None:
            self.bar.close()


class CheckpointCadence:
    """Save every ``checkpoint_every`` steps, at the last step and when the run stops; on
    Ctrl-C, save the last completed step unless it is saved already."""

    def __init__(self, trainer, path: str):
        self.trainer, self.path = trainer, path
        self.saved_step = None

    def due(self, stop: bool) -> bool:
        step, config = self.trainer.step, self.trainer.config
        return bool(config.checkpoint_every and step % config.checkpoint_every == 0 or step == config.steps
                    or stop)

    def after_step(self, seconds: float, stop: bool):
        if self.due(stop):
            self.save(seconds)

    def save(self, seconds: float):
        self.trainer.save(self.path, seconds)
        self.saved_step = self.trainer.step

    def interrupted(self, seconds: float) -> TrainingInterrupted:
        """Save the last completed step (if not saved yet); the exception that ends the run."""
        if self.saved_step != self.trainer.step:
            self.save(seconds)
        return TrainingInterrupted(self.trainer.step, self.path)


def profiler_available() -> bool:
    return hasattr(minigrad, "profile")


@contextlib.contextmanager
def step_profile(enabled: bool, write=print):
    """Run the block inside ``minigrad.profile()`` when ``enabled``, then write its table."""
    if not enabled:
        yield None
        return
    with minigrad.profile() as prof:
        yield prof
    write(prof.table())
