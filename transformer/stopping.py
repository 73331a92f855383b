"""When to evaluate on the held-out dates, and when the model is done.

A held-out evaluation decodes 2,000 dates (about a second, ten training steps), so the
trainer does not run one on a fixed short cadence. Instead every training batch gives a
free estimate: the batch's teacher-forced exact match (``training.teacher_forced_exact_match``),
which equals what greedy decoding would score on that batch. When the last ``window``
batches together score at least the target, a held-out evaluation is worth running.

The rule that stops training:
  1. a held-out evaluation reaches the target at step S: the trainer starts the learning
     rate's cool-down (``WarmupPlateauCooldown.start_cooldown``);
  2. the evaluation at step S + ``confirm_steps`` (the end of the cool-down, the settled
     model) must be at the target too: it confirms it, and training stops there.
A lucky evaluation at the peak learning rate therefore never ends a run. If the
confirmation falls short, the search starts again (at the cool-down's low final rate).
Evaluations inside the window (the regular ``eval_every`` ones) are only logged: the model
is still moving there.
"""


class TargetStop:
    def __init__(self, target: float, confirm_steps: int, window: int = 4, min_gap: int = 10):
        self.target = target                  # 0 disables stopping (train all steps)
        self.confirm_steps = confirm_steps
        self.window = window                  # batches in the free estimate
        self.min_gap = min_gap                # steps between estimate-triggered evaluations
        self.recent = []                      # last `window` batch exact matches
        self.reached_step = None              # step of the first evaluation at the target
        self.reached_seconds = None           # training seconds at that step
        self.last_eval_step = 0

    @property
    def enabled(self) -> bool:
        return self.target > 0

    def confirmed(self, step: int) -> bool:
        """Has the target been confirmed by ``step`` (a finished run that is resumed)?"""
        return (self.enabled and self.reached_step is not None and self.last_eval_step == step
                and step >= self.reached_step + self.confirm_steps)

    def record_batch(self, exact_match: float):
        self.recent = (self.recent + [exact_match])[-self.window:]

    def evaluation_due(self, step: int) -> bool:
        """Is a held-out evaluation worth running after this step (for stopping)?"""
        if not self.enabled:
            return False
        if self.reached_step is not None:
            return step >= self.reached_step + self.confirm_steps
        estimate_ready = len(self.recent) == self.window and sum(self.recent) / self.window >= self.target
        return estimate_ready and step - self.last_eval_step >= self.min_gap

    def record_evaluation(self, step: int, exact_match: float, seconds: float) -> str:
        """-> "reached" (start the cool-down), "confirmed" (stop), "missed" (search again) or ""."""
        self.last_eval_step = step
        if not self.enabled:
            return ""
        if self.reached_step is not None and step < self.reached_step + self.confirm_steps:
            return ""
        if exact_match < self.target:
            missed = self.reached_step is not None
            self.reached_step = self.reached_seconds = None
            return "missed" if missed else ""
        if self.reached_step is None:
            self.reached_step, self.reached_seconds = step, seconds
            return "confirmed" if self.confirm_steps == 0 else "reached"
        return "confirmed" if step >= self.reached_step + self.confirm_steps else ""

    def state_dict(self) -> dict:
        return {"recent": list(self.recent), "reached_step": self.reached_step,
                "reached_seconds": self.reached_seconds, "last_eval_step": self.last_eval_step}

    def load_state_dict(self, state: dict):
        self.recent = [float(x) for x in state.get("recent", [])]
        self.reached_step = state.get("reached_step")
        self.reached_seconds = state.get("reached_seconds")
        self.last_eval_step = int(state.get("last_eval_step", 0))
