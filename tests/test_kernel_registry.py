"""Every registered kernel against its op's numpy function, found through the registry (so a
new kernel is tested without being listed here): odd shapes, float32 and float64, and inputs
with a row of -inf and a row holding a NaN. Then the registry's one fallback rule."""
import copy
import warnings

import numpy as np
import pytest

from minigrad import kernels
from minigrad.kernels import registry

KERNELS = kernels.registered()
TOL = {np.float32: dict(rtol=2e-4, atol=5e-5), np.float64: dict(rtol=1e-10, atol=1e-11)}


def with_special_rows(args):
    """args with, in the first float array of at least 2 dimensions, row 0 all -inf and a NaN in row 1."""
    args = copy.deepcopy(args)
    for a in args:
        if isinstance(a, np.ndarray) and a.dtype.kind == "f" and a.ndim >= 2:
            rows = a.reshape(-1, a.shape[-1])
            rows[0] = -np.inf
            rows[1, rows.shape[1] // 2] = np.nan
            return args
    return None


def arrays_of(result, args):
    """What a call produced: its result's arrays, then its arguments (in-place kernels write there)."""
    out = result if isinstance(result, tuple) else (result,)
    return [np.asarray(x) for x in out + tuple(args) if isinstance(x, np.ndarray)]


def assert_same(got, want, dtype):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_array_equal(np.isnan(g), np.isnan(w))
        np.testing.assert_array_equal(np.isinf(g), np.isinf(w))
        np.testing.assert_allclose(g, w, equal_nan=True, **TOL[dtype])


def run_both(kernel, args):
    """(kernel's arrays, numpy function's arrays), each from its own copy of args."""
    ours, theirs = copy.deepcopy(args), copy.deepcopy(args)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = arrays_of(kernel.run(*ours), ours)
        want = arrays_of(kernel.op.numpy(*theirs), theirs)
    return got, want


def test_the_model_kernels_are_registered():
    names = {k.name for k in KERNELS}
    assert {"softmax", "softmax_backward", "log_softmax", "layer_norm", "layer_norm_backward", "attention",
            "attention_backward", "relu", "relu_backward", "adam_update", "matmul_arrays"} <= names


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kernel", KERNELS, ids=lambda k: k.name)
def test_every_kernel_equals_its_numpy_function(kernel, dtype):
    args = kernel.example(np.random.default_rng(3), np.dtype(dtype), "small")
    assert kernel.fits(*args), f"{kernel}: its own example does not fit it"
    got, want = run_both(kernel, args)
    assert_same(got, want, dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kernel", KERNELS, ids=lambda k: k.name)
def test_every_kernel_equals_its_numpy_function_on_nan_and_minus_inf_rows(kernel, dtype):
    args = with_special_rows(kernel.example(np.random.default_rng(4), np.dtype(dtype), "small"))
    if args is None or not kernel.fits(*args):
        pytest.skip(f"{kernel.name} takes no such rows (the numpy function runs for them)")
    got, want = run_both(kernel, args)
    assert_same(got, want, dtype)


@pytest.mark.parametrize("kernel", KERNELS, ids=lambda k: k.name)
def test_the_op_function_runs_the_kernel_only_on_the_numba_backend(kernel, monkeypatch):
    """The one fallback rule: kernel when the Numba backend is on, its verdict says it pays and fits() says yes."""
    calls = []
    monkeypatch.setattr(kernel, "run", lambda *args: calls.append("kernel"))
    monkeypatch.setattr(kernel.op, "numpy", lambda *args: calls.append("numpy"))
    args = kernel.example(np.random.default_rng(5), np.dtype(np.float64), "small")
    monkeypatch.setattr(kernel, "pays", True)
    with kernels.use_backend("numba"):
        kernel.op(*args)
    with kernels.use_backend("numpy"):
        kernel.op(*args)
    monkeypatch.setattr(kernel, "pays", False)
    with kernels.use_backend("numba"):
        kernel.op(*args)
    monkeypatch.setattr(kernel, "pays", True)
    monkeypatch.setattr(kernel, "fits", lambda *args: False)
    with kernels.use_backend("numba"):
        kernel.op(*args)
    assert calls == ["kernel", "numpy", "numpy", "numpy"]


def test_kernel_for_needs_an_accelerated_function_and_one_kernel_each():
    def plain(x):
        return x

    with pytest.raises(TypeError, match="not an @accelerated numpy function"):
        kernels.kernel_for(plain, fits=lambda x: True, example=None)(plain)
    op = kernels.accelerated(plain)
    kernels.kernel_for(op, fits=lambda x: True, example=None)(lambda x: x)
    try:
        with pytest.raises(ValueError, match="already has a kernel"):
            kernels.kernel_for(op, fits=lambda x: True, example=None)(lambda x: x)
        with pytest.raises(ValueError, match="stage must be"):
            registry.Kernel(op, plain, None, None, "backward", ())
    finally:
        registry.unregister(op)
    assert op.kernel is None and all(k.op is not op for k in kernels.registered())
