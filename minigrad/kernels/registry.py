"""Kernels are accelerators registered for an op's numpy function.

An op writes its math once, as plain numpy, in its own file, and marks the functions a
kernel may run instead with ``@accelerated``:

    @accelerated
    def softmax(x):                       # ops/softmax.py: the definition a learner reads
        ...numpy...

A kernel file registers a faster version of that function, saying where it fits and how
to compile it ahead of time:

    @kernel_for(softmax, fits=float_rows, example=row_example, stage="training")
    def softmax_kernel(x):                # kernels/softmax_kernels.py: same arguments, same result
        ...

A call of ``softmax(x)`` runs the kernel when one is registered, the Numba backend is
selected (``use_backend("numpy")`` or ``MINIGRAD_KERNELS=numpy`` turn kernels off) and
``fits(x)`` is true; otherwise the numpy definition. That choice is made here and nowhere
else. ``registered()`` lists every kernel: the compile cache, the kernel-vs-numpy tests and
``examples/benchmark_kernels.py`` iterate it.
"""
import functools

from . import backend

_registry = []
# The profiler (minigrad/profiler.py) sets this to a function that runs the call and notes
# which path it took; None when not profiling, so the hot path pays one global read.
path_listener = None


class Kernel:
    """One registered accelerator.

    op        the ``@accelerated`` numpy function it replaces (its twin)
    run       the kernel's entry: same arguments and results as the numpy function
    fits      ``fits(*args)``: True when run can take these arguments (dtypes, shapes, layout)
    example   ``example(rng, dtype, size)``: arguments a model passes; size "small" (odd
              shapes: warm-up, tests) or "model" (one default training step's shapes: benchmarks)
    stage     "forward" (a model's forward pass runs it: translating), "training" (a default
              training step adds it: backwards, the loss, Adam) or None (neither: it compiles
              on its first call); ``compile_training_kernels`` warms up the first two
    compiled  the Numba functions it calls (for the on-disk cache checks); () for none
    """

    def __init__(self, op, run, fits, example, stage, compiled):
        if stage not in ("forward", "training", None):
            raise ValueError(f"kernel_for: stage must be 'forward', 'training' or None, got {stage!r}")
        self.op, self.run, self.fits, self.example = op, run, fits, example
        self.stage, self.compiled = stage, tuple(compiled)
        self.name = op.__name__

    def warm_up(self, dtype):
        """One small call with the argument types a model passes: compiles (or loads) its code."""
        import numpy as np
        self.run(*self.example(np.random.default_rng(0), np.dtype(dtype), "small"))

    def __repr__(self):
        return f"<kernel for {self.op.__module__}.{self.name}>"


class Accelerated:
    """An op's numpy function that a registered kernel may run instead (see the module doc).

    ``numpy`` is the plain function, ``kernel`` the registered Kernel or None."""

    def __init__(self, numpy_function):
        functools.update_wrapper(self, numpy_function)
        self.numpy = numpy_function
        self.kernel = None

    def runs_kernel(self, args):
        """The one fallback rule: the kernel runs when there is one, the Numba backend is
        selected and the kernel fits these arguments; otherwise the numpy function."""
        kernel = self.kernel
        return kernel is not None and backend._backend == "numba" and kernel.fits(*args)

    def __call__(self, *args):
        if path_listener is not None:
            return path_listener(self, args)
        return self.kernel.run(*args) if self.runs_kernel(args) else self.numpy(*args)

    def __repr__(self):
        return f"<accelerated {self.__module__}.{self.__name__}>"


def accelerated(numpy_function):
    """Decorator for an op's numpy function: calls go to its kernel when one is registered and fits."""
    return Accelerated(numpy_function)


def kernel_for(op, *, fits, example, stage=None, compiled=()):
    """Decorator registering the decorated function as the kernel of ``op`` (an ``@accelerated``
    function). See ``Kernel`` for the arguments."""
    if not isinstance(op, Accelerated):
        raise TypeError(f"kernel_for: {op!r} is not an @accelerated numpy function; mark the op's "
                        "numpy function with @accelerated first")

    def register(run):
        if op.kernel is not None:
            raise ValueError(f"kernel_for: {op!r} already has a kernel ({op.kernel.run.__qualname__})")
        op.kernel = Kernel(op, run, fits, example, stage, compiled)
        _registry.append(op.kernel)
        return run
    return register


def unregister(op):
    """Remove op's kernel (tests that register a kernel of their own clean up with this)."""
    if op.kernel in _registry:
        _registry.remove(op.kernel)
    op.kernel = None


def registered():
    """Every registered kernel, in registration order."""
    return tuple(_registry)
