"""``@elementwise``: a kernel from a scalar function, in the spirit of minitorch's ``tensor_map``.

    @elementwise
    def relu(x):
        return 0.0 if x <= 0.0 else x

``relu`` is then a kernel entry: ``relu(x)`` returns a new array of ``x``'s shape and dtype,
the scalar function applied to each element by a compiled loop. So an elementwise kernel is
one line, registered as any other (``kernels/relu_kernels.py``). Other kernels are loops
written out with ``@jit()`` (``kernels/softmax_kernels.py``).

How the loop is made, and why so: a loop template below calls a global named ``scalar``;
each kernel gets its own copy of the template whose globals hold its compiled scalar
function, and whose name, file and line are the scalar function's. Numba's on-disk cache
knows a function by exactly these (file, qualified name, line; its source hash checks the
file), so each kernel is cached and reloaded like a hand-written one. A closure over the
scalar function would be simpler but is never found in the cache: Numba keys a closure by
its pickled cell contents, and a pickled dispatcher carries a random id per process. What
was measured against the hand-written loops and ``numba.vectorize``: docs/kernels.md.
"""
import builtins
import functools
import inspect
import types

import numba
import numpy as np

from .jit import jit
from .rows import float_arrays


# The loop templates, one per number of inputs: ``scalar`` is each kernel's own global.
def _loop_of_1(a, out):
    for i in range(out.shape[0]):
        out[i] = scalar(a[i])  # noqa: F821


def _loop_of_2(a, b, out):
    for i in range(out.shape[0]):
        out[i] = scalar(a[i], b[i])  # noqa: F821


def _loop_of_3(a, b, c, out):
    for i in range(out.shape[0]):
        out[i] = scalar(a[i], b[i], c[i])  # noqa: F821


_LOOPS = {1: _loop_of_1, 2: _loop_of_2, 3: _loop_of_3}


def contiguous_floats(*arrays):
    """Where an elementwise kernel fits: float32/float64 arrays of one dtype and shape,
    C-contiguous (the loop runs over flat memory), not empty."""
    return float_arrays(*arrays) and all(a.flags.c_contiguous for a in arrays)


class Elementwise:
    """A kernel entry made by ``@elementwise`` from a scalar function of 1 to 3 numbers.

    Called with arrays that ``contiguous_floats`` accepts, it returns a new array like the
    first, each element the scalar function of the inputs' elements at that place (computed
    in float64 where the function mixes in a float literal, stored in the arrays' dtype).
    ``loop`` is the compiled loop (``loop(*flat_inputs, flat_out)``); ``compiled`` lists it
    for ``kernel_for``'s compile-cache checks."""

    def __init__(self, scalar):
        code = scalar.__code__
        if code.co_argcount not in _LOOPS or code.co_kwonlyargcount or \
                code.co_flags & (inspect.CO_VARARGS | inspect.CO_VARKEYWORDS):
            raise TypeError(f"elementwise: {scalar.__qualname__} must take 1 to 3 numbers as plain arguments; "
                            "write a loop with @jit() instead (kernels/softmax_kernels.py)")
        name = f"{scalar.__name__}_loop"
        template = _LOOPS[code.co_argcount].__code__
        loop = types.FunctionType(
            template.replace(co_name=name, co_filename=code.co_filename, co_firstlineno=code.co_firstlineno),
            {"__builtins__": builtins, "scalar": numba.njit(error_model="numpy", _nrt=False)(scalar)}, name)
        loop.__qualname__, loop.__module__ = f"{scalar.__qualname__}_loop", scalar.__module__
        self.loop = jit()(loop)
        self.compiled = (self.loop,)
        functools.update_wrapper(self, scalar)

    def __call__(self, *arrays):
        out = np.empty_like(arrays[0])
        self.loop(*[a.ravel() for a in arrays], out.ravel())     # views: the arrays are C-contiguous
        return out

    def __repr__(self):
        return f"<elementwise kernel {self.__module__}.{self.__qualname__}>"


def elementwise(scalar):
    """Decorator: the kernel entry (``Elementwise``) that maps ``scalar`` over arrays."""
    return Elementwise(scalar)
