"""Hardswish forward and backward, one line each: numpy makes four passes over the array with a
temporary each (add, clip, multiply, divide), the kernel one, which LLVM vectorises. The math,
NaN and inf included: ``ops/elementwise.py``. Measured faster than numpy at the shapes below:
``measured.json`` (docs/adding-an-op.md walks through this file)."""
from ..ops import elementwise as op
from .elementwise import contiguous_floats, elementwise
from .registry import kernel_for


def _example(rng, dtype, size, arrays=1):
    shape = (3, 5, 7) if size == "small" else (128, 19, 256)  # a feed-forward hidden layer of the date model
    return tuple((rng.standard_normal(shape) * 4).astype(dtype) for _ in range(arrays))


@kernel_for(op.hardswish, fits=contiguous_floats, example=_example)
@elementwise
def hardswish(x):
    return x * min(max(x + 3.0, 0.0), 6.0) / 6.0


@kernel_for(op.hardswish_backward, fits=contiguous_floats, example=lambda rng, dtype, size: _example(rng, dtype, size, 2))
@elementwise
def hardswish_backward(x, grad):
    return 0.0 if x <= -3.0 else (grad * (x / 3.0 + 0.5) if x < 3.0 else grad)
