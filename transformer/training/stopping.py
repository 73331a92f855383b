"""When the model is done: start the learning rate's cool-down, then confirm on held-out dates.

A held-out evaluation decodes 2,000 dates (about a second, ten training steps), so the
trainer does not run one to find out when to cool down. Every training batch gives a free
estimate instead: the batch's teacher-forced exact match
(``training.teacher_forced_exact_match``), which equals what greedy decoding would score
on that batch. The rule (measured in docs/early_stopping.md):
  1. when the last ``window`` batches together score at least ``cooldown_at`` (98% by
     default, or the target if lower), at step S, the trainer starts the learning rate's
     cool-down (``WarmupPlateauCooldown.start_cooldown``): at the peak rate accuracy
     wobbles, so waiting there for 99.9% costs many steps, while the cool-down settles it;
  2. the held-out evaluation at step S + ``confirm_steps`` (the end of the cool-down, a
     settled model) must reach the target: training stops there.
No single evaluation at the peak learning rate can end a run. If the settled model falls
short, the search goes on at the cool-down's low final rate: the next hit needs the batch
estimate at the target itself, and the same confirmation ``confirm_steps`` later.
Regular evaluations (``eval_every``) are only logged.
"""


class TargetStop:
    def __init__(self, target: float, confirm_steps: int, cooldown_at: float = None, window: int = 4,
                 min_gap: int = 10):
        self.target = target                  # 0 disables stopping (train all steps)
        self.confirm_steps = confirm_steps
        self.hit_at = target if cooldown_at is None else min(cooldown_at, target)   # a "hit" starts a window
        self.window = window                  # batches in the free estimate
        self.min_gap = min_gap                # steps between estimate-triggered evaluations
        self.recent = []                      # last `window` batch exact matches
        self.hit_step = None                  # step of the hit whose window is running
        self.reached_step = None              # step of the first evaluation at the target
        self.reached_seconds = None           # training seconds at that step
        self.last_eval_step = 0

    @property
    def enabled(self) -> bool:
        return self.target > 0

    def confirmed(self, step: int) -> bool:
        """Has the target been confirmed by ``step`` (a finished run that is resumed)?"""
        return (self.enabled and self.hit_step is not None and self.last_eval_step == step
                and step >= self.hit_step + self.confirm_steps and self.reached_step is not None)

    def record_batch(self, step: int, exact_match: float) -> bool:
        """Add a training batch's exact match; True when the estimate starts the cool-down."""
        self.recent = (self.recent + [exact_match])[-self.window:]
        if not self.enabled or self.hit_step is not None or len(self.recent) < self.window:
            return False
        if sum(self.recent) / self.window >= self.hit_at and step - self.last_eval_step >= self.min_gap:
            self.hit_step = step
            return True
        return False

    def evaluation_due(self, step: int) -> bool:
        """Is the held-out evaluation that confirms (or not) the target due after this step?"""
        return self.enabled and self.hit_step is not None and step >= self.hit_step + self.confirm_steps

    def record_evaluation(self, step: int, exact_match: float, seconds: float) -> str:
        """-> "confirmed" (stop), "missed" (search on) or "" (logged only)."""
        self.last_eval_step = step
        if not self.enabled:
            return ""
        if exact_match < self.target:
            self.reached_step = self.reached_seconds = None
        elif self.reached_step is None:
            self.reached_step, self.reached_seconds = step, seconds
        if not self.evaluation_due(step):
            return ""
        if exact_match >= self.target:
            return "confirmed"
        self.hit_step, self.hit_at = None, self.target     # the low final rate stays: a hit now
        return "missed"                                    # must be the target itself

    def state_dict(self) -> dict:
        return {"recent": list(self.recent), "hit_step": self.hit_step, "hit_at": self.hit_at,
                "reached_step": self.reached_step,
                "reached_seconds": self.reached_seconds, "last_eval_step": self.last_eval_step}

    def load_state_dict(self, state: dict):
        self.recent = [float(x) for x in state.get("recent", [])]
        self.hit_step = state.get("hit_step")
        self.hit_at = float(state.get("hit_at", self.hit_at))
        self.reached_step = state.get("reached_step")
        self.reached_seconds = state.get("reached_seconds")
        self.last_eval_step = int(state.get("last_eval_step", 0))
