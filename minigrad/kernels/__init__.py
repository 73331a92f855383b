"""The arithmetic of minigrad: Numba kernels, each with a plain numpy twin.

Layout of this package
----------------------
1. ``backend.py``, the switch: ``set_backend("numba" | "numpy")``, ``get_backend()``
   and the context manager ``use_backend(name)``. The default comes from the
   environment variable ``MINIGRAD_KERNELS`` (default ``"numba"``). With
   ``"numpy"`` every public function below calls its numpy twin, so you can
   read the plain version and flip one switch to compare.
2. ``jit.py``: ``numba.njit(cache=True)`` that falls back to no cache when the
   package sits somewhere read-only (Numba then refuses ``cache=True``).
3. ``simd.py``, a tiny SIMD vocabulary (``vload``, ``vstore``, ``vsplat``, ``vfma``, ...):
   a "vector" is one register: 16 float32 / 8 float64 lanes with AVX-512,
   8 / 4 with AVX2. Why we need it: the rows here are short (20 attention
   positions, 16 features per head) and Numba's auto-vectoriser only starts
   its vector loop at 32 elements, so a plain loop runs scalar (2-3x slower
   than numpy, measured); Numba also ships with LLVM's SLP vectoriser
   switched off (it miscompiled code). ``vload(row, j, n, fill)`` reads
   ``row[j:j+n]`` (n may exceed the lane count; missing lanes get ``fill``),
   so a row of 20 is two vector steps, the second one masked.
   Each helper is also a plain Python function on small numpy arrays, which is
   what runs under ``NUMBA_DISABLE_JIT=1``.
4. The kernels and their twins, one file each: ``matmul_kernels.py``,
   ``softmax_kernels.py`` (softmax and log_softmax, + backward),
   ``layer_norm_kernels.py`` (+ backward), ``adam_kernel.py``,
   ``attention_kernels.py`` (the fused multi-head attention step),
   ``relu_kernels.py``; ``rows.py``
   holds the plumbing the row kernels share. A kernel writes into an output
   array made by its public wrapper; the wrapper reshapes to 2-D/3-D,
   allocates the output and, for matmul, chooses the implementation.

The matmul dispatch rule (``_use_numba_matmul``)
-----------------------------------------------
The Numba kernel is used for a *batch of small matrices* (all of M, K, N at
most 32) where both operands carry their own batch: attention's Q @ K^T and
P @ V and their backward products, where numpy calls BLAS once per tiny
matrix. BLAS (via ``np.matmul``) does everything else: plain 2-D products, a
batch times one shared 2-D weight (reshaped to a single 2-D product so BLAS
runs once), larger matrices, and the transposed-A layouts where BLAS
measured as fast. The rule's docstring lists the measurements behind each case.
The model itself runs attention through the fused kernel in
``attention_kernels.py``; the batched matmul serves everything written op by op.

Threading: no kernel here uses ``prange``, deliberately. Measured on this
2-vCPU VM (examples/benchmark_kernels.py runs the probe): an empty parallel
call costs ~0.04-0.1 ms with the workqueue layer and, right after a BLAS
call, ~3 ms with OpenMP (its threads and OpenBLAS's spin against each
other; 2.4 us otherwise), while the attention kernels
take 0.1-0.25 ms serially; the prange version of the attention product was
slower than the serial loop with both layers (and no faster with TBB, whose
worker joins too late for a 0.1 ms loop). So no threading layer is ever
loaded and numba.config is left alone. No fastmath either: the vector code
asks for its FMAs explicitly, and inf/NaN must keep their meaning.

Vector width: 512-bit vectors where Numba compiles for AVX-512 (measured
~1.5x the flops of 256-bit ones on the Xeon here), 256-bit otherwise;
``MINIGRAD_VECTOR_BYTES=32`` forces 256 bits.

Stepping through a kernel: run with ``NUMBA_DISABLE_JIT=1`` and every kernel
is ordinary Python (slow, but a debugger and print() work inside it).

Dtypes: float32 and float64; outputs keep the input dtype. Inside kernels
every constant is made with the input's dtype (``x.dtype.type(1)``), because
a bare float literal is float64 in Numba and would upcast the arithmetic.
"""
from .adam_kernel import adam_update, adam_update_all, adam_update_numpy
from .attention_kernels import attention, attention_backward, attention_backward_numpy, attention_numpy
from .backend import BACKENDS, get_backend, numpy_selected, set_backend, use_backend
from .column_sums import column_sums, column_sums_numpy
from .compile_cache import cache_is_cold
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
           "set_backend", "get_backend", "use_backend", "numpy_selected", "BACKENDS", "lanes", "cache_is_cold",
           "column_sums", "column_sums_numpy"]
