"""The Tensor class, for the engine modules that ``tensor.py`` itself stands on.

Why this holder: ``tensor.py`` sits at the top of the engine's core (its methods call
the ops, its ``backward`` calls ``autograd``), and the modules below it still make and
recognise tensors (``Function.apply`` wraps each op's output in one). Importing
``tensor.py`` from below would close a circle, so they read the class here instead;
``tensor.py`` registers it right after defining it, before anything can run an op.
"""
import numpy as np

Tensor = None       # set once by tensor.py: register(Tensor)


def register(tensor_class):
    global Tensor
    Tensor = tensor_class


def as_tensor(x):
    """``x`` if it is a Tensor, else a new constant Tensor of it."""
    return x if isinstance(x, Tensor) else Tensor(x)


def operand_like(x, reference):
    """A constant operand for an op with the Tensor ``reference``: Python numbers take its dtype."""
    if isinstance(x, Tensor):
        return x
    if isinstance(x, (int, float, bool)) and reference.data.dtype.kind == "f":
        return Tensor._from_op(np.asarray(x, dtype=reference.dtype), None)
    return Tensor(x)


def constant(array):
    """A Tensor of ``array`` as it is (no conversion) that records nothing: zeros, bases, seeds."""
    return Tensor._from_op(array, None)
