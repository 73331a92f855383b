"""The benchmark's memory floor must really move every byte, or its "most any
kernel could reach" figure would be too optimistic."""
import importlib.util
import os
import sys

import numpy as np
import pytest

from minigrad.kernels import lanes

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def benchmark_kernels():
    spec = importlib.util.spec_from_file_location("benchmark_kernels",
                                                  os.path.join(REPO, "examples", "benchmark_kernels.py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules["benchmark_kernels"] = module  # (Numba's cache finds a kernel's module by name)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("a_shape, b_shape", [((7, 20, 20), (7, 20, 16)), ((5, 20, 16), (5, 16, 20)),
                                              ((3, 3, 5), (3, 5, 7))])
def test_move_bytes_reads_every_input_and_writes_every_output(benchmark_kernels, dtype, a_shape, b_shape):
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal(a_shape).astype(dtype), rng.standard_normal(b_shape).astype(dtype)
    out = np.full(a_shape[:-1] + b_shape[-1:], np.nan, dtype=dtype)
    benchmark_kernels._move_bytes(a, b, out)
    assert not np.isnan(out).any()  # every element of C written
    # Each output vector holds the lane-wise sum of the matrix's A and B, so
    # the lanes of the first one add up to the sum of every element read.
    step = lanes(out)
    first_vector = out.reshape(len(out), -1)[:, :step]
    assert first_vector.shape[1] == step  # (every case here has at least one full vector of C)
    np.testing.assert_allclose(first_vector.sum(axis=1), a.sum(axis=(1, 2)) + b.sum(axis=(1, 2)), rtol=1e-4, atol=1e-4)

def test_memory_floor_rows_report_the_attention_shapes(benchmark_kernels):
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((8, 20, 20)).astype(np.float32), rng.standard_normal((8, 20, 16)).astype(np.float32)
    (row,) = benchmark_kernels.memory_floor_rows(4, [("(8,20,20)@(8,20,16) P@V", a, b)])
    assert row["name"] == "(8,20,20)@(8,20,16) memory floor (no arithmetic)"
    assert row["path"] == "floor" and row["kernel"]["median_us"] > 0 and row["speedup"] > 0
