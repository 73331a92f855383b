"""The arithmetic of minigrad: Numba kernels, each with a plain numpy twin.

A map of the package:

- ``backend.py``: the switch. ``use_backend("numpy")`` (or ``MINIGRAD_KERNELS=numpy``)
  makes every public function below call its numpy twin, to read or compare.
- ``jit.py``: ``numba.njit`` with the on-disk cache (``cache=True``).
- ``simd.py``: a small vector vocabulary (``vload``, ``vstore``, ``vsplat``, ``vfma``,
  ...; plain Python, one function each) for the short rows of this model, which
  Numba's auto-vectoriser leaves scalar; ``simd_codegen.py`` tells Numba how to
  compile it (LLVM; skip it on a first read).
- One file per kernel family, each with its numpy twin: ``matmul_kernels.py``
  (batched matmul and its 4-row tile, which the fused attention shares; the rule
  ``_use_numba_matmul`` sends everything else to BLAS),
  ``softmax_kernels.py``, ``layer_norm_kernels.py``, ``attention_kernels.py``
  (the fused multi-head attention), ``relu_kernels.py``, ``adam_kernel.py``;
  ``rows.py`` is the plumbing the row kernels share. A public wrapper allocates
  the output and reshapes; the kernel writes into it.

Kernels are serial (no ``prange``) and use no fastmath (masked rows hold -inf).
Dtypes float32 and float64; outputs keep the input dtype. ``NUMBA_DISABLE_JIT=1``
runs every kernel as plain Python (slow, but a debugger and print() work).
docs/kernels.md records what was measured, on which CPU, and what was tried.
"""
from .adam_kernel import adam_update, adam_update_all, adam_update_numpy
from .attention_kernels import attention, attention_backward, attention_backward_numpy, attention_numpy
from .backend import BACKENDS, get_backend, numpy_selected, set_backend, use_backend
from .column_sums import column_sums, column_sums_numpy
from .masked_fill import masked_fill, masked_fill_numpy
from .compile_cache import cache_is_cold, compile_training_kernels
from .layer_norm_kernels import layer_norm, layer_norm_backward, layer_norm_backward_numpy, layer_norm_numpy
from .matmul_kernels import matmul, matmul_numpy
from .relu_kernels import relu, relu_backward, relu_backward_numpy, relu_numpy
from .simd import lanes
from .softmax_kernels import (log_softmax, log_softmax_backward, log_softmax_backward_numpy, log_softmax_numpy,
                              softmax, softmax_backward, softmax_backward_numpy, softmax_numpy)

__all__ = ["matmul", "softmax", "softmax_backward", "log_softmax", "log_softmax_backward",
           "layer_norm", "layer_norm_backward", "adam_update", "adam_update_all", "adam_update_numpy",
           "matmul_numpy", "softmax_numpy", "softmax_backward_numpy", "log_softmax_numpy",
           "log_softmax_backward_numpy", "layer_norm_numpy", "layer_norm_backward_numpy",
           "attention", "attention_backward", "attention_numpy", "attention_backward_numpy",
           "relu", "relu_backward", "relu_numpy", "relu_backward_numpy",
           "set_backend", "get_backend", "use_backend", "numpy_selected", "BACKENDS", "lanes", "cache_is_cold", "compile_training_kernels",
           "column_sums", "column_sums_numpy", "masked_fill", "masked_fill_numpy"]
