"""The gradient of indexing (``GetItem``) for every index form.

Reference: a dense ``np.add.at`` into zeros with the *same* index, which is
what the gradient of a gather is by definition (every picked element gets the
upstream gradient, repeated picks add up). Hypothesis draws tables, id arrays
with negative and repeated ids, 1-D and 2-D id arrays, and passes the ids as
arrays, lists, Tensors and inside tuples, so both the row-lookup fast path
(one integer array) and the general ``np.add.at`` path are covered.
"""
import numpy as np
import pytest
from hypothesis import assume, given, settings, strategies as st

from minigrad import Tensor, gradcheck, nn

FAST = settings(max_examples=60, deadline=None)


def dense_reference(shape, index, upstream):
    out = np.zeros(shape)
    np.add.at(out, index, upstream)
    return out


def check_gather(table, index, wrap):
    """Gradient of table[wrap(index)] with a random upstream gradient vs np.add.at."""
    x = Tensor(table.copy(), requires_grad=True)
    y = x[wrap(index)]
    np.testing.assert_array_equal(y.numpy(), table[index])
    upstream = np.random.default_rng(0).standard_normal(y.shape)
    y.backward(upstream)
    np.testing.assert_allclose(x.grad, dense_reference(table.shape, index, upstream), rtol=1e-12, atol=1e-12)


WRAPS = {"array": lambda i: i, "list": lambda i: i.tolist(), "tensor": Tensor}


@st.composite
def tables_and_ids(draw, max_id_dims=2):
    rows = draw(st.integers(1, 6))
    trailing = draw(st.lists(st.integers(1, 3), min_size=0, max_size=2))
    id_shape = tuple(draw(st.lists(st.integers(0, 4), min_size=1, max_size=max_id_dims)))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    table = rng.standard_normal((rows, *trailing))
    ids = rng.integers(-rows, rows, id_shape)      # negative ids count from the end, as in numpy
    return table, ids


@FAST
@given(tables_and_ids(), st.sampled_from(sorted(WRAPS)))
def test_row_gather_matches_add_at(case, wrap):
    table, ids = case
    assume(wrap != "list" or ids.size > 0)     # an empty (0, 0) array's .tolist() is [], shape (0,)
    check_gather(table, ids, WRAPS[wrap])


@FAST
@given(tables_and_ids(max_id_dims=1), st.integers(0, 2**32 - 1))
def test_tuple_index_gather_matches_add_at(case, seed):
    """table[ids, cols] and table[ids, :] (general path), with negative and repeated ids."""
    table, ids = case
    if table.ndim < 2:
        table = table[:, None]
    cols = np.random.default_rng(seed).integers(-table.shape[1], table.shape[1], ids.shape)
    check_gather(table, (ids, cols), lambda i: (Tensor(i[0]), i[1].tolist()))
    check_gather(table, (ids, slice(None)), lambda i: i)


# a negative id, and the cases around the old fast path's limits
def test_negative_ids_keep_their_gradient():
    a = Tensor(np.arange(8.0).reshape(4, 2), requires_grad=True)
    a[np.array([-1, 0])].sum().backward()
    np.testing.assert_array_equal(a.grad, [[1, 1], [0, 0], [0, 0], [1, 1]])


@pytest.mark.parametrize("rows", [3, 4096, 5000])
@pytest.mark.parametrize("wrap", sorted(WRAPS))
def test_negative_and_repeated_ids_any_table_size(rows, wrap):
    table = np.random.default_rng(rows).standard_normal((rows, 2))
    check_gather(table, np.array([[-1, 0, -1], [rows - 1, -rows, 1]]), WRAPS[wrap])


def test_scalar_array_index_and_empty_ids():
    check_gather(np.arange(6.0).reshape(3, 2), np.array(-1), lambda i: i)
    check_gather(np.arange(6.0).reshape(3, 2), np.zeros((0,), np.int64), lambda i: i)
    check_gather(np.arange(5.0), np.array([[-1, -1], [0, 4]]), lambda i: i)   # 1-D table


def test_boolean_mask_index():
    table = np.arange(6.0).reshape(3, 2)
    check_gather(table, np.array([True, False, True]), lambda i: i)


def test_embedding_gradcheck_with_repeated_ids():
    emb = nn.Embedding(5, 3).to(np.float64)
    ids = np.array([[0, 4, 4], [2, 0, 0]])
    assert gradcheck(lambda w: w[ids] * w[ids], [emb.weight])


@pytest.mark.parametrize("bad", [3, -4])
def test_row_lookup_out_of_range_names_the_shape(bad):
    """The row-lookup fast path (take) refuses an id out of range like numpy indexing does."""
    table = Tensor(np.arange(6.0).reshape(3, 2), requires_grad=True)
    with pytest.raises(IndexError, match=rf"shape \(3, 2\).*index {bad} is out of bounds"):
        table[np.array([0, bad])]


def test_integer_array_index_into_a_0d_tensor_is_refused():
    with pytest.raises(IndexError, match=r"shape \(\)"):
        Tensor(np.float64(3.0))[np.array([0])]
