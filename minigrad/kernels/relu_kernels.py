"""ReLU forward and backward, one line each: ``@elementwise`` compiles a single pass over the
elements (numpy's ``np.where`` takes extra passes: a boolean temporary first), which LLVM
vectorises. The math, NaN included: ``ops/elementwise.py``."""
from ..ops import elementwise as op
from .elementwise import contiguous_floats, elementwise
from .registry import kernel_for


def _example(rng, dtype, size, arrays=1):
    shape = (3, 5, 7) if size == "small" else (128, 19, 256)  # the feed-forward's hidden layer
    return tuple(rng.standard_normal(shape).astype(dtype) for _ in range(arrays))


@kernel_for(op.relu, fits=contiguous_floats, example=_example, stage="forward")
@elementwise
def relu(x):
    return 0.0 if x <= 0.0 else x                   # NaN is kept (NaN <= 0 is false); -0.0 gives 0.0


@kernel_for(op.relu_backward, fits=contiguous_floats, example=lambda rng, dtype, size: _example(rng, dtype, size, 2),
            stage="training")
@elementwise
def relu_backward(out, grad):
    return 0.0 if out <= 0.0 else grad              # a NaN output passes its gradient
