"""A tiny SIMD vocabulary for Numba kernels, and a vector exp built from it.

A "vector" is one register: 8 float32 / 4 float64 lanes with AVX2, 16 / 8 with AVX-512.
The model's rows are short (12-19 attention positions, 16 features per head) and Numba's
auto-vectoriser leaves such loops scalar; ``vload(row, j, n, fill)`` reads ``row[j:j+n]``
as one vector (lanes past n hold ``fill``), so a row of 19 is three vector steps.
Each helper is a plain Python function on small arrays: what it means, and what runs under
``NUMBA_DISABLE_JIT=1``. ``simd_codegen.py`` (skip it) tells Numba how to compile them; ``jit.py`` loads it.
"""
import os

import numba
import numpy as np


def _vector_bytes():
    """Bytes per vector: 64 where Numba compiles for AVX-512, else 32 (AVX2, as on most CPUs).
    ``MINIGRAD_VECTOR_BYTES=16``, 32 or 64 forces a width, for experiments."""
    if os.environ.get("MINIGRAD_VECTOR_BYTES") in ("16", "32", "64"):
        return int(os.environ["MINIGRAD_VECTOR_BYTES"])
    features = numba.config.CPU_FEATURES
    if features is None:
        if numba.config.CPU_NAME not in (None, "host"):  # a portable target such as "generic"
            return 32
        import llvmlite.binding
        features = llvmlite.binding.get_host_cpu_features().flatten()
    return 64 if "+avx512f" in features.split(",") else 32


VECTOR_BYTES = _vector_bytes()


def lanes(array):
    """How many elements of ``array``'s dtype fit in one vector (float32: 8 with AVX2, 16 with AVX-512)."""
    return VECTOR_BYTES // array.itemsize


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


def vbroadcast(row, index):
    """``vsplat(row[index])`` for ``index >= 0``: compiled, one broadcast load that folds into
    the FMA using it (``row[index]`` carries a negative-index check that prevents that)."""
    return vsplat(row[index])


def flat(array):
    """A C-contiguous array's elements as a 1-D view, for kernels that address matrices by
    element offsets (compiled: a borrowed view, cheaper than ``reshape(-1)``)."""
    return array.reshape(-1)


def vsplat(x):
    """A vector with every lane equal to the scalar ``x``."""
    return np.full(VECTOR_BYTES // np.dtype(type(x)).itemsize, x)


def vfma(acc, a, b):
    """``acc + a * b`` lane by lane (one fused multiply-add where the CPU has it)."""
    return acc + a * b


def vmax(a, b):
    """Lane-wise maximum; a NaN in ``a`` is kept (``b if a < b else a``)."""
    return np.where(a < b, b, a)


def vfloor(a):
    return np.floor(a)


def vpow2(n):
    """2**n for whole numbers n, from the exponent bits. n is clipped to the exponent range
    (NaN counts as 0); its bottom (-127 / -1023) has all exponent bits 0, so gives 0."""
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


# exp on vectors. Numba has no vectorised libm here (no SVML), so np.exp in a
# kernel is one scalar call per element; this is the classic range reduction
# exp(t) = 2**n * exp(r), n = round(t / ln 2), |r| <= ln(2)/2, with a
# polynomial for exp(r). Only needed for t <= 0 (after subtracting a row max),
# so no overflow handling. Results below ~1e-38 (float32) / ~1e-308 (float64)
# are flushed to 0; -inf gives 0; NaN stays NaN.
def exp_nonpositive_f32(t):
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


def exp_nonpositive_f64(t):
    f = np.float64
    t = vmax(t, vsplat(f(-709.0)))  # n = -1023 -> 0
    n = vfloor(vfma(vsplat(f(0.5)), t, vsplat(f(1.4426950408889634))))
    r = vfma(vfma(t, n, vsplat(f(-6.93147180369123816490e-01))), n, vsplat(f(-1.90821492927058770002e-10)))
    p = vsplat(f(_EXP_F64_COEFFS[0]))  # Taylor series to r**13: truncation error < 1e-17 for |r| < 0.35
    for c in _EXP_F64_COEFFS[1:]:
        p = vfma(vsplat(f(c)), p, r)
    return p * vpow2(n)


def exp_nonpositive(t):
    """exp(t) lane by lane for t <= 0 (see above)."""
    return exp_nonpositive_f32(t) if t.dtype == np.float32 else exp_nonpositive_f64(t)

