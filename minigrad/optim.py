"""Optimizers (SGD, Adam), learning-rate schedules and gradient-norm clipping.

Each optimizer updates ``param.data`` in place from ``param.grad`` and can save
and restore its state (``state_dict`` / ``load_state_dict``) as plain numpy
arrays and numbers, so a checkpoint needs no pickle.

Every constructor refuses a hyper-parameter that cannot train in one line
naming it (a NaN, infinite or negative learning rate, betas outside [0, 1),
a negative eps, weight decay or momentum, a non-integer step count), as
PyTorch's optimizers do ("Invalid learning rate: ..."); a NaN would otherwise
slip through every ``<`` comparison and train to NaN without a word.
"""
import math
import numbers

import numpy as np

from . import inplace
from .accelerated import accelerated
from .flat import FlatParameters
from .profiler import profiled


def check_number(owner: str, name: str, value, low: float = 0.0, below: float = None) -> float:
    """``value`` as a float if it is a finite real number >= ``low`` (and < ``below``), else one
    ValueError naming ``owner``, the hyper-parameter and the allowed range."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value) \
            or value < low or (below is not None and value >= below):
        allowed = f"in [{low:g}, {below:g})" if below is not None else f">= {low:g}"
        raise ValueError(f"{owner}: invalid {name} {value!r}; it must be a finite number {allowed}")
    return float(value)


def check_count(owner: str, name: str, value, low: int = 0) -> int:
    """``value`` as an int if it is an integer >= ``low`` (a number of steps), else one ValueError."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < low:
        raise ValueError(f"{owner}: invalid {name} {value!r}; it must be an integer >= {low}")
    return int(value)


@accelerated
def adam_update(param, grad, m, v, beta1, beta2, step_size, eps_hat, weight_decay):
    """Adam's update of one parameter, in place: m, v <- moving averages of grad and grad²;
    param -= step_size * m / (sqrt(v) + eps_hat). ``step_size`` and ``eps_hat`` already hold
    the bias corrections. (``kernels/adam_kernel.py``: the same in one pass, no temporaries.)"""
    if weight_decay:
        grad = grad + weight_decay * param
    m *= beta1
    m += (1 - beta1) * grad
    v *= beta2
    v += (1 - beta2) * grad * grad
    param -= step_size * m / (np.sqrt(v) + eps_hat)


class Optimizer:
    """``params``: a list of Tensors, or a ``FlatParameters`` (``minigrad/flat.py``), whose parameters
    an optimizer may update in one call over the flat arrays (Adam does)."""

    def __init__(self, params, lr: float):
        self.flat = params if isinstance(params, FlatParameters) else None
        self.params = list(params)
        if not self.params:
            raise ValueError(f"{type(self).__name__} got an empty parameter list")
        self.lr = check_number(type(self).__name__, "learning rate", lr)
        self.step_count = 0

    def zero_grad(self):
        for p in self.params:
            p.grad = None

    @profiled("optimizer.step")
    def step(self):
        self.step_count += 1
        self.begin_step()
        updated = [i for i, p in enumerate(self.params) if p.grad is not None]
        self.update_all(updated)
        # the weights changed in place: a graph that saved one raises in backward (PyTorch does too)
        inplace.mark_changed([self.params[i] for i in updated])

    def begin_step(self):
        """Per-step work shared by all parameters (after step_count is advanced)."""

    def update_all(self, indices):
        """Update the parameters ``self.params[i]`` for i in ``indices`` (those with a gradient)."""
        for i in indices:
            self.update(i, self.params[i], self.params[i].grad)

    def update(self, i, param, grad):
        raise NotImplementedError

    # Per-parameter buffers are kept in lists indexed like self.params.
    buffer_names = ()

    def state_dict(self) -> dict:
        state = {"lr": self.lr, "step_count": self.step_count}
        for name in self.buffer_names:
            for i, buf in enumerate(getattr(self, name)):
                if buf is not None:
                    state[f"{name}.{i}"] = buf.copy()
        return state

    def load_state_dict(self, state: dict):
        self.lr = float(state["lr"])
        self.step_count = int(state["step_count"])
        for name in self.buffer_names:
            buffers = getattr(self, name)
            for i, p in enumerate(self.params):
                key = f"{name}.{i}"
                if key in state:
                    value = np.asarray(state[key])
                    if value.shape != p.shape:
                        raise ValueError(f"optimizer state {key} has shape {value.shape} but parameter {i} "
                                         f"has shape {p.shape}: the checkpoint is from another model")
                    buffers[i] = value.astype(p.dtype)
                else:
                    buffers[i] = None
        return self


class SGD(Optimizer):
    """p -= lr * (grad [+ momentum * velocity])."""

    buffer_names = ("velocity",)

    def __init__(self, params, lr: float, momentum: float = 0.0, weight_decay: float = 0.0):
        super().__init__(params, lr)
        self.momentum = check_number("SGD", "momentum", momentum)
        self.weight_decay = check_number("SGD", "weight_decay", weight_decay)
        self.velocity = [None] * len(self.params)

    def update(self, i, p, grad):
        if self.weight_decay:
            grad = grad + self.weight_decay * p.data
        if self.momentum:
            v = self.velocity[i]
            self.velocity[i] = v = grad.copy() if v is None else self.momentum * v + grad
            grad = v
        p.data -= (self.lr * grad).astype(p.dtype, copy=False)


class Adam(Optimizer):
    """Adam (Kingma & Ba) as in ``torch.optim.Adam``; ``weight_decay`` adds L2 to the gradient."""

    buffer_names = ("m", "v")

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0):
        super().__init__(params, lr)
        if not isinstance(betas, (tuple, list)) or len(betas) != 2:
            raise ValueError(f"Adam: invalid betas {betas!r}; give two numbers in [0, 1), e.g. (0.9, 0.999)")
        self.betas = tuple(check_number("Adam", f"beta at index {k}", b, below=1.0) for k, b in enumerate(betas))
        self.eps = check_number("Adam", "eps", eps)
        self.weight_decay = check_number("Adam", "weight_decay", weight_decay)
        self.m = [None] * len(self.params)
        self.v = [None] * len(self.params)
        self._flat_m = self._flat_v = None     # m and v as flat arrays, once a FlatParameters step ran

    def begin_step(self):
        b1, b2 = self.betas
        # bias corrections folded into the step size (as PyTorch does)
        self._step_size = self.lr * math.sqrt(1 - b2 ** self.step_count) / (1 - b1 ** self.step_count)
        self._eps_hat = self.eps * math.sqrt(1 - b2 ** self.step_count)

    def update_all(self, todo):
        """``adam_update`` of each parameter; of all in one call when they are a ``FlatParameters``
        still laid out flat (the same numbers: the update is elementwise)."""
        b1, b2 = self.betas
        if self.flat is not None and len(todo) == len(self.params) and self.flat.intact():
            m, v = self._flat_moments()
            adam_update(self.flat.values, self.flat.grads, m, v, b1, b2, self._step_size, self._eps_hat,
                        self.weight_decay)
            return
        for i in todo:
            if self.m[i] is None:
                self.m[i] = np.zeros_like(self.params[i].data)
                self.v[i] = np.zeros_like(self.params[i].data)
            adam_update(self.params[i].data, self.params[i].grad, self.m[i], self.v[i], b1, b2,
                        self._step_size, self._eps_hat, self.weight_decay)

    def _flat_moments(self):
        """m and v as flat arrays laid out like the parameters, ``self.m[i]`` and ``self.v[i]`` their
        views; a moment not yet there (zeros) or loaded from a checkpoint is copied in."""
        if self._flat_m is None:
            self._flat_m, self._flat_v = self.flat.new_array(), self.flat.new_array()
            self._m_views, self._v_views = self.flat.views(self._flat_m), self.flat.views(self._flat_v)
        for moments, views in ((self.m, self._m_views), (self.v, self._v_views)):
            for i, view in enumerate(views):
                if moments[i] is not view:
                    view[...] = 0 if moments[i] is None else moments[i]
                    moments[i] = view
        return self._flat_m, self._flat_v

    def state_dict(self):
        return {**super().state_dict(), "betas": list(self.betas), "eps": self.eps,
                "weight_decay": self.weight_decay}

    def load_state_dict(self, state):
        super().load_state_dict(state)
        self.betas = tuple(float(b) for b in state.get("betas", self.betas))
        self.eps = float(state.get("eps", self.eps))
        self.weight_decay = float(state.get("weight_decay", self.weight_decay))
        return self


@profiled("clip_grad_norm")
def clip_grad_norm(params, max_norm: float) -> float:
    """Scale all gradients so their joint L2 norm is at most ``max_norm``; returns the norm before."""
    grads = [p.grad for p in params if p.grad is not None]
    total = math.sqrt(sum(float(np.vdot(g, g)) for g in grads))
    if total > max_norm > 0:
        scale = max_norm / (total + 1e-6)
        for g in grads:
            g *= g.dtype.type(scale)
    return total


class LRSchedule:
    """Sets ``optimizer.lr`` from the step number: call ``step()`` once per optimizer step."""

    def __init__(self, optimizer: Optimizer, base_lr: float):
        self.base_lr = check_number(type(self).__name__, "base learning rate", base_lr)
        self.optimizer, self.last_step = optimizer, 0
        self.optimizer.lr = self.lr_at(1)

    def lr_at(self, step: int) -> float:
        raise NotImplementedError

    def step(self):
        self.last_step += 1
        self.optimizer.lr = self.lr_at(self.last_step + 1)
        return self.optimizer.lr

    def state_dict(self):
        return {"last_step": self.last_step}

    def load_state_dict(self, state):
        self.last_step = int(state["last_step"])
        self.optimizer.lr = self.lr_at(self.last_step + 1)


class WarmupInverseSqrt(LRSchedule):
    """Linear warm-up to ``base_lr`` over ``warmup`` steps, then base_lr * sqrt(warmup / step)
    (the paper's schedule, with the peak given directly instead of via d_model)."""

    def __init__(self, optimizer, base_lr: float, warmup: int):
        self.warmup = max(1, check_count(type(self).__name__, "warmup", warmup))
        super().__init__(optimizer, base_lr)

    def lr_at(self, step):
        return self.base_lr * min(step / self.warmup, math.sqrt(self.warmup / step))


class WarmupConstant(LRSchedule):
    """Linear warm-up to ``base_lr``, then constant."""

    def __init__(self, optimizer, base_lr: float, warmup: int):
        self.warmup = max(1, check_count(type(self).__name__, "warmup", warmup))
        super().__init__(optimizer, base_lr)

    def lr_at(self, step):
        return self.base_lr * min(1.0, step / self.warmup)


class WarmupCosine(LRSchedule):
    """Linear warm-up to ``base_lr``, then cosine decay to ``min_lr`` at ``total_steps``.

    A decaying rate keeps late training stable: with a constant rate the date
    model's accuracy can fall back after first reaching 99.9%.
    """

    def __init__(self, optimizer, base_lr: float, warmup: int, total_steps: int, min_lr: float = 0.0):
        self.warmup = max(1, check_count("WarmupCosine", "warmup", warmup))
        self.total_steps = check_count("WarmupCosine", "total_steps", total_steps, low=1)
        self.min_lr = check_number("WarmupCosine", "min_lr", min_lr)
        super().__init__(optimizer, base_lr)

    def lr_at(self, step):
        if step <= self.warmup:
            return self.base_lr * step / self.warmup
        progress = min(1.0, (step - self.warmup) / max(1, self.total_steps - self.warmup))
        return self.min_lr + 0.5 * (self.base_lr - self.min_lr) * (1 + math.cos(math.pi * progress))


class WarmupPlateauCooldown(LRSchedule):
    """Linear warm-up to ``base_lr``, then ``base_lr`` until ``start_cooldown()`` is called,
    then a cosine decay to ``min_lr`` over ``cooldown`` steps, and ``min_lr`` after that.

    Made for runs that stop when the model is done: the trainer calls ``start_cooldown()``
    when the model is nearly done (its training batches are 98% right), and the cool-down
    settles the model before a held-out check confirms the target. A run that never reaches it still
    ends settled: the cool-down starts at ``total_steps - cooldown`` at the latest. (This is
    the "warmup-stable-decay" shape; PyTorch has no such class, SequentialLR comes closest.)
    """

    def __init__(self, optimizer, base_lr: float, warmup: int, cooldown: int, total_steps: int,
                 min_lr: float = 0.0):
        owner = "WarmupPlateauCooldown"
        self.warmup = max(1, check_count(owner, "warmup", warmup))
        self.cooldown = check_count(owner, "cooldown", cooldown, low=1)
        self.total_steps = check_count(owner, "total_steps", total_steps, low=1)
        self.min_lr = check_number(owner, "min_lr", min_lr)
        self.cooldown_start = None        # the step after which the decay began (None: not yet)
        super().__init__(optimizer, base_lr)

    def start_cooldown(self):
        """Begin the decay after the step just taken (no effect once it has begun)."""
        if self.cooldown_start is None and self.last_step < self.decay_start():
            self.cooldown_start = self.last_step
        self.optimizer.lr = self.lr_at(self.last_step + 1)

    def decay_start(self) -> int:
        latest = max(0, self.total_steps - self.cooldown)
        return latest if self.cooldown_start is None else min(self.cooldown_start, latest)

    def lr_at(self, step):
        start = self.decay_start()
        if step <= start:
            return self.base_lr * min(1.0, step / self.warmup)
        # decay from the rate in force when it began (it may begin during the warm-up)
        peak = self.base_lr * min(1.0, max(start, 1) / self.warmup)
        progress = min(1.0, (step - start) / self.cooldown)
        return self.min_lr + 0.5 * (peak - self.min_lr) * (1 + math.cos(math.pi * progress))

    def state_dict(self):
        return {**super().state_dict(), "cooldown_start": self.cooldown_start}

    def load_state_dict(self, state):
        start = state.get("cooldown_start")
        self.cooldown_start = None if start is None else int(start)
        super().load_state_dict(state)


