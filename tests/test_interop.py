"""numpy and Python-number interop, with PyTorch as the oracle.

PyTorch: np.asarray(t) is t's array when t does not require grad and raises
("Use tensor.detach().numpy() instead") when it does; float/int/bool work on
one-element tensors, operator.index only on integer ones; np.sum(t) and
friends call the tensor's own method. Each probe of that rule is here.
"""
import operator

import numpy as np
import pytest

from minigrad import Tensor


def leaf(values):
    return Tensor(np.array(values, dtype=np.float64), requires_grad=True)


@pytest.mark.parametrize("convert", [np.asarray, np.array, np.asanyarray])
def test_asarray_of_a_plain_tensor_is_its_numeric_array(convert):
    t = Tensor([[1.0, 2.0], [3.0, 4.0]])
    a = convert(t)
    assert a.dtype == np.float32 and a.shape == (2, 2)      # never an object array of Tensors
    np.testing.assert_array_equal(a, [[1, 2], [3, 4]])


def test_asarray_shares_memory_and_array_copies_on_request():
    t = Tensor(np.arange(3.0))
    assert np.shares_memory(np.asarray(t), t.data)
    assert not np.shares_memory(np.array(t, copy=True), t.data)
    assert np.asarray(t, dtype=np.float32).dtype == np.float32


@pytest.mark.parametrize("convert", [np.asarray, np.array, lambda t: np.std(t)])
def test_asarray_of_a_tensor_that_requires_grad_names_detach(convert):
    with pytest.raises(RuntimeError, match=r"detach\(\)\.numpy\(\)"):
        convert(leaf([1.0, 2.0]))


def test_detach_numpy_and_intermediates():
    x = leaf([1.0, 2.0])
    np.testing.assert_array_equal(np.asarray((x * 2).detach()), [2, 4])
    with pytest.raises(RuntimeError, match="requires grad"):
        np.asarray(x * 2)


def test_numpy_functions_that_go_through_asarray_work_on_plain_tensors():
    t = Tensor(np.array([1.0, 2.0, 3.0, 4.0]))
    assert np.std(t) == pytest.approx(np.std([1, 2, 3, 4]))
    np.testing.assert_array_equal(np.concatenate([t, t]), [1, 2, 3, 4] * 2)
    np.testing.assert_allclose(t, [1, 2, 3, 4])


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
def test_float_int_bool_of_one_element_tensors(dtype):
    for shape in [(), (1,), (1, 1)]:
        t = Tensor(np.full(shape, 3, dtype=dtype))
        assert float(t) == 3.0 and isinstance(float(t), float)
        assert int(t) == 3 and isinstance(int(t), int)
        assert bool(t) is True and bool(Tensor(np.zeros(shape, dtype))) is False


def test_float_of_a_tensor_that_requires_grad_works_like_pytorch():
    assert float(leaf([2.5]).sum()) == 2.5
    assert int(leaf(3.7)) == 3


@pytest.mark.parametrize("convert", [float, int, bool])
def test_scalar_conversion_of_many_elements_raises(convert):
    with pytest.raises(ValueError, match=r"\(2,\)"):
        convert(Tensor([1.0, 2.0]))


def test_index_only_for_one_integer():
    assert operator.index(Tensor(np.array(2))) == 2
    assert list(range(10))[Tensor(np.array([3]))] == 3
    assert list(range(Tensor(np.array(4)))) == [0, 1, 2, 3]
    with pytest.raises(TypeError, match="integer tensors of a single element"):
        operator.index(Tensor([2.0]))
    with pytest.raises(TypeError, match="integer tensors of a single element"):
        operator.index(Tensor(np.array([1, 2])))


@pytest.mark.parametrize("np_fn, method", [(np.sum, "sum"), (np.mean, "mean"), (np.max, "max"),
                                           (np.min, "min"), (np.amax, "max"), (np.amin, "min")])
def test_numpy_reductions_call_the_tensor_method_and_keep_the_graph(np_fn, method):
    x = leaf([[1.0, 4.0], [3.0, 2.0]])
    out = np_fn(x)
    assert isinstance(out, Tensor) and out.grad_fn is not None
    assert float(out) == float(getattr(x, method)())
    out.backward()
    assert x.grad is not None and x.grad.shape == (2, 2)
    per_axis = np_fn(x, axis=1, keepdims=True)
    np.testing.assert_allclose(per_axis.numpy(), np_fn(x.data, axis=1, keepdims=True))


def test_numpy_argmax_of_a_tensor():
    t = Tensor([[1.0, 4.0], [3.0, 2.0]])
    assert int(np.argmax(t)) == 1
    np.testing.assert_array_equal(np.argmax(t, axis=0).numpy(), [1, 0])


def test_numpy_reduction_arguments_a_tensor_cannot_honour_name_the_method():
    t = Tensor([1.0, 2.0])
    with pytest.raises(TypeError, match=r"tensor\.sum\(axis, keepdims\)"):
        np.sum(t, out=np.zeros(()))
    with pytest.raises(TypeError, match=r"tensor\.mean\(axis, keepdims\)"):
        np.mean(t, dtype=np.float64)


def test_ndarray_op_tensor_still_dispatches_to_the_tensor():
    x = leaf([1.0, 2.0])
    y = np.array([3.0, 4.0]) - x
    assert isinstance(y, Tensor) and y.grad_fn is not None
    z = np.array([2.0, 3.0]) ** Tensor([1.0, 2.0])    # Tensor.__rpow__
    assert isinstance(z, Tensor)
    np.testing.assert_array_equal(z.numpy(), [2, 9])


def test_numpy_any_all_and_prod_of_a_tensor():
    mask = Tensor(np.array([[True, False], [False, False]]))
    assert bool(np.any(mask)) and not bool(np.all(mask))
    np.testing.assert_array_equal(mask.any(axis=1).numpy(), [True, False])
    np.testing.assert_array_equal(np.all(mask, axis=0, keepdims=True).numpy(), [[False, False]])
    assert mask.any().dtype == np.bool_ and not leaf([1.0]).any().requires_grad
    with pytest.raises(TypeError, match=r"tensor\.log\(\)\.sum\(axis\)\.exp\(\)"):
        np.prod(leaf([1.0, 2.0]))
