"""Every row of the NaN table (docs/nan-rules.md) against PyTorch's answer.

The expected values, gradients and tangents below were measured with PyTorch 2.13 (CPU, float64:
``torch.amax``, ``torch.nn.functional.cross_entropy``, ``torch.func.jvp``, ...); the project never
imports torch, so they are written out. A row where minigrad deliberately differs gives its own
answer in ``ours`` and says why in the table.
"""
import re
from pathlib import Path

import numpy as np
import pytest

import minigrad as mg
from minigrad import Tensor, func, kernels
from minigrad import functional as F

nan, inf = np.nan, np.inf
TABLE = Path(__file__).resolve().parent.parent / "docs" / "nan-rules.md"
CAUSAL = np.tril(np.ones((3, 3), bool))

# row: (minigrad function, input, output gradient (None: ones), tangent (None: not checked),
#       PyTorch 2.13's {"value", "grad", "tangent"}, and minigrad's own answer where it differs)
ROWS = {
    "amax-nan-slice": (lambda x: x.max(-1), [[1., nan, 2.], [1., 3., 2.]], None, [[1., 1., 1.], [1., 2., 3.]],
                       {"value": [nan, 3.0], "grad": [[nan, nan, nan], [0.0, 1.0, 0.0]], "tangent": [nan, 2.0]}),
    "amin-nan-slice": (lambda x: F.amin(x, -1), [[1., nan, 0.], [1., 3., 0.]], None, [[1., 1., 1.], [1., 2., 3.]],
                       {"value": [nan, 0.0], "grad": [[nan, nan, nan], [0.0, 0.0, 1.0]], "tangent": [nan, 3.0]}),
    "amax-ties": (lambda x: F.amax(x, -1), [[2., 2., 1.]], None, [[1., 3., 5.]],
                  {"value": [2.0], "grad": [[0.5, 0.5, 0.0]], "tangent": [2.0]}),
    "amax-nan-gradient": (lambda x: x.max(-1), [[1., 3., 2.], [1., 3., 2.]], [nan, inf], [[nan, 1., 1.], [1., 1., 1.]],
                          {"value": [3.0, 3.0], "grad": [[nan, nan, nan], [nan, inf, nan]], "tangent": [1.0, 1.0]}),
    "abs-nan": (lambda x: abs(x), [nan, 0., -2., inf], None, [1., 1., 1., 1.],
                {"value": [nan, 0.0, 2.0, inf], "grad": [0.0, 0.0, -1.0, 1.0], "tangent": [0.0, 0.0, -1.0, 1.0]}),
    "abs-zero-nan-gradient": (lambda x: F.abs(x), [0., 0.], [nan, 1.], [nan, 1.],
                              {"value": [0.0, 0.0], "grad": [nan, 0.0], "tangent": [nan, 0.0]}),
    "clamp-nan-gradient": (lambda x: x.clamp(-1.0, 1.0), [-2., 0., 2., 1., nan], [nan, nan, nan, nan, 1.],
                           [nan, nan, nan, nan, 1.],
                           {"value": [-1.0, 0.0, 1.0, 1.0, nan], "grad": [0.0, nan, 0.0, nan, 0.0],
                            "tangent": [0.0, nan, 0.0, nan, 0.0]}),
    "clamp-min-nan-gradient": (lambda x: F.clamp(x, min=0.0), [-2., 0., 2.], [nan, nan, nan], [nan, nan, nan],
                               {"value": [0.0, 0.0, 2.0], "grad": [0.0, nan, nan], "tangent": [0.0, nan, nan]}),
    "relu-nan": (lambda x: x.relu(), [nan, -1., 0., 2.], [1., nan, nan, nan], [1., nan, nan, nan],
                 {"value": [nan, 0.0, 0.0, 2.0], "grad": [1.0, 0.0, 0.0, nan], "tangent": [1.0, 0.0, 0.0, nan]}),
    "cross-entropy-all-masked-row": (
        lambda x: F.cross_entropy(x, np.array([1, 0])), [[-inf, -inf, -inf], [0., 1., 2.]], None,
        [[1., 1., 1.], [1., 2., 3.]],
        {"value": nan, "grad": [[nan, nan, nan], [-0.4549847134148098, 0.12236423552739882, 0.3326204778874109]],
         "tangent": nan}),
    "cross-entropy-all-masked-ignored-row": (
        lambda x: F.cross_entropy(x, np.array([1, -100]), ignore_index=-100), [[0., 1., 2.], [-inf, -inf, -inf]],
        None, None,
        {"value": 1.4076059644443804,
         "grad": [[0.09003057317038043, -0.7552715289452023, 0.6652409557748218], [nan, nan, nan]]}),
    "cross-entropy-all-masked-smoothing": (
        lambda x: F.cross_entropy(x, np.array([1]), label_smoothing=0.1), [[-inf, -inf, -inf]], None, [[1., 1., 1.]],
        {"value": nan, "grad": [[nan, nan, nan]], "tangent": nan}),
    "cross-entropy-all-ignored": (
        lambda x: F.cross_entropy(x, np.array([-100, -100]), ignore_index=-100) ** 2, [[0., 1., 2.], [0., 1., 2.]],
        None, None, {"value": nan, "grad": [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]}),
    "cross-entropy-all-ignored-tangent": (
        lambda x: F.cross_entropy(x, np.array([-100, -100]), ignore_index=-100), [[0., 1., 2.], [0., 1., 2.]],
        None, [[1., 1., 1.], [1., 1., 1.]], {"value": nan, "grad": [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]], "tangent": nan},
        {"value": nan, "grad": [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]], "tangent": 0.0}),
    "cross-entropy-masked-target": (
        lambda x: F.cross_entropy(x, np.array([0])), [[-inf, 0., 1.]], None, None,
        {"value": inf, "grad": [[-1.0, 0.2689414213699951, 0.7310585786300049]]}),
    "cross-entropy-masked-other": (
        lambda x: F.cross_entropy(x, np.array([1])), [[-inf, 0., 1.]], None, [[1., 2., 3.]],
        {"value": 1.3132616875182228, "grad": [[0.0, -0.7310585786300049, 0.7310585786300049]],
         "tangent": 0.7310585786300048}),
    "cross-entropy-nan-logit": (
        lambda x: F.cross_entropy(x, np.array([1])), [[nan, 0., 1.]], None, [[1., 1., 1.]],
        {"value": nan, "grad": [[nan, nan, nan]], "tangent": nan}),
    "softmax-all-masked": (
        lambda x: x.softmax(-1), [[-inf, -inf]], [[1., 2.]], [[1., 2.]],
        {"value": [[nan, nan]], "grad": [[nan, nan]], "tangent": [[nan, nan]]},
        {"value": [[0.0, 0.0]], "grad": [[0.0, 0.0]], "tangent": [[0.0, 0.0]]}),
    "log-softmax-all-masked": (
        lambda x: x.log_softmax(-1), [[-inf, -inf]], [[1., 2.]], [[1., 2.]],
        {"value": [[nan, nan]], "grad": [[nan, nan]], "tangent": [[nan, nan]]},
        {"value": [[-inf, -inf]], "grad": [[0.0, 0.0]], "tangent": [[0.0, 0.0]]}),
    # PyTorch's side: attention op by op (masked_fill(-inf), softmax, matmul), as the fused op computes
    "attention-all-masked-query": (
        lambda x: F.self_attention(x, 1, np.array([[[[True, False], [False, False]]]]))[0],
        [[[0.5, -1.0, 2.0], [1.5, 0.25, -0.5]]], None, [[[1., 1., 1.], [1., 1., 1.]]],
        {"value": [[[2.0], [nan]]], "grad": [[[0.0, 0.0, nan], [0.0, 0.0, nan]]], "tangent": [[[1.0], [nan]]]},
        {"value": [[[2.0], [0.0]]], "grad": [[[0.0, 0.0, 1.0], [0.0, 0.0, 0.0]]], "tangent": [[[1.0], [0.0]]]}),
    # a NaN query (row 1) under a causal mask: key 2, hidden from it, keeps a finite gradient in the
    # dimension the NaN does not touch (masked_fill's 0, not 0 * NaN)
    "attention-nan-query": (
        lambda x: F.self_attention(x, 1, CAUSAL)[0],
        [[[0.5, -1.0, 0.25, 1.0, 2.0, -0.5], [nan, 0.75, -0.5, 0.5, 1.5, 0.25], [1.0, 0.5, -1.5, -0.25, -1.0, 2.0]]],
        None, [[[1.0] * 6] * 3],
        {"value": [[[2.0, -0.5], [nan, nan], [1.5201097134316977, -0.0022346226484409037]]],
         "grad": [[[0.0, 0.0, nan, nan, nan, nan], [nan, nan, nan, nan, nan, nan],
                   [0.03501608723285378, 0.02673241216280884, nan, -0.020330124045438023, nan, nan]]],
         "tangent": [[[1.0, 1.0], [nan, nan], [1.5988069187348823, 0.46294158066077995]]]}),
    # -inf in query 1 makes every score it may see -inf: op by op, softmax makes that row NaN,
    # and NaN the gradients of everything it read; ours is the zero row of a query the mask hides
    # (as step by step, and as PyTorch's scaled_dot_product_attention: tests/test_attention_nan.py).
    # Its tangent stays NaN: the scores' tangent is inf there, times a zero weight
    "attention-minus-inf-query": (
        lambda x: F.self_attention(x, 1, CAUSAL)[0],
        [[[0.5, -1.0, 0.25, 1.0, 2.0, -0.5], [-inf, 0.75, 0.5, 0.5, 1.5, 0.25], [1.0, 0.5, -1.5, -0.25, -1.0, 2.0]]],
        None, [[[1.0] * 6] * 3],
        {"value": [[[2.0, -0.5], [nan, nan], [1.51544733483999, 0.056245241260007836]]],
         "grad": [[[0.0, 0.0, nan, nan, nan, nan], [nan, nan, nan, nan, nan, nan],
                   [0.07475440251685987, 0.014266660512418719, nan, -0.017239522689067192, nan, nan]]],
         "tangent": [[[1.0, 1.0], [nan, nan], [1.4563723088991158, 0.6326487541301626]]]},
        {"value": [[[2.0, -0.5], [0.0, 0.0], [1.51544733483999, 0.056245241260007836]]],
         "grad": [[[0.0, 0.0, nan, -0.011592623521182116, 1.4573540608799982, 1.4573540608799982],
                   [0.0, 0.0, nan, 0.028832146210249356, 0.45735406087999814, 0.45735406087999814],
                   [0.07475440251685987, 0.014266660512418719, nan, -0.017239522689067192, 0.08529187824000369,
                    0.08529187824000369]]],
         "tangent": [[[1.0, 1.0], [nan, nan], [1.456372308899116, 0.6326487541301627]]]}),
    # a NaN in key 2, which the causal mask hides from queries 0 and 1: their outputs stay finite
    # (masked_fill, not + -inf); dQ = dS K is NaN in that dimension (0 * NaN)
    "attention-hidden-nan-score": (
        lambda x: F.self_attention(x, 1, CAUSAL)[0],
        [[[0.5, -1.0, 0.25, 1.0, 2.0, -0.5], [1.5, 0.25, 0.5, 0.5, 1.5, 0.25], [1.0, 0.5, nan, -0.25, -1.0, 2.0]]],
        None, [[[1.0] * 6] * 3],
        {"value": [[[2.0, -0.5], [1.727960278325387, -0.09194041748808049], [nan, nan]]],
         "grad": [[[nan, 0.0, nan, nan, nan, nan], [nan, -0.02192534858895131, nan, nan, nan, nan],
                   [nan, nan, nan, nan, nan, nan]]],
         "tangent": [[[1.0, 1.0], [1.021925348588952, 0.9671119771165729], [nan, nan]]]}),
    "layer-norm-inf": (
        lambda x: F.layer_norm(x, eps=1e-5), [[inf, 0., 1.], [1., 2., 4.]], None, [[1., 2., 3.]] * 2,
        {"value": [[nan, nan, nan], [-1.0690415314502977, -0.26726038286257453, 1.3363019143128718]],
         "grad": [[nan, nan, nan], [-1.1102230246251565e-16, -1.1102230246251565e-16, 1.1102230246251565e-16]],
         "tangent": [[nan, nan, nan], [-0.11454458203331663, 0.1718091416386017, -0.05726455960528476]]}),
    "cross-entropy-smoothing-inf-logit": (
        lambda x: F.cross_entropy(x, np.array([1, 0]), label_smoothing=0.1), [[inf, 0., 1.], [0., 1., 2.]], None,
        [[1., 2., 3.]] * 2,
        {"value": nan, "grad": [[nan, nan, nan], [-0.42165138008147646, 0.10569756886073216, 0.31595381122074423]],
         "tangent": nan}),
    "softmax-partly-masked": (
        lambda x: x.softmax(-1), [[-inf, 0., 1.]], [[1., 2., 3.]], [[1., 2., 3.]],
        {"value": [[0.0, 0.26894142136999516, 0.7310585786300049]],
         "grad": [[-0.0, -0.19661193324148196, 0.1966119332414816]],
         "tangent": [[-0.0, -0.19661193324148185, 0.19661193324148193]]}),
    "log-softmax-partly-masked": (
        lambda x: x.log_softmax(-1), [[-inf, 0., 1.]], [[1., 2., 3.]], [[1., 2., 3.]],
        {"value": [[-inf, -1.3132616875182228, -0.31326168751822286]],
         "grad": [[1.0, 0.3863514717800294, -1.3863514717800294]],
         "tangent": [[-1.7310585786300048, -0.7310585786300048, 0.2689414213699952]]}),
    "softmax-nan-or-inf": (
        lambda x: x.softmax(-1), [[nan, 0.], [inf, 0.]], [[1., 2.], [1., 2.]], [[1., 2.], [1., 2.]],
        {"value": [[nan, nan], [nan, nan]], "grad": [[nan, nan], [nan, nan]], "tangent": [[nan, nan], [nan, nan]]}),
    "where-nan": (lambda x: mg.where(np.array([True, False, True]), x, 0.0), [1., nan, 2.], [1., 1., nan],
                  [1., nan, nan], {"value": [1.0, 0.0, 2.0], "grad": [1.0, 0.0, nan], "tangent": [1.0, 0.0, nan]}),
    "masked-fill-nan-gradient": (lambda x: x.masked_fill(np.array([True, False]), -inf), [1., 2.], [nan, nan],
                                 [nan, nan], {"value": [-inf, 2.0], "grad": [0.0, nan], "tangent": [0.0, nan]}),
    "sqrt-zero": (lambda x: x.sqrt(), [0., 0., -1.], [1., 0., 1.], [1., 0., 1.],
                  {"value": [0.0, 0.0, nan], "grad": [inf, nan, nan], "tangent": [inf, nan, nan]}),
    "log-zero": (lambda x: x.log(), [0., 0., -1.], [1., 0., 1.], [1., 0., 1.],
                 {"value": [-inf, -inf, nan], "grad": [inf, nan, -1.0], "tangent": [inf, nan, -1.0]}),
    "pow-zero-exponent": (lambda x: x ** 0, [0., nan, inf], None, [1., 1., 1.],
                          {"value": [1.0, 1.0, 1.0], "grad": [0.0, 0.0, 0.0], "tangent": [0.0, 0.0, 0.0]}),
    "pow-at-zero": (lambda x: x ** 0.5, [0., 0.], [1., nan], [1., nan],
                    {"value": [0.0, 0.0], "grad": [inf, nan], "tangent": [inf, nan]}),
    "pow-cube-at-zero": (lambda x: x ** 3, [0., 0.], [1., nan], [1., nan],
                         {"value": [0.0, 0.0], "grad": [0.0, nan], "tangent": [0.0, nan]}),
    "pow-half-at-minus-inf": (lambda x: x ** 0.5, [-inf], None, [1.],
                              {"value": [nan], "grad": [nan], "tangent": [nan]},
                              {"value": [nan], "grad": [0.0], "tangent": [0.0]}),
    "pow-minus-half-at-minus-inf": (lambda x: x ** -0.5, [-inf], None, [1.],
                                    {"value": [nan], "grad": [-0.0], "tangent": [-0.0]},
                                    {"value": [0.0], "grad": [-0.0], "tangent": [-0.0]}),
    "zero-base-pow": (lambda x: 0.0 ** x, [0., 1., -1.], None, [1., 1., 1.],
                      {"value": [1.0, 0.0, inf], "grad": [0.0, 0.0, -inf], "tangent": [0.0, 0.0, -inf]}),
    "base-pow-at-infinity": (lambda x: 2.0 ** x, [-inf, inf], None, [1., 1.],
                             {"value": [0.0, inf], "grad": [0.0, inf], "tangent": [0.0, inf]}),
    "tanh-sigmoid-at-infinity": (lambda x: x.tanh() + x.sigmoid(), [inf, -inf], None, [1., 1.],
                                 {"value": [2.0, -1.0], "grad": [0.0, 0.0], "tangent": [0.0, 0.0]}),
    "exp-minus-inf-inf-gradient": (lambda x: x.exp(), [-inf], [inf], [inf],
                                   {"value": [0.0], "grad": [nan], "tangent": [nan]}),
    "mul-zero-inf-gradient": (lambda x: x * 0.0, [1.], [inf], [inf], {"value": [0.0], "grad": [nan], "tangent": [nan]}),
    "mean-nan": (lambda x: x.mean(), [nan, 1.], None, [1., 1.], {"value": nan, "grad": [0.5, 0.5], "tangent": 1.0}),
}


def equal(got, want):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    return got.shape == want.shape and np.allclose(got, want, rtol=1e-12, atol=1e-15, equal_nan=True) \
        and (np.isnan(got) == np.isnan(want)).all() and (np.isinf(got) == np.isinf(want)).all()


@pytest.mark.parametrize("backend", kernels.BACKENDS)
@pytest.mark.parametrize("row", ROWS)
def test_row_as_pytorch(row, backend):
    f, x, grad, tangent, pytorch, *ours = ROWS[row]
    want = ours[0] if ours else pytorch
    leaf = Tensor(np.array(x), requires_grad=True)
    with kernels.use_backend(backend), np.errstate(all="ignore"):
        out = f(leaf)
        out.backward(np.ones(out.shape) if grad is None else np.array(grad))
        got = {"value": out.data, "grad": leaf.grad}
        if tangent is not None:
            got["tangent"] = func.jvp(f, (Tensor(np.array(x)),), (Tensor(np.array(tangent)),))[1].data
    for what in got:
        assert equal(got[what], want[what]), f"{row}: {what} {got[what].tolist()}, expected {want[what]}"
    if ours:    # a documented difference: it really differs from PyTorch's answer
        assert any(not equal(got[what], pytorch[what]) for what in got)


def test_the_table_has_one_line_per_row_and_no_other():
    """docs/nan-rules.md lists exactly the rows tested here, and marks the differences."""
    lines = [line for line in TABLE.read_text().splitlines() if re.match(r"\| *`[a-z-]+` *\|", line)]
    names = [re.match(r"\| *`([a-z-]+)`", line).group(1) for line in lines]
    assert sorted(names) == sorted(ROWS) and len(set(names)) == len(names)
    differs = {name for name, line in zip(names, lines) if "**differs**" in line}
    assert differs == {name for name, row in ROWS.items() if len(row) == 6}


def test_cross_entropy_on_an_all_masked_row_is_nan_beyond_first_order_too():
    """The row `cross-entropy-all-masked-row` at second order, forward over reverse (hessian) and
    reverse over reverse (jacrev of grad), and the create_graph gradient: PyTorch 2.13's answers."""
    x = np.array([[-inf, -inf], [0.0, 1.0]])
    f = lambda z: F.cross_entropy(z, np.array([1, 0]))    # noqa: E731
    h = 0.09830596662074093
    hessian = [[nan, nan, nan, nan], [nan, nan, nan, nan], [0.0, 0.0, h, -h], [0.0, 0.0, -h, h]]
    jacrev_of_grad = [[nan, nan, 0.0, 0.0], [nan, nan, 0.0, 0.0], [nan, nan, h, -h], [nan, nan, -h, h]]
    with np.errstate(all="ignore"):
        assert equal(func.hessian(f)(Tensor(x)).data.reshape(4, 4), hessian)
        assert equal(func.jacrev(func.grad(f))(Tensor(x)).data.reshape(4, 4), jacrev_of_grad)
        leaf = Tensor(x, requires_grad=True)
        g, = mg.autograd.grad(f(leaf), leaf, create_graph=True)
    assert equal(g.data, [[nan, nan], [-0.36552928931500245, 0.36552928931500245]])


@pytest.mark.parametrize("f", [lambda x: x.mean().sqrt(), lambda x: x.sum().exp(), lambda x: x.sum().tanh(),
                               lambda x: 2.0 ** x.sum()], ids=["sqrt", "exp", "tanh", "base-pow"])
def test_a_nan_scalar_result_is_differentiated_twice(f):
    """A 0-d NaN output (here from a NaN input) was not recognised as the op's output beyond
    first order (NaN equals nothing) and raised "no double-backward rule"; PyTorch 2.13's
    Hessian is all NaN."""
    with np.errstate(all="ignore"):
        hessian = func.hessian(f)(Tensor(np.array([nan, -2.0])))
    assert equal(hessian.data, np.full((2, 2), nan))


@pytest.mark.parametrize("smoothing", [0.0, 0.1])
def test_cross_entropy_with_every_target_ignored_has_zero_derivatives_at_every_order(smoothing):
    """PyTorch 2.13: the create_graph gradient, the Hessian and jacrev of grad are all zeros."""
    f = lambda z: F.cross_entropy(z, np.array([-100, -100]), ignore_index=-100, label_smoothing=smoothing)  # noqa
    x = np.array([[1.1, 0.2, -0.6], [0.1, 0.2, 0.3]])
    with np.errstate(all="ignore"):
        leaf = Tensor(x, requires_grad=True)
        g, = mg.autograd.grad(f(leaf), leaf, create_graph=True)
        assert equal(g.data, np.zeros((2, 3)))
        assert equal(func.hessian(f)(Tensor(x)).data, np.zeros((2, 3, 2, 3)))
        assert equal(func.jacrev(func.grad(f))(Tensor(x)).data, np.zeros((2, 3, 2, 3)))
