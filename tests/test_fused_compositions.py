"""Each fused op equals the composition of public ops its file states (``composition``):
values and gradients in float64, on both backends. The list of fused ops is found, not kept:
every op class with a ``composition`` must have a case here."""
import numpy as np
import pytest

from minigrad import Tensor, kernels, ops
from minigrad.function import Function


def rand(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape)


def causal(length):
    return np.tril(np.ones((length, length), bool))


def padding(batch, length, seed):
    allowed = np.random.default_rng(seed).random((batch, 1, 1, length)) > 0.3
    allowed[..., 0] = True
    return allowed


# op class -> (tensor inputs (arrays), options): odd shapes, masks with hidden keys
CASES = {
    ops.SelfAttentionCore: ([rand((2, 5, 3 * 6), 1)], dict(num_heads=2, allowed=causal(5))),
    ops.CrossAttentionCore: ([rand((3, 4, 6), 2), rand((3, 7, 12), 3)], dict(num_heads=3, allowed=padding(3, 7, 4))),
    ops.Linear: ([rand((2, 3, 5), 5), rand((5, 7), 6), rand(7, 7)], {}),
    ops.LayerNorm: ([rand((2, 3, 9), 8) * 3 + 1, rand(9, 9), rand(9, 10)], dict(eps=1e-5)),
    ops.CrossEntropy: ([rand((4, 3, 6), 11) * 2, np.array([[1, 0, 5], [2, -100, 3], [-100, 4, 0], [5, 5, 1]])],
                       dict(ignore_index=-100, label_smoothing=0.1)),
    ops.GELU: ([rand((3, 7), 13) * 2], {}),
}


def fused_op_classes():
    found, todo = [], list(Function.__subclasses__())
    while todo:
        cls = todo.pop()
        todo += cls.__subclasses__()
        if "composition" in vars(cls) and cls.__module__.startswith("minigrad."):   # not tests' own ops
            found.append(cls)
    return found


def test_every_fused_op_with_a_composition_is_checked_here():
    assert set(fused_op_classes()) == set(CASES)


def values_and_gradients(run, arrays, options, weights_seed=12):
    inputs = [Tensor(a, requires_grad=a.dtype.kind == "f") for a in arrays]
    out = run(*inputs, **options)
    weights = rand(out.shape, weights_seed)
    (out * Tensor(weights)).sum().backward()
    return out.data, [t.grad for t in inputs if t.requires_grad]


@pytest.mark.parametrize("backend", kernels.BACKENDS)
@pytest.mark.parametrize("op", list(CASES), ids=lambda op: op.__name__)
def test_fused_op_equals_its_composition(op, backend):
    arrays, options = CASES[op]
    if op in (ops.SelfAttentionCore, ops.CrossAttentionCore):
        fused_options = dict(options, weights_out=[])
    else:
        fused_options = options
    with kernels.use_backend(backend):
        out, grads = values_and_gradients(op.apply, arrays, fused_options)
        want_out, want_grads = values_and_gradients(op.composition, arrays, options)
    assert out.dtype == np.float64
    np.testing.assert_allclose(out, want_out, rtol=1e-10, atol=1e-12)
    assert len(grads) == len(want_grads)
    for got, want in zip(grads, want_grads):
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-11)


def test_attention_compositions_hand_out_the_weights():
    arrays, options = CASES[ops.SelfAttentionCore]
    fused, composed = [], []
    ops.SelfAttentionCore.apply(Tensor(arrays[0]), weights_out=fused, **options)
    ops.SelfAttentionCore.composition(Tensor(arrays[0]), weights_out=composed, **options)
    np.testing.assert_allclose(fused[0], composed[0], rtol=1e-12, atol=1e-14)
