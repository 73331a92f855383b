"""Layers: Module, Parameter, Linear, LayerNorm, Dropout, Embedding, ModuleList.

A Module finds its parameters and sub-modules by looking at its attributes, in
the order they were assigned, so ``named_parameters()`` gives stable dotted
names such as ``encoder.layers.0.self_attn.w_qkv.weight``.

Initialisation follows PyTorch:
  Linear     weight and bias ~ U(-1/sqrt(in_features), 1/sqrt(in_features))
             (what PyTorch's kaiming_uniform_(a=sqrt(5)) works out to)
  Embedding  weight ~ N(0, 1)
  LayerNorm  weight = 1, bias = 0
Draws come from ``minigrad.rng``; ``minigrad.manual_seed`` makes them repeatable.
"""
import contextlib
from collections import OrderedDict

import numpy as np

from . import functional as F
from . import rng
from .observers import Observer, observing
from .tensor import Tensor


# Names of the modules running now (innermost last), while ``record_scopes(model)`` is active.
scope_stack = []


class _ScopeRecorder(Observer):
    """Watches the engine (``observers.py``): each recorded op gets the running module's name."""

    def recorded(self, fn):
        if scope_stack:
            fn.scope = scope_stack[-1]


class Parameter(Tensor):
    """A tensor that a Module owns and an optimizer updates (always requires grad).

    Parameters are float32 unless asked otherwise (``Module.to(np.float64)`` for gradcheck).
    """

    def __init__(self, data, dtype=np.float32):
        super().__init__(data.data if isinstance(data, Tensor) else data, requires_grad=True, dtype=dtype)


class Module:
    training = True

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} has no forward()")

    def __call__(self, *args, **kwargs):
        scope = self.__dict__.get("_scope_name")
        if scope is None:
            return self.forward(*args, **kwargs)
        scope_stack.append(scope)
        try:
            return self.forward(*args, **kwargs)
        finally:
            scope_stack.pop()

    # ------------------------------------------------------------- traversal
    def named_children(self):
        for name, value in vars(self).items():
            if isinstance(value, Module):
                yield name, value

    def named_modules(self, prefix=""):
        yield prefix, self
        for name, child in self.named_children():
            yield from child.named_modules(f"{prefix}.{name}" if prefix else name)

    def named_parameters(self, prefix=""):
        """(dotted name, Parameter) pairs, each parameter once."""
        seen = set()
        for module_name, module in self.named_modules(prefix):
            for name, value in vars(module).items():
                if isinstance(value, Parameter) and id(value) not in seen:
                    seen.add(id(value))
                    yield (f"{module_name}.{name}" if module_name else name), value

    def parameters(self):
        return [p for _, p in self.named_parameters()]

    def num_parameters(self) -> int:
        return sum(p.size for p in self.parameters())

    # ---------------------------------------------------------------- modes
    def train(self, mode: bool = True):
        for _, module in self.named_modules():
            module.training = mode
        return self

    def eval(self):
        return self.train(False)

    def zero_grad(self):
        for p in self.parameters():
            p.grad = None

    def to(self, dtype):
        """Convert every parameter to ``dtype`` in place (e.g. np.float64 for gradcheck)."""
        for p in self.parameters():
            p.data = p.data.astype(dtype)
            p.grad = None
        return self

    def double(self):
        return self.to(np.float64)

    # ---------------------------------------------------------------- state
    def state_dict(self) -> "OrderedDict[str, np.ndarray]":
        return OrderedDict((name, p.data.copy()) for name, p in self.named_parameters())

    def load_state_dict(self, state, strict: bool = True):
        """Copy arrays into the parameters, checking names and shapes first."""
        own = dict(self.named_parameters())
        missing = [name for name in own if name not in state]
        unexpected = [name for name in state if name not in own]
        if strict and (missing or unexpected):
            parts = []
            if missing:
                parts.append(f"missing: {', '.join(missing)}")
            if unexpected:
                parts.append(f"unexpected: {', '.join(unexpected)}")
            raise KeyError(f"load_state_dict for {type(self).__name__}: " + "; ".join(parts))
        for name, p in own.items():
            if name not in state:
                continue
            value = np.asarray(state[name])
            if value.shape != p.shape:
                raise ValueError(f"load_state_dict: parameter {name} has shape {p.shape} but the "
                                 f"state holds shape {value.shape}")
        for name, p in own.items():
            if name in state:
                p.data = np.array(state[name], dtype=p.dtype)
        return self

    def extra_repr(self) -> str:
        return ""

    def __repr__(self):
        children = [f"  ({name}): " + repr(child).replace("\n", "\n  ") for name, child in self.named_children()]
        head = f"{type(self).__name__}({self.extra_repr()}"
        return head + ("\n" + "\n".join(children) + "\n)" if children else ")")


@contextlib.contextmanager
def record_scopes(model: Module, prefix: str = ""):
    """Inside this block every op run by a sub-module of ``model`` records the
    module's dotted name in ``grad_fn.scope`` (used by ``viz.draw_graph`` clusters)."""
    modules = list(model.named_modules(prefix))
    for name, module in modules:
        module._scope_name = name or type(model).__name__
    try:
        with observing(_ScopeRecorder()):
            yield model
    finally:
        for _, module in modules:
            module.__dict__.pop("_scope_name", None)


class ModuleList(Module):
    """A list of modules whose parameters are named by index (``layers.0.…``)."""

    def __init__(self, modules=()):
        for i, module in enumerate(modules):
            setattr(self, str(i), module)

    def __len__(self):
        return sum(1 for _ in self.named_children())

    def __iter__(self):
        return (module for _, module in self.named_children())

    def __getitem__(self, i):
        return getattr(self, str(range(len(self))[i]))


class Linear(Module):
    """y = x @ weight + bias, with ``weight`` of shape (in_features, out_features)."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True):
        self.in_features, self.out_features = in_features, out_features
        bound = 1.0 / np.sqrt(in_features)
        self.weight = Parameter(rng.generator().uniform(-bound, bound, (in_features, out_features)))
        self.bias = Parameter(rng.generator().uniform(-bound, bound, out_features)) if bias else None

    def forward(self, x):
        if x.shape[-1] != self.in_features:
            raise ValueError(f"Linear({self.in_features}, {self.out_features}) expects inputs whose last "
                             f"dimension is {self.in_features}, got shape {x.shape}")
        return F.linear(x, self.weight, self.bias)

    def extra_repr(self):
        return f"{self.in_features}, {self.out_features}, bias={self.bias is not None}"


class LayerNorm(Module):
    def __init__(self, dim: int, eps: float = 1e-5):
        self.dim, self.eps = dim, eps
        self.weight = Parameter(np.ones(dim))
        self.bias = Parameter(np.zeros(dim))

    def forward(self, x):
        if x.shape[-1] != self.dim:
            raise ValueError(f"LayerNorm({self.dim}) expects inputs whose last dimension is {self.dim}, "
                             f"got shape {x.shape}")
        return F.layer_norm(x, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return f"{self.dim}, eps={self.eps}"


class Dropout(Module):
    def __init__(self, p: float = 0.1):
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"Dropout: p must be between 0 and 1, got {p}")
        self.p = p

    def forward(self, x):
        return F.dropout(x, self.p, self.training)

    def extra_repr(self):
        return f"p={self.p}"


class Embedding(Module):
    """A table of ``num`` learnable vectors of size ``dim``; ``forward(ids)`` looks rows up."""

    def __init__(self, num: int, dim: int):
        self.num, self.dim = num, dim
        self.weight = Parameter(rng.generator().standard_normal((num, dim)))

    def forward(self, ids):
        ids = np.asarray(ids.data if isinstance(ids, Tensor) else ids)
        if ids.dtype.kind not in "iu":
            raise TypeError(f"Embedding expects integer ids, got dtype {ids.dtype}")
        if ids.size and (ids.min() < 0 or ids.max() >= self.num):
            bad = ids[(ids < 0) | (ids >= self.num)].flat[0]
            raise IndexError(f"Embedding({self.num}, {self.dim}): id {bad} is out of range 0..{self.num - 1}")
        return self.weight[ids]

    def extra_repr(self):
        return f"{self.num}, {self.dim}"
