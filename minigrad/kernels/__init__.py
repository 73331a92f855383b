"""The arithmetic of minigrad: Numba kernels, each beside its plain numpy twin.

- ``backend.py``: ``use_backend("numpy")`` (or ``MINIGRAD_KERNELS=numpy``) makes every
  function here call its numpy twin, to read or compare.
- ``jit.py``: ``numba.njit`` with the on-disk cache; ``compile_cache.py`` says whether
  that cache is warm and fills it on two cores.
- ``simd.py``: a small vector vocabulary (``vload``, ``vstore``, ``vfma``, ...; plain
  Python) for the model's short rows, which Numba's auto-vectoriser leaves scalar;
  ``simd_codegen.py`` tells Numba how to compile it (skip it on a first read).
- One file per kernel family: matmul (its 4-row tile also serves the fused attention),
  softmax (its 4-row softmax too), layer norm, attention, ReLU, Adam. A public wrapper
  allocates outputs and reshapes; the kernel writes into them.

Kernels are serial, without fastmath (masked rows hold -inf), for float32 and float64.
``NUMBA_DISABLE_JIT=1`` runs them as plain Python (a debugger works). What was measured,
on which CPU, and what was tried: docs/kernels.md and docs/kernels-rows.md.
"""
from .adam_kernel import adam_update_all, adam_update_numpy
from .attention_kernels import attention, attention_backward, attention_backward_numpy, attention_numpy
from .backend import BACKENDS, get_backend, numpy_selected, set_backend, use_backend
from .column_sums import column_sums, column_sums_numpy
from .compile_cache import cache_is_cold, compile_training_kernels
from .layer_norm_kernels import layer_norm, layer_norm_backward, layer_norm_backward_numpy, layer_norm_numpy
from .masked_fill import masked_fill, masked_fill_numpy
from .matmul_kernels import matmul, matmul_numpy
from .relu_kernels import relu, relu_backward, relu_backward_numpy, relu_numpy
from .simd import lanes
from .softmax_kernels import (log_softmax, log_softmax_backward, log_softmax_backward_numpy, log_softmax_numpy,
                              softmax, softmax_backward, softmax_backward_numpy, softmax_numpy)
