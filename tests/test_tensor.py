"""Tensor basics and backward semantics.

Covers: construction and the dtype policy (Python floats -> float32, numpy
float64 stays float64, ints are index tensors that cannot require grad), repr,
item/detach/numpy, backward seeding and its errors, gradient accumulation,
the freed graph, fan-out (reuse, diamonds, shared consumers), a 100,000-op
chain, no_grad/enable_grad, retain_grad, in-place assignment, numpy interop,
and that every node's backward runs exactly once per pass.
"""
import numpy as np
import pytest

import minigrad as mg
from minigrad import Tensor, ops


def leaf(values, dtype=np.float64):
    return Tensor(np.array(values, dtype=dtype), requires_grad=True)


# ------------------------------------------------------------ construction
@pytest.mark.parametrize("data", [1.5, [1.0, 2.0], [[1, 2.5]], [[0.5], [1.5]]])
def test_python_floats_become_float32(data):
    assert Tensor(data).dtype == np.float32


@pytest.mark.parametrize("array", [np.ones(3), np.float64(2.0), np.zeros((2, 2), np.float64)])
def test_numpy_float64_stays_float64(array):
    assert Tensor(array).dtype == np.float64


def test_numpy_float32_stays_float32_and_explicit_dtype_wins():
    assert Tensor(np.ones(2, np.float32)).dtype == np.float32
    assert Tensor([1.0, 2.0], dtype=np.float64).dtype == np.float64
    assert Tensor(np.ones(2), dtype=np.float32).dtype == np.float32


def test_python_ints_are_index_tensors():
    ids = Tensor([1, 2, 3])
    assert ids.dtype.kind == "i"
    assert not ids.requires_grad
    np.testing.assert_array_equal(ids.numpy(), [1, 2, 3])


@pytest.mark.parametrize("data, dtype", [([1, 2, 3], np.int64), (7, np.int64), ([[1], [2]], np.int64),
                                         ([1, 2.5], np.float32), ([True, False], np.bool_),
                                         (np.arange(3, dtype=np.int32), np.int32)])
def test_dtype_of_python_data_follows_pytorch(data, dtype):
    # torch.tensor: int lists -> int64, float (or mixed) lists -> float32, bools -> bool
    assert Tensor(data).dtype == dtype


@pytest.mark.parametrize("data", [[1, 2], np.arange(3), True])
def test_requires_grad_on_non_float_raises(data):
    with pytest.raises(TypeError, match="floating-point"):
        Tensor(data, requires_grad=True)


def test_object_data_raises():
    with pytest.raises(TypeError, match="objects"):
        Tensor([object(), 1.0])


def test_python_scalars_take_the_tensor_dtype():
    assert (Tensor(np.ones(2)) + 1.5).dtype == np.float64
    assert (Tensor([1.0, 2.0]) * 2).dtype == np.float32
    assert (3.0 / Tensor(np.ones(2, np.float32))).dtype == np.float32


def test_tensor_from_tensor_copies_values():
    a = Tensor([1.0, 2.0])
    b = Tensor(a)
    np.testing.assert_array_equal(b.numpy(), a.numpy())
    assert b.dtype == np.float32


# --------------------------------------------------------------------- repr
def test_repr_shows_values_shape_dtype_and_graph_state():
    x = Tensor([1.0, 2.0], requires_grad=True, name="x")
    text = repr(x)
    assert text.startswith("Tensor([1., 2.]")
    assert "shape=(2,)" in text and "dtype=float32" in text
    assert "requires_grad=True" in text and "name='x'" in text
    y = x * 2
    assert "grad_fn=Mul" in repr(y)
    assert "requires_grad" not in repr(Tensor([1.0]))


def test_repr_of_a_large_tensor_is_summarised():
    assert "..." in repr(Tensor(np.zeros(1000)))


# ---------------------------------------------------------- item/detach/numpy
def test_item_returns_a_python_number():
    value = Tensor([[3.5]]).item()
    assert value == 3.5 and isinstance(value, float)
    assert Tensor(np.int64(7)).item() == 7


def test_item_on_many_elements_names_the_shape():
    with pytest.raises(ValueError, match=r"\(2, 2\)"):
        Tensor(np.ones((2, 2))).item()


def test_numpy_returns_the_array():
    x = Tensor(np.arange(4.0))
    assert isinstance(x.numpy(), np.ndarray)
    np.testing.assert_array_equal(x.numpy(), [0, 1, 2, 3])


def test_numpy_of_a_full_reduction_is_an_ndarray():
    x = leaf([[1.0, 2.0], [3.0, 5.0]])
    for out in (x.sum(), x.mean(), x.max(), (x * x).sum(axis=(0, 1))):
        assert isinstance(out.numpy(), np.ndarray), f"{out.grad_fn.name} gave {type(out.numpy()).__name__}"
        assert out.shape == ()


def test_detach_cuts_the_graph():
    x = leaf([1.0, 2.0, 3.0])
    d = (x * 2).detach()
    assert not d.requires_grad and d.grad_fn is None and d.is_leaf
    np.testing.assert_array_equal(d.numpy(), [2, 4, 6])
    (d * x).sum().backward()  # only the non-detached path carries gradient
    np.testing.assert_allclose(x.grad, [2, 4, 6])


# ----------------------------------------------------------------- backward
def test_backward_of_a_scalar_seeds_one():
    x = leaf([[1.0, 2.0], [3.0, 4.0]])
    (x * x).sum().backward()
    np.testing.assert_allclose(x.grad, 2 * x.numpy())
    assert x.grad.dtype == np.float64


def test_backward_of_a_float32_graph_gives_float32_grads():
    x = Tensor([1.0, 2.0], requires_grad=True)
    (x * x).sum().backward()
    assert x.grad.dtype == np.float32
    np.testing.assert_allclose(x.grad, [2, 4])


def test_backward_with_an_explicit_gradient():
    x = leaf([1.0, 2.0, 3.0])
    (x * 3).backward(np.array([1.0, 10.0, 100.0]))
    np.testing.assert_allclose(x.grad, [3, 30, 300])


def test_backward_of_a_non_scalar_without_gradient_raises():
    x = leaf([1.0, 2.0])
    with pytest.raises(RuntimeError, match="one-element"):
        (x * 2).backward()


def test_backward_with_a_gradient_of_the_wrong_shape_raises():
    x = leaf([1.0, 2.0])
    with pytest.raises(ValueError, match=r"\(3,\).*\(2,\)"):
        (x * 2).backward(np.ones(3))


def test_backward_on_a_constant_raises():
    with pytest.raises(RuntimeError, match="does not require grad"):
        (Tensor([1.0]) * 2).sum().backward()


def test_grads_accumulate_across_two_backward_calls_with_retain_graph():
    x = leaf([1.0, -2.0])
    y = (x * x).sum()
    y.backward(retain_graph=True)
    np.testing.assert_allclose(x.grad, [2, -4])
    y.backward()
    np.testing.assert_allclose(x.grad, [4, -8])


def test_grads_accumulate_across_separate_graphs():
    x = leaf([1.0, 2.0])
    (x * 3).sum().backward()
    (x * x).sum().backward()
    np.testing.assert_allclose(x.grad, [3 + 2, 3 + 4])


def test_second_backward_through_a_released_graph_raises():
    x = leaf([1.0, 2.0])
    y = (x.exp() * 2).sum()
    y.backward()
    with pytest.raises(RuntimeError, match="second time"):
        y.backward()


def test_zero_grad_clears():
    x = leaf([1.0])
    (x * 2).sum().backward()
    x.zero_grad()
    assert x.grad is None


# ----------------------------------------------------------------- fan-out
def test_reuse_a_plus_a_twice():
    a = leaf([1.0, 2.0])
    b = a + a
    c = b + b
    c.sum().backward()
    np.testing.assert_allclose(a.grad, [4, 4])


def test_x_times_x():
    x = leaf([3.0, -1.5])
    (x * x).sum().backward()
    np.testing.assert_allclose(x.grad, [6, -3])


def test_diamond_graph():
    a = leaf([0.5, -1.0])
    b = a * 2
    c = a.exp()
    (b * c).sum().backward()
    x = a.numpy()
    np.testing.assert_allclose(a.grad, 2 * np.exp(x) + 2 * x * np.exp(x))


def test_tensor_used_by_two_consumers():
    rng = np.random.default_rng(0)
    w = leaf(rng.standard_normal((3, 2)))
    x1, x2 = rng.standard_normal((4, 3)), rng.standard_normal((5, 3))
    loss = (Tensor(x1) @ w).sum() + (Tensor(x2) @ w).tanh().sum()
    loss.backward()
    expected = x1.T @ np.ones((4, 2)) + x2.T @ (1 - np.tanh(x2 @ w.numpy()) ** 2)
    np.testing.assert_allclose(w.grad, expected)


def test_intermediate_with_fan_out_sums_its_gradients():
    x = leaf([2.0])
    h = x * 3            # used three times
    y = (h * h + h).sum()
    y.backward()
    np.testing.assert_allclose(x.grad, [3 * (2 * 6 + 1)])


def test_backward_through_a_100k_op_chain():
    x = leaf(1.0)
    y = x
    for _ in range(100_000):
        y = y * 1.00001
    y.backward()
    np.testing.assert_allclose(x.grad, 1.00001 ** 100_000, rtol=1e-9)


# ------------------------------------------------------------------ no_grad
def test_no_grad_records_nothing():
    x = leaf([1.0, 2.0])
    with mg.no_grad():
        assert not mg.is_grad_enabled()
        y = (x * 2).exp().sum()
    assert mg.is_grad_enabled()
    assert not y.requires_grad and y.grad_fn is None
    with pytest.raises(RuntimeError):
        y.backward()


def test_enable_grad_inside_no_grad_records():
    x = leaf([1.0])
    with mg.no_grad():
        with mg.enable_grad():
            y = x * 2
        z = x * 2
    assert y.grad_fn is not None and z.grad_fn is None


def test_no_grad_restores_the_mode_after_an_exception():
    with pytest.raises(ZeroDivisionError):
        with mg.no_grad():
            1 / 0
    assert mg.is_grad_enabled()


def test_ops_on_constants_record_nothing():
    y = Tensor([1.0]) * Tensor([2.0])
    assert y.grad_fn is None and not y.requires_grad


# -------------------------------------------------------------- retain_grad
def test_retain_grad_keeps_an_intermediate_gradient():
    x = leaf([1.0, 2.0])
    h = (x * 2).retain_grad()
    other = x * 3
    y = (h * h + other).sum()
    y.backward()
    np.testing.assert_allclose(h.grad, 2 * h.numpy())
    assert other.grad is None
    np.testing.assert_allclose(x.grad, 2 * 2 * h.numpy() + 3)


# ------------------------------------------------------------ numpy interop
def test_setitem_is_refused():
    x = Tensor([1.0, 2.0])
    with pytest.raises(TypeError, match="in-place"):
        x[0] = 5.0
    np.testing.assert_array_equal(x.numpy(), [1, 2])


@pytest.mark.parametrize("ufunc_call", [lambda t: np.exp(t), lambda t: np.add(t, 1.0),
                                        lambda t: np.multiply(2.0, t)])
def test_numpy_ufunc_on_a_tensor_fails_loudly(ufunc_call):
    with pytest.raises(TypeError):
        ufunc_call(Tensor([1.0, 2.0]))


def test_ndarray_plus_tensor_returns_a_tensor_and_carries_gradient():
    x = leaf([1.0, 2.0])
    y = np.array([10.0, 20.0]) + x
    assert isinstance(y, Tensor)
    np.testing.assert_array_equal(y.numpy(), [11, 22])
    z = np.array([2.0, 3.0]) * y
    assert isinstance(z, Tensor)
    z.sum().backward()
    np.testing.assert_allclose(x.grad, [2, 3])


def test_ndarray_matmul_tensor_returns_a_tensor():
    w = leaf(np.eye(2) * 3)
    y = np.ones((1, 2)) @ w
    assert isinstance(y, Tensor)
    np.testing.assert_allclose(y.numpy(), [[3, 3]])


def test_comparisons_give_boolean_tensors_without_grad():
    m = leaf([1.0, 3.0]) > 2.0
    assert m.dtype == np.bool_ and not m.requires_grad
    np.testing.assert_array_equal(m.numpy(), [False, True])


# ------------------------------------------------------- backward once/node
def _count_calls(monkeypatch, op_class, counter):
    original = op_class.backward

    def counting(self, grad, **saved):
        counter[op_class.__name__] = counter.get(op_class.__name__, 0) + 1
        return original(self, grad, **saved)

    monkeypatch.setattr(op_class, "backward", counting)


def test_each_node_backward_runs_exactly_once(monkeypatch):
    counter = {}
    for op_class in (ops.Mul, ops.Add, ops.Exp, ops.Sum):
        _count_calls(monkeypatch, op_class, counter)
    a = leaf([0.1, 0.2, 0.3])
    b = a * a            # Mul 1
    c = b.exp()          # Exp 1, b has two consumers
    d = b * c            # Mul 2
    e = d + c + b        # Add 2; c and b fan out again
    f = e * e            # Mul 3, same input twice
    f.sum().backward()   # Sum 1
    assert counter == {"Mul": 3, "Exp": 1, "Add": 2, "Sum": 1}


def test_subclassed_op_backward_runs_once_in_a_diamond():
    class CountedExp(ops.Exp):
        calls = 0

        def backward(self, grad, *, out):
            CountedExp.calls += 1
            return super().backward(grad, out=out)

    x = leaf([0.5])
    h = CountedExp.apply(x)
    (h * 2 + h * 3 + h).sum().backward()
    assert CountedExp.calls == 1
    np.testing.assert_allclose(x.grad, 6 * np.exp(0.5))
