"""Large products in fixed pieces (minigrad.parallel): the same bits on one thread or two.

The pieces' cut depends on the shapes only, so whether they run one after the other or
side by side, and a training run that switches between the two mid-way, give identical
numbers, bit for bit.
"""
import numpy as np
import pytest

from minigrad import parallel
from transformer.threads import blas_threads


def both_ways(a, b):
    """a @ b by ``parallel.product`` with its pieces on one thread, then on two."""
    with parallel.piece_workers(1):
        serial = parallel.product(a, b)
    with parallel.piece_workers(2):
        side_by_side = parallel.product(a, b)
    return serial, side_by_side


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("rows, inner, columns, transposed", [
    (2432, 64, 256, False),   # x @ W over all positions: cut into halves of the rows
    (2431, 256, 64, False),   # an odd row count: the halves differ by one row
    (64, 2432, 192, True),    # xᵀ @ g, a transposed view: cut into halves of the columns
    (256, 2432, 64, True),    # xᵀ @ g with more rows than columns: halves of the rows
])
def test_the_pieces_give_the_same_bits_on_one_thread_or_two(dtype, rows, inner, columns, transposed):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((inner, rows) if transposed else (rows, inner)).astype(dtype)
    a = a.T if transposed else a
    b = rng.standard_normal((inner, columns)).astype(dtype)
    assert 2 * rows * inner * columns >= parallel.MIN_SPLIT_FLOPS
    with blas_threads(1):
        serial, side_by_side = both_ways(a, b)
    assert serial.dtype == dtype and serial.shape == (rows, columns)
    np.testing.assert_array_equal(serial, side_by_side)
    np.testing.assert_allclose(serial, a.astype(np.float64) @ b.astype(np.float64),
                               rtol=1e-4 if dtype == np.float32 else 1e-12, atol=1e-3 if dtype == np.float32 else 1e-10)


def test_a_small_product_stays_whole():
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((128, 64)).astype(np.float32), rng.standard_normal((64, 64)).astype(np.float32)
    assert 2 * 128 * 64 * 64 < parallel.MIN_SPLIT_FLOPS
    with parallel.piece_workers(2):
        np.testing.assert_array_equal(parallel.product(a, b), np.matmul(a, b))


def test_the_cut_depends_on_the_shape_only():
    assert parallel.cut((2432, 64)) == (0, [(0, 1216), (1216, 2432)])
    assert parallel.cut((64, 193)) == (1, [(0, 96), (96, 193)])


def test_piece_workers_refuses_other_counts_and_restores_the_previous_one():
    with pytest.raises(ValueError, match="1 or 2 threads, got 3"):
        with parallel.piece_workers(3):
            pass
    with parallel.piece_workers(2):
        with parallel.piece_workers(1):
            assert parallel.workers() == 1
        assert parallel.workers() == 2
    assert parallel.workers() == 1


def train(workers_per_step):
    """Default model and batch (products of 1,536 and 2,432 rows, all large ones in pieces),
    one step per entry of ``workers_per_step`` with that many threads for the pieces.
    Returns the losses and the final weights."""
    from transformer.training import TrainConfig, Trainer
    trainer = Trainer(train_config=TrainConfig(steps=len(workers_per_step), eval_every=0, checkpoint_every=0))
    losses = []
    with blas_threads(1):
        for workers in workers_per_step:
            with parallel.piece_workers(workers):
                losses.append(trainer.train_step()["loss"])
    return losses, trainer.model.state_dict()


def test_a_run_switching_threads_mid_way_equals_one_that_never_switches():
    losses_serial, weights_serial = train([1, 1, 1, 1])
    losses_switching, weights_switching = train([2, 1, 2, 2])
    assert losses_serial == losses_switching
    for name in weights_serial:
        np.testing.assert_array_equal(weights_serial[name], weights_switching[name], err_msg=name)
