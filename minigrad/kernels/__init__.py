"""The Numba kernels: accelerators registered for the ops' numpy functions.

An op's math lives in its own file (``minigrad/ops/``, ``optim.py``) as plain numpy; the
functions a kernel may replace are marked ``@accelerated``. Here:

- ``registry.py``: ``@kernel_for(op_function, fits=..., example=..., stage=...)`` registers a
  kernel; the one place that decides, per call, whether the kernel or the numpy runs.
- ``backend.py``: ``use_backend("numpy")`` (or ``MINIGRAD_KERNELS=numpy``) turns every kernel off.
- ``jit.py``: ``numba.njit`` with the on-disk cache; ``compile_cache.py`` says whether that
  cache is warm and fills it on two cores, for the registered kernels.
- One file per kernel family: softmax, layer norm, attention, ReLU, Adam, matmul, column
  sums, masked fill. Each registers a function with its op function's arguments and results.
- ``simd.py``: a small vector vocabulary (``vload``, ``vstore``, ``vfma``, ...; plain
  Python) for the model's short rows, which Numba's auto-vectoriser leaves scalar;
  ``simd_codegen.py`` tells Numba how to compile it (skip it on a first read).

Kernels are serial, without fastmath (masked rows hold -inf), for float32 and float64.
``NUMBA_DISABLE_JIT=1`` runs them as plain Python (a debugger works). What was measured,
on which CPU, and what was tried: docs/kernels.md and docs/kernels-rows.md.
"""
from .backend import BACKENDS, get_backend, numpy_selected, set_backend, use_backend
from .compile_cache import cache_is_cold, compile_training_kernels
from .registry import accelerated, kernel_for, registered
from .simd import lanes
