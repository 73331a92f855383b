"""The arithmetic of minigrad: Numba kernels, each with a plain numpy twin.

Layout of this file
-------------------
1. The backend switch: ``set_backend("numba" | "numpy")``, ``get_backend()``
   and the context manager ``use_backend(name)``. The default comes from the
   environment variable ``MINIGRAD_KERNELS`` (default ``"numba"``). With
   ``"numpy"`` every public function below calls its numpy twin, so you can
   read the plain version and flip one switch to compare.
2. ``_jit``: ``numba.njit(cache=True)`` that falls back to no cache when the
   package sits somewhere read-only (Numba then refuses ``cache=True``).
3. A tiny SIMD vocabulary (``vload``, ``vstore``, ``vsplat``, ``vfma``, ...):
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
4. The kernels and their twins: matmul, softmax (+ backward), log_softmax
   (+ backward), layer_norm (+ backward). A kernel writes into an output
   array made by its public wrapper; the wrapper reshapes to 2-D/3-D,
   allocates the output and, for matmul, chooses the implementation.

The matmul dispatch rule (``_use_numba_matmul``)
-----------------------------------------------
The Numba kernel is used for a *batch of small matrices* where both operands
carry their own batch and the output rows need more than one vector register
(attention scores Q @ K^T, and g @ V^T in the backward), unless A is a
transposed view. BLAS (via ``np.matmul``) does everything else: plain 2-D
products, matrices above 32 on a side, a batch times one shared 2-D weight
(reshaped to a single 2-D product so BLAS runs once), and the cases where
BLAS measured as fast or faster. Why a kernel at all: for 20x16 matrices
numpy calls BLAS once per matrix and pays its per-call cost 512 times.

Threading: no kernel here uses ``prange``, deliberately. Measured on this
2-vCPU VM (examples/benchmark_kernels.py runs the probe): an empty parallel
call costs ~0.04-0.1 ms with the workqueue layer and ~4 ms with OpenMP (its
threads and OpenBLAS's spin against each other), while the attention kernels
take 0.1-0.25 ms serially; the prange version of the attention product was
slower than the serial loop with both layers. So no threading layer is ever
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
import contextlib
import math
import operator
import os

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.core.errors import TypingError
from numba.extending import intrinsic, models, overload, register_model

__all__ = ["matmul", "softmax", "softmax_backward", "log_softmax", "log_softmax_backward",
           "layer_norm", "layer_norm_backward", "adam_update", "adam_update_numpy",
           "matmul_numpy", "softmax_numpy", "softmax_backward_numpy", "log_softmax_numpy",
           "log_softmax_backward_numpy", "layer_norm_numpy", "layer_norm_backward_numpy",
           "set_backend", "get_backend", "use_backend", "BACKENDS"]

# ---------------------------------------------------------------------------
# 1. The backend switch
# ---------------------------------------------------------------------------
BACKENDS = ("numba", "numpy")


def _checked_backend(name):
    if name not in BACKENDS:
        raise ValueError(f"unknown kernel backend {name!r}; valid names: {', '.join(BACKENDS)}")
    return name


_backend = _checked_backend(os.environ.get("MINIGRAD_KERNELS", "numba"))


def set_backend(name):
    """Use the Numba kernels ("numba") or the plain numpy twins ("numpy")."""
    global _backend
    _backend = _checked_backend(name)


def get_backend():
    return _backend


@contextlib.contextmanager
def use_backend(name):
    """``with use_backend("numpy"): ...`` runs the block on the given backend."""
    previous = get_backend()
    set_backend(name)
    try:
        yield
    finally:
        set_backend(previous)


# ---------------------------------------------------------------------------
# 2. njit with an on-disk cache, or without one where the cache can't be written
# ---------------------------------------------------------------------------
def _jit(**options):
    """``numba.njit(cache=True, error_model="numpy", **options)``, cache optional.

    The cache makes a fresh process load compiled machine code instead of
    compiling again (seconds). Numba raises ``RuntimeError: cannot cache
    function ...: no locator available`` at decoration time when it finds no
    writable cache directory (e.g. a read-only install without
    NUMBA_CACHE_DIR); then we compile in memory on first call instead.
    error_model="numpy": float division by zero gives inf/nan, no exception.
    """
    options = {"error_model": "numpy", **options}

    def decorate(function):
        try:
            return numba.njit(cache=True, **options)(function)
        except RuntimeError as error:
            if "cannot cache" not in str(error):
                raise
            return numba.njit(**options)(function)
    return decorate


# ---------------------------------------------------------------------------
# 3. The SIMD vocabulary
# ---------------------------------------------------------------------------
def _vector_bytes():
    """Bytes per vector: 64 where Numba compiles for AVX-512, else 32 (AVX2).

    Measured on an AVX-512 Xeon: 512-bit FMAs give ~1.5x the flops of
    256-bit ones, so the attention products are faster with them even though
    a row of 20 then fills 2 x 16 lanes (Q @ K^T: 165 vs 250 us). On a CPU without AVX-512 a 512-bit
    vector would be split in two, so 256 bits is the natural width there."""
    if os.environ.get("MINIGRAD_VECTOR_BYTES") in ("16", "32", "64"):  # override, for experiments
        return int(os.environ["MINIGRAD_VECTOR_BYTES"])
    features = numba.config.CPU_FEATURES
    if features is None:
        if numba.config.CPU_NAME not in (None, "host"):  # a portable target such as "generic"
            return 32
        import llvmlite.binding
        features = llvmlite.binding.get_host_cpu_features().flatten()
    return 64 if "+avx512f" in features.split(",") else 32


_VECTOR_BYTES = _vector_bytes()


def lanes(array):
    """How many elements of ``array``'s dtype fit in one vector (16/8 float32, 8/4 float64)."""
    return _VECTOR_BYTES // array.itemsize


def vload(row, start, count, fill):
    """``row[start:start+count]`` as a vector; lanes past ``count`` hold ``fill``."""
    vector = np.full(lanes(row), fill, dtype=row.dtype)
    count = max(0, min(count, len(vector)))
    vector[:count] = row[start:start + count]
    return vector


def vstore(row, start, count, vector):
    """``row[start:start+count] = vector[:count]`` (count may exceed the lane count)."""
    count = max(0, min(count, len(vector)))
    row[start:start + count] = vector[:count]


def vsplat(x):
    """A vector with every lane equal to the scalar ``x``."""
    return np.full(_VECTOR_BYTES // np.dtype(type(x)).itemsize, x)


def vfma(acc, a, b):
    """``acc + a * b`` lane by lane (one fused multiply-add where the CPU has it)."""
    return acc + a * b


def vmax(a, b):
    """Lane-wise maximum; a NaN in ``a`` is kept (``b if a < b else a``)."""
    return np.where(a < b, b, a)


def vfloor(a):
    return np.floor(a)


def vpow2(n):
    """2**n for whole numbers n, built straight from the exponent bits. n is
    clipped to the exponent range (NaN counts as 0); the bottom of the range
    (-127 for float32, -1023 for float64) has all exponent bits 0, so gives 0."""
    if n.dtype == np.float32:
        n = np.clip(np.nan_to_num(n, nan=0.0), -127, 127)
        return ((n.astype(np.int32) + np.int32(127)) << np.int32(23)).view(np.float32)
    n = np.clip(np.nan_to_num(n, nan=0.0), -1023, 1023)
    return ((n.astype(np.int64) + np.int64(1023)) << np.int64(52)).view(np.float64)


def hsum(vector):
    """Sum of the lanes (pairwise: lanes i and i+half first)."""
    while len(vector) > 1:
        half = len(vector) // 2
        vector = vector[:half] + vector[half:]
    return vector[0]


def hmax(vector):
    """Maximum of the lanes, same NaN rule as vmax."""
    while len(vector) > 1:
        half = len(vector) // 2
        vector = vmax(vector[:half], vector[half:])
    return vector[0]


# How Numba compiles the vocabulary: a Numba type for vectors, stored as an
# LLVM vector such as <16 x float>, and one small LLVM snippet per helper.
# (You can skip this part: the Python functions above say what each does.)
class VectorType(types.Type):
    def __init__(self, dtype):
        self.dtype = dtype
        self.lanes = _VECTOR_BYTES * 8 // dtype.bitwidth
        super().__init__(name=f"Vector({dtype} x {self.lanes})")


@register_model(VectorType)
class _VectorModel(models.PrimitiveModel):
    def __init__(self, dmm, fe_type):
        element = dmm.lookup(fe_type.dtype).get_value_type()
        super().__init__(dmm, fe_type, ir.VectorType(element, fe_type.lanes))


_I32 = ir.IntType(32)


def _llvm_name(vector_type):  # e.g. "v16f32", the suffix of LLVM's vector intrinsics
    return f"v{vector_type.lanes}f{vector_type.dtype.bitwidth}"


def _llvm_function(builder, name, return_type, argument_types):
    return cgutils.get_or_insert_function(builder.module, ir.FunctionType(return_type, argument_types), name)


def _row_pointer(context, builder, row_type, row, start):
    data = context.make_array(row_type)(context, builder, row).data
    return builder.gep(data, [start], source_etype=context.get_data_type(row_type.dtype))


def _lane_mask(builder, lane_count, count):
    """<lane_count x i1>: lane i is on when i < count."""
    # clip count to [0, lane_count] so it fits 32 bits: one compare of 32-bit lanes
    lanes_value = ir.Constant(count.type, lane_count)
    count = builder.select(builder.icmp_signed("<", count, lanes_value), count, lanes_value)
    count = builder.trunc(builder.select(builder.icmp_signed("<", count, count.type(0)), count.type(0), count), _I32)
    lane_index = ir.Constant(ir.VectorType(_I32, lane_count), list(range(lane_count)))
    return builder.icmp_signed("<", lane_index, _splat_value(builder, count, lane_count))


def _splat_value(builder, scalar, lane_count):
    vector_type = ir.VectorType(scalar.type, lane_count)
    vector = builder.insert_element(ir.Constant(vector_type, None), scalar, ir.Constant(_I32, 0))
    return builder.shuffle_vector(vector, vector, ir.Constant(ir.VectorType(_I32, lane_count), [0] * lane_count))


def _halving_reduction(builder, vector, combine):
    """Fold the upper half of the lanes onto the lower half until one lane is left."""
    width = vector.type.count
    while width > 1:
        half = width // 2
        low = builder.shuffle_vector(vector, vector, ir.Constant(ir.VectorType(_I32, half), list(range(half))))
        high = builder.shuffle_vector(vector, vector, ir.Constant(ir.VectorType(_I32, half), list(range(half, width))))
        vector, width = combine(low, high), half
    return builder.extract_element(vector, ir.Constant(_I32, 0))


def _select_max(builder):
    return lambda a, b: builder.select(builder.fcmp_ordered("<", a, b), b, a)


def _is_row(row):
    return (isinstance(row, types.Array) and row.ndim == 1 and row.layout == "C"
            and row.dtype in (types.float32, types.float64))


@intrinsic
def _vload_ir(typingctx, row, start, count, fill):
    vector_type = VectorType(row.dtype)

    def codegen(context, builder, signature, args):
        row_value, start_value, count_value, fill_value = args
        llvm_type = context.get_value_type(vector_type)
        pointer = _row_pointer(context, builder, signature.args[0], row_value, start_value)
        mask = _lane_mask(builder, vector_type.lanes, count_value)
        load = _llvm_function(builder, f"llvm.masked.load.{_llvm_name(vector_type)}.p0",
                              llvm_type, [pointer.type, _I32, mask.type, llvm_type])
        alignment = ir.Constant(_I32, row.dtype.bitwidth // 8)
        return builder.call(load, [pointer, alignment, mask, _splat_value(builder, fill_value, vector_type.lanes)])
    return vector_type(row, types.intp, types.intp, row.dtype), codegen


@intrinsic
def _vstore_ir(typingctx, row, start, count, vector):
    def codegen(context, builder, signature, args):
        row_value, start_value, count_value, vector_value = args
        pointer = _row_pointer(context, builder, signature.args[0], row_value, start_value)
        mask = _lane_mask(builder, vector.lanes, count_value)
        store = _llvm_function(builder, f"llvm.masked.store.{_llvm_name(vector)}.p0",
                               ir.VoidType(), [vector_value.type, pointer.type, _I32, mask.type])
        builder.call(store, [vector_value, pointer, ir.Constant(_I32, row.dtype.bitwidth // 8), mask])
        return context.get_dummy_value()
    return types.none(row, types.intp, types.intp, vector), codegen


@intrinsic
def _vsplat_ir(typingctx, x):
    def codegen(context, builder, signature, args):
        return _splat_value(builder, args[0], signature.return_type.lanes)
    return VectorType(x)(x), codegen


@intrinsic
def _vfma_ir(typingctx, acc, a, b):
    def codegen(context, builder, signature, args):
        llvm_type = args[0].type
        fmuladd = _llvm_function(builder, f"llvm.fmuladd.{_llvm_name(acc)}", llvm_type, [llvm_type] * 3)
        return builder.call(fmuladd, [args[1], args[2], args[0]])
    return acc(acc, a, b), codegen


@intrinsic
def _vmax_ir(typingctx, a, b):
    def codegen(context, builder, signature, args):
        return _select_max(builder)(*args)
    return a(a, b), codegen


@intrinsic
def _vfloor_ir(typingctx, a):
    def codegen(context, builder, signature, args):
        floor = _llvm_function(builder, f"llvm.floor.{_llvm_name(a)}", args[0].type, [args[0].type])
        return builder.call(floor, args)
    return a(a), codegen


@intrinsic
def _vpow2_ir(typingctx, n):
    def codegen(context, builder, signature, args):
        mantissa_bits, bias = (23, 127) if n.dtype == types.float32 else (52, 1023)
        float_type = args[0].type
        int_type = ir.VectorType(ir.IntType(n.dtype.bitwidth), n.lanes)
        # clip n into the exponent range first (NaN -> 0): then the plain
        # float-to-int conversion is defined and stays one vector instruction
        x = builder.select(builder.fcmp_ordered("ord", args[0], args[0]), args[0], ir.Constant(float_type, None))
        low, high = ir.Constant(float_type, [float(-bias)] * n.lanes), ir.Constant(float_type, [float(bias)] * n.lanes)
        x = builder.select(builder.fcmp_ordered("<", x, low), low, x)
        x = builder.select(builder.fcmp_ordered(">", x, high), high, x)
        biased = builder.add(builder.fptosi(x, int_type), ir.Constant(int_type, [bias] * n.lanes))
        bits = builder.shl(biased, ir.Constant(int_type, [mantissa_bits] * n.lanes))
        return builder.bitcast(bits, float_type)
    return n(n), codegen


@intrinsic
def _hsum_ir(typingctx, vector):
    def codegen(context, builder, signature, args):
        return _halving_reduction(builder, args[0], builder.fadd)
    return vector.dtype(vector), codegen


@intrinsic
def _hmax_ir(typingctx, vector):
    def codegen(context, builder, signature, args):
        return _halving_reduction(builder, args[0], _select_max(builder))
    return vector.dtype(vector), codegen


@overload(lanes)
def _lanes_numba(array):
    count = _VECTOR_BYTES // (array.dtype.bitwidth // 8)
    return lambda array: count  # a compile-time constant


@overload(vload)
def _vload_numba(row, start, count, fill):
    if not _is_row(row):
        raise TypingError(f"vload needs a contiguous 1-D float32/float64 array, got {row}")
    if fill != row.dtype:
        raise TypingError(f"vload fill must be {row.dtype}, got {fill}")
    return lambda row, start, count, fill: _vload_ir(row, start, count, fill)


@overload(vstore)
def _vstore_numba(row, start, count, vector):
    if not _is_row(row) or not isinstance(vector, VectorType) or vector.dtype != row.dtype:
        raise TypingError(f"vstore needs a contiguous 1-D array and a vector of its dtype, got {row}, {vector}")
    return lambda row, start, count, vector: _vstore_ir(row, start, count, vector)


@overload(vsplat)
def _vsplat_numba(x):
    if x in (types.float32, types.float64):
        return lambda x: _vsplat_ir(x)


def _same_vectors(*args):
    return all(isinstance(a, VectorType) for a in args) and len({a.dtype for a in args}) == 1


@overload(vfma)
def _vfma_numba(acc, a, b):
    if _same_vectors(acc, a, b):
        return lambda acc, a, b: _vfma_ir(acc, a, b)


@overload(vmax)
def _vmax_numba(a, b):
    if _same_vectors(a, b):
        return lambda a, b: _vmax_ir(a, b)


@overload(vfloor)
def _vfloor_numba(a):
    if isinstance(a, VectorType):
        return lambda a: _vfloor_ir(a)


@overload(vpow2)
def _vpow2_numba(n):
    if isinstance(n, VectorType):
        return lambda n: _vpow2_ir(n)


@overload(hsum)
def _hsum_numba(vector):
    if isinstance(vector, VectorType):
        return lambda vector: _hsum_ir(vector)


@overload(hmax)
def _hmax_numba(vector):
    if isinstance(vector, VectorType):
        return lambda vector: _hmax_ir(vector)


def _install_vector_operator(operator_function, emit):
    """Make ``+``, ``-``, ``*`` work on vectors, and on a vector with a scalar of
    the same dtype (a scalar of another dtype is a typing error: no silent upcast)."""
    @intrinsic
    def lanewise(typingctx, a, b):
        def codegen(context, builder, signature, args):
            return emit(builder)(*args)
        return a(a, b), codegen

    @overload(operator_function)
    def vector_operator(a, b):
        if _same_vectors(a, b):
            return lambda a, b: lanewise(a, b)
        if isinstance(a, VectorType) and b == a.dtype:
            return lambda a, b: lanewise(a, _vsplat_ir(b))
        if isinstance(b, VectorType) and a == b.dtype:
            return lambda a, b: lanewise(_vsplat_ir(a), b)


_install_vector_operator(operator.add, lambda builder: builder.fadd)
_install_vector_operator(operator.sub, lambda builder: builder.fsub)
_install_vector_operator(operator.mul, lambda builder: builder.fmul)


# exp on vectors. Numba has no vectorised libm here (no SVML), so np.exp in a
# kernel is one scalar call per element; this is the classic range reduction
# exp(t) = 2**n * exp(r), n = round(t / ln 2), |r| <= ln(2)/2, with a
# polynomial for exp(r). Only needed for t <= 0 (after subtracting a row max),
# so no overflow handling. Results below ~1e-38 (float32) / ~1e-308 (float64)
# are flushed to 0; -inf gives 0; NaN stays NaN.
def _exp_nonpositive_f32(t):
    f = np.float32
    t = vmax(t, vsplat(f(-88.0)))  # exp(-88) < smallest normal float32: n = -127 -> 0
    n = vfloor(vfma(vsplat(f(0.5)), t, vsplat(f(1.44269504088896341))))  # round(t / ln 2)
    r = vfma(vfma(t, n, vsplat(f(-0.693359375))), n, vsplat(f(2.12194440e-4)))  # t - n ln 2 (Cody-Waite)
    p = vsplat(f(1.9875691500e-4))  # Cephes expf polynomial, ~1 ulp; Horner with FMAs
    for c in (f(1.3981999507e-3), f(8.3334519073e-3), f(4.1665795894e-2), f(1.6666665459e-1), f(5.0000001201e-1)):
        p = vfma(vsplat(c), p, r)
    p = vfma(r + f(1.0), p * r, r)  # 1 + r + r**2 * p
    return p * vpow2(n)


# The float64 Taylor coefficients 1/13!, 1/12!, ..., 1/0!.
_EXP_F64_COEFFS = tuple(1.0 / float(np.prod(np.arange(1, k + 1, dtype=np.float64))) for k in range(13, -1, -1))


def _exp_nonpositive_f64(t):
    f = np.float64
    t = vmax(t, vsplat(f(-709.0)))  # n = -1023 -> 0
    n = vfloor(vfma(vsplat(f(0.5)), t, vsplat(f(1.4426950408889634))))
    r = vfma(vfma(t, n, vsplat(f(-6.93147180369123816490e-01))), n, vsplat(f(-1.90821492927058770002e-10)))
    p = vsplat(f(_EXP_F64_COEFFS[0]))  # Taylor series to r**13: truncation error < 1e-17 for |r| < 0.35
    for c in _EXP_F64_COEFFS[1:]:
        p = vfma(vsplat(f(c)), p, r)
    return p * vpow2(n)


def _exp_nonpositive(t):
    """exp(t) lane by lane for t <= 0 (see above)."""
    return _exp_nonpositive_f32(t) if t.dtype == np.float32 else _exp_nonpositive_f64(t)


@overload(_exp_nonpositive)
def _exp_nonpositive_numba(t):
    if isinstance(t, VectorType):
        return _exp_nonpositive_f32 if t.dtype == types.float32 else _exp_nonpositive_f64


@_jit()
def _exp_nonpositive_kernel(x, out):
    """out = exp(x) for a 1-D array of x <= 0: the vector exp on a whole array (for the tests)."""
    width = x.shape[0]
    for j in range(0, width, lanes(x)):
        vstore(out, j, width - j, _exp_nonpositive(vload(x, j, width - j, x.dtype.type(0))))


# ---------------------------------------------------------------------------
# 4a. matmul
# ---------------------------------------------------------------------------
def matmul_numpy(a, b):
    """The twin: ``np.matmul`` (BLAS)."""
    return np.matmul(a, b)


# The tiles: C[rows, j0:j0+w] = A[rows, :] @ B[:, j0:j0+w] for 4 rows and
# w = 3, 2 or 1 vectors of columns (or 8 rows and 1 vector), accumulated in
# 12, 8, 4 (or 8) registers while k runs. Each k step loads a piece of row k
# of B and broadcasts one element of A per row: this keeps the loads few and
# the inner loop free of memory writes. Row indices past the end repeat the
# last row (the same value is stored twice); columns past the end are masked.
@_jit()
def _tile_4x3(A, B, C, i0, i1, i2, i3, j0):
    step = lanes(C)
    n0 = C.shape[1] - j0  # how many columns are left: vload/vstore clip to the lane count
    n1, n2 = n0 - step, n0 - 2 * step
    zero = C.dtype.type(0)
    c00 = c01 = c02 = c10 = c11 = c12 = c20 = c21 = c22 = c30 = c31 = c32 = vsplat(zero)
    for k in range(A.shape[1]):
        b_row = B[k]
        b0 = vload(b_row, j0, n0, zero)
        b1 = vload(b_row, j0 + step, n1, zero)
        b2 = vload(b_row, j0 + 2 * step, n2, zero)
        a = vsplat(A[i0, k])
        c00, c01, c02 = vfma(c00, a, b0), vfma(c01, a, b1), vfma(c02, a, b2)
        a = vsplat(A[i1, k])
        c10, c11, c12 = vfma(c10, a, b0), vfma(c11, a, b1), vfma(c12, a, b2)
        a = vsplat(A[i2, k])
        c20, c21, c22 = vfma(c20, a, b0), vfma(c21, a, b1), vfma(c22, a, b2)
        a = vsplat(A[i3, k])
        c30, c31, c32 = vfma(c30, a, b0), vfma(c31, a, b1), vfma(c32, a, b2)
    for i, v0, v1, v2 in ((i0, c00, c01, c02), (i1, c10, c11, c12), (i2, c20, c21, c22), (i3, c30, c31, c32)):
        vstore(C[i], j0, n0, v0)
        vstore(C[i], j0 + step, n1, v1)
        vstore(C[i], j0 + 2 * step, n2, v2)


@_jit()
def _tile_4x2(A, B, C, i0, i1, i2, i3, j0):
    step = lanes(C)
    n0 = C.shape[1] - j0
    n1 = n0 - step
    zero = C.dtype.type(0)
    c00 = c01 = c10 = c11 = c20 = c21 = c30 = c31 = vsplat(zero)
    for k in range(A.shape[1]):
        b_row = B[k]
        b0 = vload(b_row, j0, n0, zero)
        b1 = vload(b_row, j0 + step, n1, zero)
        a = vsplat(A[i0, k])
        c00, c01 = vfma(c00, a, b0), vfma(c01, a, b1)
        a = vsplat(A[i1, k])
        c10, c11 = vfma(c10, a, b0), vfma(c11, a, b1)
        a = vsplat(A[i2, k])
        c20, c21 = vfma(c20, a, b0), vfma(c21, a, b1)
        a = vsplat(A[i3, k])
        c30, c31 = vfma(c30, a, b0), vfma(c31, a, b1)
    for i, v0, v1 in ((i0, c00, c01), (i1, c10, c11), (i2, c20, c21), (i3, c30, c31)):
        vstore(C[i], j0, n0, v0)
        vstore(C[i], j0 + step, n1, v1)


@_jit()
def _tile_4x1(A, B, C, i0, i1, i2, i3, j0):
    n0 = C.shape[1] - j0
    zero = C.dtype.type(0)
    c0 = c1 = c2 = c3 = vsplat(zero)
    for k in range(A.shape[1]):
        b0 = vload(B[k], j0, n0, zero)
        c0 = vfma(c0, vsplat(A[i0, k]), b0)
        c1 = vfma(c1, vsplat(A[i1, k]), b0)
        c2 = vfma(c2, vsplat(A[i2, k]), b0)
        c3 = vfma(c3, vsplat(A[i3, k]), b0)
    vstore(C[i0], j0, n0, c0)
    vstore(C[i1], j0, n0, c1)
    vstore(C[i2], j0, n0, c2)
    vstore(C[i3], j0, n0, c3)


@_jit()
def _tile_8x1(A, B, C, i0):
    """Rows i0..i0+7 of C when C is at most one vector wide: 8 rows keep 8
    independent accumulators going (4 would wait on the FMA latency)."""
    last = C.shape[0] - 1
    i1, i2, i3 = min(i0 + 1, last), min(i0 + 2, last), min(i0 + 3, last)
    i4, i5, i6, i7 = min(i0 + 4, last), min(i0 + 5, last), min(i0 + 6, last), min(i0 + 7, last)
    n0 = C.shape[1]
    zero = C.dtype.type(0)
    c0 = c1 = c2 = c3 = c4 = c5 = c6 = c7 = vsplat(zero)
    for k in range(A.shape[1]):
        b0 = vload(B[k], 0, n0, zero)
        c0 = vfma(c0, vsplat(A[i0, k]), b0)
        c1 = vfma(c1, vsplat(A[i1, k]), b0)
        c2 = vfma(c2, vsplat(A[i2, k]), b0)
        c3 = vfma(c3, vsplat(A[i3, k]), b0)
        c4 = vfma(c4, vsplat(A[i4, k]), b0)
        c5 = vfma(c5, vsplat(A[i5, k]), b0)
        c6 = vfma(c6, vsplat(A[i6, k]), b0)
        c7 = vfma(c7, vsplat(A[i7, k]), b0)
    for i, v in ((i0, c0), (i1, c1), (i2, c2), (i3, c3), (i4, c4), (i5, c5), (i6, c6), (i7, c7)):
        vstore(C[i], 0, n0, v)


@_jit(forceinline=True)
def _matmul_one(A, B, C):
    """C = A @ B for one matrix; B and C have contiguous rows, A any strides."""
    M, N = C.shape
    step = lanes(C)
    if N <= step:  # one vector per row: 8 rows at a time
        for i0 in range(0, M, 8):
            _tile_8x1(A, B, C, i0)
        return
    for i0 in range(0, M, 4):
        i1, i2, i3 = min(i0 + 1, M - 1), min(i0 + 2, M - 1), min(i0 + 3, M - 1)
        j0 = 0
        while j0 < N:  # widest tile first; a tile of fewer vectors for the last columns
            if N - j0 > 2 * step:
                _tile_4x3(A, B, C, i0, i1, i2, i3, j0)
                j0 += 3 * step
            elif N - j0 > step:
                _tile_4x2(A, B, C, i0, i1, i2, i3, j0)
                j0 += 2 * step
            else:
                _tile_4x1(A, B, C, i0, i1, i2, i3, j0)
                j0 += step


# The batch loops: one for B stored as is, one for B stored transposed (the
# common case: Q @ K.swapaxes(-1, -2) and the backward's g @ B.swapaxes).
# Two small loops rather than one with a runtime flag: LLVM optimised the
# single big loop ~40% worse.
@_jit(forceinline=True)
def _item(index, p):
    """Which item of an operand's own batch output item p uses (empty index: p itself)."""
    return index[p] if index.size else p


@_jit()
def _matmul_batch(a, b, out, a_index, b_index):
    """out[p] = a[i] @ b[j] for every output item p (i, j from the index arrays)."""
    for p in range(out.shape[0]):
        _matmul_one(a[_item(a_index, p)], b[_item(b_index, p)], out[p])


@_jit()
def _matmul_batch_b_transposed(a, b_t, out, a_index, b_index):
    """Same, but b_t holds B^T (each item N x K): the tiles load rows of B, so
    each B^T is first copied into a K x N panel, small enough to stay in L1.
    (Still 1.4x faster than np.matmul, which reads B^T in place.)"""
    N, K = b_t.shape[1], b_t.shape[2]
    panel = np.empty((K, N), dtype=out.dtype)
    for p in range(out.shape[0]):
        b_item = b_t[_item(b_index, p)]
        for j in range(N):
            for k in range(K):
                panel[k, j] = b_item[j, k]
        _matmul_one(a[_item(a_index, p)], panel, out[p])


_NUMBA_MATMUL_MAX_DIM = 32  # largest M, K or N for the Numba kernel (measured: 0.8-1.0x of BLAS at 64)


def _use_numba_matmul(a, b):
    """THE dispatch rule: Numba kernel or BLAS (np.matmul) for ``a @ b``?

    Numba: a batch of small matrices where both sides bring their own batch
    (attention's Q @ K^T, and g @ V^T in the backward), because numpy then
    calls BLAS once per tiny matrix. BLAS everywhere else, each case measured
    (examples/benchmark_kernels.py, AVX-512 Xeon, float32):
      * 2-D products, and a batch times one shared 2-D weight (``matmul``
        folds that into a single 2-D BLAS call);
      * any of M, K, N above _NUMBA_MATMUL_MAX_DIM;
      * output rows that fit one vector register (N <= 16 float32 with
        AVX-512): BLAS's small-matrix kernel is as fast (kernel 0.9x);
      * A given as a transposed view (the backward's A^T @ g): BLAS reads it
        in place through its transpose flag (kernel 0.75x).
    """
    if a.ndim < 3 or b.ndim < 3:
        return False
    M, K, N, limit = a.shape[-2], a.shape[-1], b.shape[-1], _NUMBA_MATMUL_MAX_DIM
    if M > limit or K > limit or N > limit or K != b.shape[-2]:  # (a K mismatch: np.matmul raises)
        return False
    if a.dtype != b.dtype or a.dtype.char not in "fd":  # float32 / float64
        return False
    if N <= _VECTOR_BYTES // a.itemsize:
        return False
    return a.flags.c_contiguous or not a.swapaxes(-1, -2).flags.c_contiguous


def _contiguous_or_transposed(x):
    """(array, transposed): the C-contiguous array to hand a kernel for ``x``.

    A ``swapaxes(-1, -2)`` view of a contiguous array is passed as that array
    plus transposed=True (no copy); any other layout is copied."""
    if x.flags.c_contiguous:
        return x, False
    swapped = x.swapaxes(-1, -2)
    if swapped.flags.c_contiguous:
        return swapped, True
    return np.ascontiguousarray(x), False


_SAME_BATCH = np.empty(0, dtype=np.int64)  # index array meaning "no broadcasting on this side"


def _batch_index(batch_shape, out_batch_shape):
    """For each output batch item (flattened), which item of this operand's own batch it uses."""
    if batch_shape == out_batch_shape:
        return _SAME_BATCH
    own = np.arange(math.prod(batch_shape), dtype=np.int64).reshape(batch_shape)
    return np.broadcast_to(own, out_batch_shape).flatten()  # a fresh writeable array: one Numba signature


def matmul(a, b):
    """``a @ b`` for arrays with ndim >= 2 (batch dims broadcast like np.matmul)."""
    if _backend == "numpy":
        return matmul_numpy(a, b)
    if not _use_numba_matmul(a, b):
        if b.ndim == 2 and a.ndim > 2 and a.dtype == b.dtype and a.shape[-1] == b.shape[0]:
            # one shared weight: fold the batch into the rows, one BLAS call
            rows = a.reshape(-1, a.shape[-1])
            return np.matmul(rows, b).reshape(a.shape[:-1] + (b.shape[-1],))
        return np.matmul(a, b)
    a_batch, b_batch = a.shape[:-2], b.shape[:-2]
    out_batch = a_batch if a_batch == b_batch else np.broadcast_shapes(a_batch, b_batch)
    a = np.ascontiguousarray(a)
    b_array, b_transposed = _contiguous_or_transposed(b)
    kernel = _matmul_batch_b_transposed if b_transposed else _matmul_batch
    out = np.empty(out_batch + (a.shape[-2], b.shape[-1]), dtype=a.dtype)
    kernel(a.reshape((math.prod(a_batch),) + a.shape[-2:]),
           b_array.reshape((math.prod(b_batch),) + b_array.shape[-2:]),
           out.reshape((math.prod(out_batch),) + out.shape[-2:]),
           _batch_index(a_batch, out_batch), _batch_index(b_batch, out_batch))
    return out


# ---------------------------------------------------------------------------
# 4b. softmax and log-softmax over the last axis
# ---------------------------------------------------------------------------
def softmax_numpy(x):
    """exp(x - max) / sum(exp(x - max)); a row of all -inf gives zeros."""
    m = np.max(x, axis=-1, keepdims=True)
    m = np.where(np.isneginf(m), 0, m)  # masked row: -inf - (-inf) would be NaN
    e = np.exp(x - m)
    s = np.sum(e, axis=-1, keepdims=True)
    return e / np.where(s == 0, 1, s)  # masked row: 0 / 1


def softmax_backward_numpy(y, grad):
    """dx = y * (grad - sum(grad * y)) per row: O(W), no Jacobian."""
    return y * (grad - np.sum(grad * y, axis=-1, keepdims=True))


def log_softmax_numpy(x):
    """x - max - log(sum(exp(x - max))); a row of all -inf stays all -inf."""
    m = np.max(x, axis=-1, keepdims=True)
    masked = np.isneginf(m)
    m = np.where(masked, 0, m)
    s = np.sum(np.exp(x - m), axis=-1, keepdims=True)
    log_sum = m + np.log(np.where(masked, 1, s))  # masked row: lse 0, so x - lse = -inf
    return x - log_sum


def log_softmax_backward_numpy(y, grad):
    """dx = grad - exp(y) * sum(grad); zeros for a fully masked row."""
    dx = grad - np.exp(y) * np.sum(grad, axis=-1, keepdims=True)
    fully_masked = np.all(np.isneginf(y), axis=-1, keepdims=True)
    return np.where(fully_masked, 0, dx)


# Rows of at most two vectors (attention: 20 keys) are done in registers:
# load once, max, exp, sum, scale, store. Longer rows take three passes over
# memory. The short path halves the instructions per row for the attention shape.
@_jit(forceinline=True)
def _softmax_short_row(row, y):
    step, width = lanes(row), row.shape[0]
    minus_inf = row.dtype.type(-np.inf)
    low, high = vload(row, 0, width, minus_inf), vload(row, step, width - step, minus_inf)
    row_max = hmax(vmax(low, high))
    if row_max == minus_inf:  # fully masked row
        zeros = vsplat(row.dtype.type(0))
        vstore(y, 0, width, zeros)
        vstore(y, step, width - step, zeros)
        return
    e_low = _exp_nonpositive(low - row_max)  # padding lanes: exp(-inf) = 0
    e_high = _exp_nonpositive(high - row_max)
    scale = row.dtype.type(1) / hsum(e_low + e_high)
    vstore(y, 0, width, e_low * scale)
    vstore(y, step, width - step, e_high * scale)


@_jit(forceinline=True)
def _softmax_long_row(row, y):
    step, width = lanes(row), row.shape[0]
    zero, minus_inf = row.dtype.type(0), row.dtype.type(-np.inf)
    peak = vsplat(minus_inf)
    for j in range(0, width, step):
        peak = vmax(peak, vload(row, j, width - j, minus_inf))
    row_max = hmax(peak)
    if row_max == minus_inf:  # fully masked row
        for j in range(0, width, step):
            vstore(y, j, width - j, vsplat(zero))
        return
    total = vsplat(zero)
    for j in range(0, width, step):
        e = _exp_nonpositive(vload(row, j, width - j, minus_inf) - row_max)
        vstore(y, j, width - j, e)
        total = total + e
    scale = row.dtype.type(1) / hsum(total)
    for j in range(0, width, step):
        vstore(y, j, width - j, vload(y, j, width - j, zero) * scale)


@_jit()
def _softmax_kernel(x, out):
    if x.shape[1] <= 2 * lanes(x):
        for r in range(x.shape[0]):
            _softmax_short_row(x[r], out[r])
    else:
        for r in range(x.shape[0]):
            _softmax_long_row(x[r], out[r])


@_jit()
def _softmax_backward_kernel(y, grad, out):
    zero = y.dtype.type(0)
    step = lanes(y)
    for r in range(y.shape[0]):
        y_row, g_row, dx = y[r], grad[r], out[r]
        width = y_row.shape[0]
        dot = vsplat(zero)
        for j in range(0, width, step):
            dot = vfma(dot, vload(y_row, j, width - j, zero), vload(g_row, j, width - j, zero))
        s = hsum(dot)
        for j in range(0, width, step):
            y_part = vload(y_row, j, width - j, zero)
            vstore(dx, j, width - j, y_part * (vload(g_row, j, width - j, zero) - s))


@_jit(forceinline=True)
def _log_softmax_short_row(row, y):
    step, width = lanes(row), row.shape[0]
    minus_inf = row.dtype.type(-np.inf)
    low, high = vload(row, 0, width, minus_inf), vload(row, step, width - step, minus_inf)
    row_max = hmax(vmax(low, high))
    if row_max == minus_inf:  # fully masked row stays -inf
        vstore(y, 0, width, low)
        vstore(y, step, width - step, high)
        return
    total = _exp_nonpositive(low - row_max) + _exp_nonpositive(high - row_max)
    log_sum = row_max + np.log(hsum(total))
    vstore(y, 0, width, low - log_sum)
    vstore(y, step, width - step, high - log_sum)


@_jit(forceinline=True)
def _log_softmax_long_row(row, y):
    step, width = lanes(row), row.shape[0]
    zero, minus_inf = row.dtype.type(0), row.dtype.type(-np.inf)
    peak = vsplat(minus_inf)
    for j in range(0, width, step):
        peak = vmax(peak, vload(row, j, width - j, minus_inf))
    row_max = hmax(peak)
    if row_max == minus_inf:  # fully masked row stays -inf
        for j in range(0, width, step):
            vstore(y, j, width - j, peak)
        return
    total = vsplat(zero)
    for j in range(0, width, step):
        total = total + _exp_nonpositive(vload(row, j, width - j, minus_inf) - row_max)
    log_sum = row_max + np.log(hsum(total))
    for j in range(0, width, step):
        vstore(y, j, width - j, vload(row, j, width - j, zero) - log_sum)


@_jit()
def _log_softmax_kernel(x, out):
    if x.shape[1] <= 2 * lanes(x):
        for r in range(x.shape[0]):
            _log_softmax_short_row(x[r], out[r])
    else:
        for r in range(x.shape[0]):
            _log_softmax_long_row(x[r], out[r])


@_jit()
def _log_softmax_backward_kernel(y, grad, out):
    zero, minus_inf = y.dtype.type(0), y.dtype.type(-np.inf)
    step = lanes(y)
    for r in range(y.shape[0]):
        y_row, g_row, dx = y[r], grad[r], out[r]
        width = y_row.shape[0]
        peak = vsplat(minus_inf)
        g_total = vsplat(zero)
        for j in range(0, width, step):
            peak = vmax(peak, vload(y_row, j, width - j, minus_inf))
            g_total = g_total + vload(g_row, j, width - j, zero)
        if hmax(peak) == minus_inf:  # fully masked row: no gradient
            for j in range(0, width, step):
                vstore(dx, j, width - j, vsplat(zero))
            continue
        g_sum = hsum(g_total)
        for j in range(0, width, step):
            p = _exp_nonpositive(vload(y_row, j, width - j, minus_inf))
            vstore(dx, j, width - j, vload(g_row, j, width - j, zero) - p * g_sum)


def _rows(x):
    """x as a C-contiguous 2-D (rows, last axis) array (a view when possible)."""
    return np.ascontiguousarray(x).reshape(-1, x.shape[-1])


def _kernel_fits(*arrays):
    """Can the row kernels take these arrays? float32/float64 of one dtype, equal
    shapes, at least 1-D and not empty; anything else goes to the numpy twin."""
    first = arrays[0]
    return (first.dtype in (np.float32, np.float64) and first.ndim > 0 and first.size > 0
            and all(a.dtype == first.dtype and a.shape == first.shape for a in arrays))


def _rowwise(kernel, *arrays):
    """Run a row kernel over the last axis of arrays of equal shape; returns a new array."""
    rows = [_rows(a) for a in arrays]
    out = np.empty(rows[0].shape, dtype=arrays[0].dtype)
    kernel(*rows, out)
    return out.reshape(arrays[0].shape)


def softmax(x):
    """Softmax over the last axis."""
    if _backend == "numpy" or not _kernel_fits(x):
        return softmax_numpy(x)
    return _rowwise(_softmax_kernel, x)


def softmax_backward(y, grad):
    """Gradient of softmax: y is the forward output, grad the output gradient."""
    if _backend == "numpy" or not _kernel_fits(y, grad):
        return softmax_backward_numpy(y, grad)
    return _rowwise(_softmax_backward_kernel, y, grad)


def log_softmax(x):
    """Log-softmax over the last axis, computed directly (never log(softmax))."""
    if _backend == "numpy" or not _kernel_fits(x):
        return log_softmax_numpy(x)
    return _rowwise(_log_softmax_kernel, x)


def log_softmax_backward(y, grad):
    """Gradient of log-softmax: y is the forward output, grad the output gradient."""
    if _backend == "numpy" or not _kernel_fits(y, grad):
        return log_softmax_backward_numpy(y, grad)
    return _rowwise(_log_softmax_backward_kernel, y, grad)


# ---------------------------------------------------------------------------
# 4c. layer norm over the last axis
# ---------------------------------------------------------------------------
def layer_norm_numpy(x, weight, bias, eps):
    """y = (x - mean) * rstd * weight + bias, rstd = 1/sqrt(var + eps); returns (y, mean, rstd)."""
    eps = x.dtype.type(eps)
    mean = np.mean(x, axis=-1)
    centered = x - mean[..., None]
    rstd = 1 / np.sqrt(np.mean(centered * centered, axis=-1) + eps)
    return centered * rstd[..., None] * weight + bias, mean, rstd


def layer_norm_backward_numpy(grad, x, weight, mean, rstd):
    """(dx, dweight, dbias) for layer_norm_numpy."""
    x_hat = (x - mean[..., None]) * rstd[..., None]
    g = grad * weight
    dx = rstd[..., None] * (g - np.mean(g, axis=-1, keepdims=True)
                            - x_hat * np.mean(g * x_hat, axis=-1, keepdims=True))
    leading = tuple(range(x.ndim - 1))
    return dx, np.sum(grad * x_hat, axis=leading), np.sum(grad, axis=leading)


@_jit()
def _layer_norm_kernel(x, weight, bias, eps, out, mean_out, rstd_out):
    zero = x.dtype.type(0)
    width = x.shape[1]
    step = lanes(weight)
    inverse_width = x.dtype.type(1) / x.dtype.type(width)
    for r in range(x.shape[0]):
        row, y = x[r], out[r]
        total = vsplat(zero)
        for j in range(0, width, step):
            total = total + vload(row, j, width - j, zero)
        mean = hsum(total) * inverse_width
        squares = vsplat(zero)
        for j in range(0, width, step):
            d = vload(row, j, width - j, mean) - mean  # padding lanes hold mean: d = 0
            squares = vfma(squares, d, d)
        rstd = x.dtype.type(1) / np.sqrt(hsum(squares) * inverse_width + eps)
        for j in range(0, width, step):
            x_hat = (vload(row, j, width - j, zero) - mean) * rstd
            vstore(y, j, width - j, vfma(vload(bias, j, width - j, zero), x_hat, vload(weight, j, width - j, zero)))
        mean_out[r] = mean
        rstd_out[r] = rstd


@_jit()
def _layer_norm_backward_kernel(grad, x, weight, mean, rstd, dx, dweight, dbias):
    zero = x.dtype.type(0)
    width = x.shape[1]
    step = lanes(weight)
    inverse_width = x.dtype.type(1) / x.dtype.type(width)
    dweight[:] = zero
    dbias[:] = zero
    for r in range(x.shape[0]):
        x_row, g_row, dx_row = x[r], grad[r], dx[r]
        m, s = mean[r], rstd[r]
        g_sum = vsplat(zero)
        g_xhat_sum = vsplat(zero)
        for j in range(0, width, step):
            n = width - j
            g = vload(g_row, j, n, zero)
            x_hat = (vload(x_row, j, n, zero) - m) * s
            gw = g * vload(weight, j, n, zero)
            g_sum = g_sum + gw
            g_xhat_sum = vfma(g_xhat_sum, gw, x_hat)
            vstore(dweight, j, n, vfma(vload(dweight, j, n, zero), g, x_hat))
            vstore(dbias, j, n, vload(dbias, j, n, zero) + g)
        g_mean = hsum(g_sum) * inverse_width
        g_xhat_mean = hsum(g_xhat_sum) * inverse_width
        for j in range(0, width, step):
            n = width - j
            x_hat = (vload(x_row, j, n, zero) - m) * s
            gw = vload(g_row, j, n, zero) * vload(weight, j, n, zero)
            vstore(dx_row, j, n, (gw - g_mean - x_hat * g_xhat_mean) * s)


def layer_norm(x, weight, bias, eps):
    """Layer norm over the last axis; returns (y, mean, rstd), mean/rstd shaped x.shape[:-1]."""
    if (_backend == "numpy" or not _kernel_fits(x) or not _kernel_fits(weight, bias)
            or weight.dtype != x.dtype or weight.shape != x.shape[-1:]):
        return layer_norm_numpy(x, weight, bias, eps)
    rows = _rows(x)
    y = np.empty(rows.shape, dtype=x.dtype)
    mean = np.empty(rows.shape[0], dtype=x.dtype)
    rstd = np.empty(rows.shape[0], dtype=x.dtype)
    _layer_norm_kernel(rows, np.ascontiguousarray(weight), np.ascontiguousarray(bias), x.dtype.type(eps), y, mean, rstd)
    return y.reshape(x.shape), mean.reshape(x.shape[:-1]), rstd.reshape(x.shape[:-1])


def layer_norm_backward(grad, x, weight, mean, rstd):
    """(dx, dweight, dbias) of layer_norm, from its saved mean and rstd."""
    if (_backend == "numpy" or not _kernel_fits(grad, x) or not _kernel_fits(mean, rstd)
            or weight.dtype != x.dtype or weight.shape != x.shape[-1:]
            or mean.dtype != x.dtype or mean.shape != x.shape[:-1]):
        return layer_norm_backward_numpy(grad, x, weight, mean, rstd)
    rows = _rows(x)
    dx = np.empty(rows.shape, dtype=x.dtype)
    dweight = np.empty(x.shape[-1], dtype=x.dtype)
    dbias = np.empty(x.shape[-1], dtype=x.dtype)
    _layer_norm_backward_kernel(_rows(grad), rows, np.ascontiguousarray(weight),
                                np.ascontiguousarray(mean).reshape(-1), np.ascontiguousarray(rstd).reshape(-1),
                                dx, dweight, dbias)
    return dx.reshape(x.shape), dweight, dbias


# ---------------------------------------------------------------------------
# 4d. the Adam update, one pass per parameter
# ---------------------------------------------------------------------------
def adam_update_numpy(param, grad, m, v, beta1, beta2, step_size, eps_hat, weight_decay):
    """In place: m, v <- moving averages of grad and grad²; param -= step_size * m / (sqrt(v) + eps_hat).

    ``step_size`` and ``eps_hat`` already hold Adam's bias corrections.
    """
    if weight_decay:
        grad = grad + weight_decay * param
    m *= beta1
    m += (1 - beta1) * grad
    v *= beta2
    v += (1 - beta2) * grad * grad
    param -= step_size * m / (np.sqrt(v) + eps_hat)


@_jit()
def _adam_kernel(param, grad, m, v, beta1, beta2, step_size, eps_hat, weight_decay):
    one = param.dtype.type(1)
    for i in range(param.shape[0]):
        g = grad[i] + weight_decay * param[i]
        m[i] = beta1 * m[i] + (one - beta1) * g
        v[i] = beta2 * v[i] + (one - beta2) * g * g
        param[i] -= step_size * m[i] / (np.sqrt(v[i]) + eps_hat)


def adam_update(param, grad, m, v, beta1, beta2, step_size, eps_hat, weight_decay=0.0):
    """Adam's update of one parameter, in place (the numpy twin takes ~10 passes and temporaries)."""
    arrays = (param, grad, m, v)
    if _backend == "numpy" or not all(a.flags.c_contiguous and a.dtype == param.dtype for a in arrays) \
            or param.dtype not in (np.float32, np.float64):
        return adam_update_numpy(param, grad, m, v, beta1, beta2, step_size, eps_hat, weight_decay)
    scalar = param.dtype.type
    _adam_kernel(param.reshape(-1), grad.reshape(-1), m.reshape(-1), v.reshape(-1), scalar(beta1),
                 scalar(beta2), scalar(step_size), scalar(eps_hat), scalar(weight_decay))
