"""ArrayFunction: a numpy function of the batch's arrays (a padding mask, the targets to score)
run as an op, so that a traced step (``minigrad.trace``) recomputes it from every batch.

Model code that computes such an array in plain numpy hands a tape an array it cannot tell
from a constant; a pure replay (``minigrad/pure_replay.py``) would then keep the first batch's
mask. As an op, the array is a line of the tape whose inputs are the batch's own arrays:

    mask = ArrayFunction.apply(ids, fn=padding_mask_of, pad_id=0).data

``fn`` must be a pure function of its arrays and options (same inputs, same output) and the
same object on every call (a module-level function, not a lambda made per call). Its result
is a plain array: ints and bools carry no gradient; no input gets one either.
"""
import numpy as np

from ..function import Function


class ArrayFunction(Function):
    differentiable_backward = True      # nothing flows: the same "no gradient" at any order

    def forward(self, *arrays, fn, **options):
        return np.asarray(fn(*arrays, **options))

    def backward(self, grad):
        return (None,) * len(self.needs_input_grad)

    def jvp(self, *tangents):
        return None
