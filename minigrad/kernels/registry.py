"""Kernels are accelerators registered for an op's ``@accelerated`` numpy function
(``minigrad/accelerated.py``). A kernel file registers a faster version of that function,
saying where it fits and how to compile it ahead of time:

    @kernel_for(softmax, fits=float_rows, example=row_example, stage="training")
    def softmax_kernel(x):                # kernels/softmax_kernels.py: same arguments, same result
        ...

A call of ``softmax(x)`` then runs the kernel when the Numba backend is selected, the kernel
pays and ``fits(x)`` is true; otherwise the numpy definition (decided in ``accelerated.py`` alone).

A kernel pays when ``measured.json`` (beside this file, written by
``python examples/benchmark_kernels.py --record``; ``MINIGRAD_KERNEL_VERDICTS=FILE`` reads
another) says it was faster than its numpy twin at its ``example(..., "model")`` arguments,
the shapes a default training step gives it. A kernel never measured, or measured slower, is
registered all the same (tested against its twin, benchmarked, compiled on demand) but does
not run by default: a kernel that makes the program slower is not a choice the registry makes
for the user. The file is read like a checkpoint: one that is missing, damaged or not a
regular file is ignored with one ``note:`` line, and then no kernel pays (every op runs its
numpy function).
``registered()`` lists every kernel: the compile cache, the kernel-vs-numpy tests and
``examples/benchmark_kernels.py`` iterate it.
"""
import json
import math
import os

from ..accelerated import Accelerated
from .untrusted_files import Unreadable, note_once, read_regular_file

VERDICTS_VARIABLE = "MINIGRAD_KERNEL_VERDICTS"      # another verdicts file (tests, experiments)
MEASURED = (os.environ.get(VERDICTS_VARIABLE)
            or os.path.join(os.path.dirname(os.path.abspath(__file__)), "measured.json"))
MAX_VERDICTS_BYTES = 1 << 20    # the recorded file is ~3 kB: a megabyte is not one of ours

_registry = []


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
    compiled  the Numba functions it calls (for the on-disk cache checks); by default what
              ``run.compiled`` lists (an ``@elementwise`` kernel lists its loop), else none
    key       "module.function" of its twin: its entry in measured.json
    verdict   that entry ({"shape", "kernel_us", "numpy_us", ...}) or None if never measured
    pays      whether the verdict says the kernel is faster: only then does it run by default
    """

    def __init__(self, op, run, fits, example, stage, compiled):
        if stage not in ("forward", "training", None):
            raise ValueError(f"kernel_for: stage must be 'forward', 'training' or None, got {stage!r}")
        self.op, self.run, self.fits, self.example = op, run, fits, example
        self.stage, self.compiled = stage, tuple(compiled)
        self.name = op.__name__
        self.key = f"{op.__module__}.{op.__name__}"
        self.verdict = measured().get(self.key)
        self.pays = self.verdict is not None and self.verdict["kernel_us"] <= self.verdict["numpy_us"]

    def warm_up(self, dtype):
        """One small call with the argument types a model passes: compiles (or loads) its code."""
        import numpy as np
        self.run(*self.example(np.random.default_rng(0), np.dtype(dtype), "small"))

    def __repr__(self):
        return f"<kernel for {self.op.__module__}.{self.name}>"


def kernel_for(op, *, fits, example, stage=None, compiled=None):
    """Decorator registering the decorated function as the kernel of ``op`` (an ``@accelerated``
    function). See ``Kernel`` for the arguments."""
    if not isinstance(op, Accelerated):
        raise TypeError(f"kernel_for: {op!r} is not an @accelerated numpy function; mark the op's "
                        "numpy function with @accelerated first")

    def register(run):
        if op.kernel is not None:
            raise ValueError(f"kernel_for: {op!r} already has a kernel ({op.kernel.run.__qualname__})")
        op.kernel = Kernel(op, run, fits, example, stage, getattr(run, "compiled", ()) if compiled is None else compiled)
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


_measured = None


def measured() -> dict:
    """The recorded verdicts, ``{kernel key: {"shape", "kernel_us", "numpy_us", "speedup"}}`` (read
    once); ``{}`` with one note when the file cannot be used, so that every op runs numpy's loops."""
    global _measured
    if _measured is None:
        from .simd import VECTOR_BYTES       # loaded with the kernels that ask: Numba is there already
        try:
            _measured = read_verdicts(MEASURED, VECTOR_BYTES * 8)
        except (FileNotFoundError, Unreadable) as problem:
            reason = "it does not exist" if isinstance(problem, FileNotFoundError) else problem
            note_once("verdicts", f"kernel verdicts {MEASURED} ignored ({reason}): every op runs its numpy "
                                  "function; python examples/benchmark_kernels.py --record writes them anew")
            _measured = {}
    return _measured


def read_verdicts(path, vector_bits=None) -> dict:
    """The ``kernels`` object of a verdicts file, each verdict checked: Unreadable (a short
    reason) unless it is one small regular file of UTF-8 JSON in the recorded form.

    Whether a kernel beats numpy depends on the machine: the batched matmul kernel wins on AVX2
    and loses to OpenBLAS's AVX-512 kernels. So the file may hold, beside its main record, one
    record per other vector width (``"other_vector_widths": {"512": {"machine", "kernels", ...}}``):
    with ``vector_bits`` given, the record measured at that width is the one read, and a kernel
    it lacks keeps the main record's verdict."""
    text = read_regular_file(path, MAX_VERDICTS_BYTES)
    try:
        record = json.loads(text.decode("utf-8"))
    except UnicodeDecodeError:
        raise Unreadable("not UTF-8 text") from None
    except (ValueError, RecursionError):          # RecursionError: nested absurdly deep
        raise Unreadable("not JSON") from None
    if not isinstance(record, dict):
        raise Unreadable("not a JSON object with a 'kernels' object")
    _checked_kernels(record)                              # every record checked, the one read or not
    others = record.get("other_vector_widths", {})
    if not isinstance(others, dict):
        raise Unreadable("its 'other_vector_widths' is not a JSON object")
    for width, other in others.items():
        if not isinstance(other, dict):
            raise Unreadable(f"its record of {width[:8]}-bit vectors is not a JSON object")
        _checked_kernels(other)
    mine = record_for_width(record, vector_bits)
    return record["kernels"] if mine is record else {**record["kernels"], **mine["kernels"]}


def record_for_width(record: dict, vector_bits) -> dict:
    """The record of ``record`` (a verdicts file's object) measured at ``vector_bits``: its main
    one unless that was measured at another width and the file holds one of this width."""
    others = record.get("other_vector_widths")
    machine = record.get("machine")
    main_bits = machine.get("vector_bits") if isinstance(machine, dict) else None
    if vector_bits is None or main_bits == vector_bits or not isinstance(others, dict):
        return record
    return others.get(str(vector_bits), record)


def _checked_kernels(record: dict) -> dict:
    """A record's ``kernels`` object, each verdict two positive times: else Unreadable."""
    verdicts = record.get("kernels")
    if not isinstance(verdicts, dict):
        raise Unreadable("not a JSON object with a 'kernels' object")
    for key, verdict in verdicts.items():
        if not (isinstance(verdict, dict) and _is_time(verdict.get("kernel_us"))
                and _is_time(verdict.get("numpy_us"))):
            raise Unreadable(f"the verdict of {key[:80]!r} lacks a positive 'kernel_us' or 'numpy_us'")
    return verdicts


def _is_time(value) -> bool:
    """A measured time in µs: a positive finite number (not a bool, not a string, not NaN)."""
    return type(value) in (int, float) and math.isfinite(value) and value > 0
