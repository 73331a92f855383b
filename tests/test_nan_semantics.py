"""Where NaN goes, as in PyTorch: cross-entropy over zero counted targets, ReLU at NaN, a NaN
output gradient in the fused attention; and softmax over an empty axis (a clear error)."""
import numpy as np
import pytest

from minigrad import Tensor, kernels
from minigrad import functional as F
from minigrad.ops import attention as A
from transformer.models.attention import scaled_dot_product_attention


@pytest.mark.parametrize("backend", kernels.BACKENDS)
@pytest.mark.parametrize("smoothing", [0.0, 0.1])
def test_cross_entropy_with_every_target_ignored_is_nan_with_zero_gradient(backend, smoothing):
    """PyTorch: the mean over zero targets is NaN (0 / 0); its backward writes only the rows of
    counted targets, so the gradient is 0 even when the output gradient is NaN (loss ** 2)."""
    logits = Tensor(np.random.default_rng(0).standard_normal((3, 5)), requires_grad=True)
    with kernels.use_backend(backend), np.errstate(all="ignore"):
        loss = F.cross_entropy(logits, np.array([-100, -100, -100]), ignore_index=-100, label_smoothing=smoothing)
        assert np.isnan(loss.item())
        (loss ** 2).backward()
    np.testing.assert_array_equal(logits.grad, np.zeros((3, 5)))


@pytest.mark.parametrize("backend", kernels.BACKENDS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_relu_at_nan_passes_the_gradient_as_pytorch(backend, dtype):
    """PyTorch's relu backward is threshold_backward(grad, result, 0): 0 where the output is
    <= 0, else grad. relu(NaN) is NaN, and NaN <= 0 is false: the gradient passes. A NaN gradient
    where the output is 0 gives 0."""
    x = Tensor(np.array([[np.nan, -1.0, 0.0, 2.0, -np.inf, np.inf]] * 3, dtype).reshape(3, 6), requires_grad=True)
    grad = np.array([[5.0, 6.0, 7.0, 8.0, 9.0, 10.0]] * 3, dtype)
    grad[1, 1] = np.nan
    with kernels.use_backend(backend):
        out = F.relu(x)
        out.backward(grad)
    assert np.isnan(out.data[:, 0]).all() and (out.data[:, 1:3] == 0).all()
    want = np.array([[5.0, 0.0, 0.0, 8.0, 0.0, 10.0]] * 3, dtype)
    np.testing.assert_array_equal(x.grad, want)


def split(x, heads):
    batch, length, width = x.shape
    return x.reshape(batch, length, heads, width // heads).transpose(0, 2, 1, 3)


@pytest.mark.parametrize("backend", kernels.BACKENDS)
def test_a_nan_output_gradient_of_one_query_does_not_reach_keys_it_cannot_see(backend):
    """Query 0 of item 0 sees only key 0 (a causal mask) and its output gradient is NaN: the
    keys it cannot see get no NaN in dK from it, as op by op (masked_fill's gradient is 0
    there) and in PyTorch; dQ of the other queries stays finite."""
    heads, length, width = 2, 5, 8
    rng = np.random.default_rng(1)
    qkv = rng.standard_normal((2, length, 3 * width))
    grad = rng.standard_normal((2, length, width))
    grad[0, 0] = np.nan
    allowed = np.tril(np.ones((length, length), bool))
    with kernels.use_backend(backend), np.errstate(invalid="ignore"):
        _, weights = A.attention(qkv, qkv, qkv, allowed, heads, width, (0, width, 2 * width))
        d_qkv, _, _ = A.attention_backward(grad, qkv, qkv, qkv, weights, allowed, heads, (0, width, 2 * width))
        parts = [Tensor(split(qkv[..., i * width:(i + 1) * width], heads), requires_grad=True) for i in range(3)]
        out, _ = scaled_dot_product_attention(*parts, allowed)
        out.backward(split(grad, heads))
    dk = d_qkv[..., width:2 * width]
    assert np.isnan(dk[0, 0]).all() and np.isfinite(dk[0, 1:]).all() and np.isfinite(dk[1]).all()
    assert np.isfinite(d_qkv[0, 1:, :width]).all()
    op_by_op_dk = parts[1].grad.transpose(0, 2, 1, 3).reshape(2, length, width)
    np.testing.assert_allclose(dk, op_by_op_dk, rtol=1e-10, atol=1e-12, equal_nan=True)


@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_softmax_over_an_empty_axis_is_a_clear_error(op):
    x = Tensor(np.zeros((3, 0)))
    with pytest.raises(ValueError, match=rf"{op} over an axis of length 0 \(input of shape \(3, 0\), axis -1\)"):
        getattr(x, op)(-1)
    with pytest.raises(ValueError, match=f"{op} needs at least 1-D input"):
        getattr(Tensor(np.float64(1.0)), op)(0)
    assert getattr(Tensor(np.zeros((0, 4))), op)(-1).shape == (0, 4)  # no rows is fine: nothing to compute
