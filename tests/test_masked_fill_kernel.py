"""kernels.masked_fill (a * keep + fill) against its numpy twin np.where, and the op's gradient."""
import numpy as np
import pytest

from minigrad import Tensor, kernels
from minigrad.ops import select as Sel


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("special", [None, np.inf, -np.inf, np.nan])
def test_masked_fill_matches_np_where_with_a_broadcast_mask(dtype, special):
    rng = np.random.default_rng(0)
    scores = rng.standard_normal((3, 4, 5, 6)).astype(dtype)
    if special is not None:
        scores[1, 2, 3, 4] = special
        scores[0, 0, 0, 0] = special
    mask = rng.random((3, 1, 1, 6)) < 0.4                    # padding mask over (B, h, T, S)
    expected = np.where(mask, dtype(-np.inf), scores)
    for backend in kernels.BACKENDS:
        with kernels.use_backend(backend):
            got = Sel.masked_fill(scores, mask, -np.inf)
        assert got.dtype == dtype
        np.testing.assert_array_equal(got, expected, err_msg=backend)


def test_masked_fill_gradient_is_zero_where_filled_even_for_a_nan_gradient():
    x = Tensor(np.ones((2, 3)), requires_grad=True)
    mask = np.array([[True, False, False], [False, False, True]])
    y = x.masked_fill(mask, 5.0)
    y.backward(np.array([[np.nan, 1.0, 2.0], [3.0, 4.0, np.nan]]))
    np.testing.assert_array_equal(x.grad, [[0.0, 1.0, 2.0], [3.0, 4.0, 0.0]])   # PyTorch: g.masked_fill(mask, 0)
