"""An integer or bool result cuts the graph, as in PyTorch: it does not require
grad, so no gradient flows back through it."""
import numpy as np
import pytest

import minigrad as mg
from minigrad import Tensor


def leaf(values, dtype=np.float64):
    return Tensor(np.array(values, dtype=dtype), requires_grad=True)


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.uint8, np.bool_])
def test_a_cast_to_an_integer_or_bool_dtype_does_not_require_grad(dtype):
    a = leaf([1.5, 2.5])
    cast = a.astype(dtype)
    assert cast.dtype == dtype and not cast.requires_grad and cast.grad_fn is None


def test_backward_through_an_integer_cast_raises_and_leaves_no_gradient():
    a = leaf([1.5, 2.5])
    y = (a.astype(np.int64) * 2.0).sum()
    assert not y.requires_grad
    with pytest.raises(RuntimeError, match="does not require grad"):
        y.backward()
    assert a.grad is None


def test_backward_on_an_integer_result_says_why():
    with pytest.raises(RuntimeError, match="dtype int64: an integer or bool result does not require grad"):
        leaf([1.5, 2.5]).astype(np.int64).sum().backward()


def test_only_the_float_path_contributes_when_both_are_mixed():
    a = leaf([1.5, 2.5])
    (a * 3.0 + a.astype(np.int64)).sum().backward()
    np.testing.assert_array_equal(a.grad, [3.0, 3.0])


def test_a_cast_between_float_dtypes_keeps_the_gradient_in_the_source_dtype():
    a = leaf([1.5, 2.5])
    (a.astype(np.float32) * 2.0).sum().backward()
    assert a.grad.dtype == np.float64
    np.testing.assert_array_equal(a.grad, [2.0, 2.0])


def test_comparisons_argmax_any_all_give_results_without_gradient():
    a = leaf([1.5, -2.5, 3.0])
    results = [a > 0, a == 1.5, a.argmax(), (a > 0).any(), (a > 0).all(), a.astype(bool)]
    assert all(not r.requires_grad and r.dtype.kind in "biu" for r in results)


def test_an_integer_tensor_cannot_be_asked_to_require_grad():
    with pytest.raises(TypeError, match="only floating-point tensors can require gradients"):
        Tensor(np.array([1, 2]), requires_grad=True)


def test_inside_enable_grad_an_integer_cast_still_records_nothing():
    a = leaf([1.0])
    with mg.enable_grad():
        assert a.astype(np.int64).grad_fn is None
