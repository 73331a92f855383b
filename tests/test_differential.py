"""Randomised differential test of the engine: random expression graphs of the
ops (broadcasting, one tensor used many times, views, reductions, shape ops,
softmax, layer norm, matmul, cross-entropy, -inf masks before softmax and
cross-entropy) are run through minigrad and through
a plain-numpy reference written here, independently of minigrad. Values must
agree; gradients must agree with central finite differences of the numpy
reference in float64. It keeps looking for the class of bug a hand-written
test misses (a wrong unbroadcast after a view, a gradient lost when a tensor
is used twice, ...).

Each program comes from a fixed seed (numpy's generator picks leaf shapes, ops,
operands and axes, every applicable op equally likely), so CI runs the same
programs every time; a failure names its seed and the shortest failing prefix
of the program, one line per step. (Hypothesis-drawn programs were tried and
dropped: its choices favour the first entries of a list, and a third of the
examples repeated.)
"""
import numpy as np
import pytest

import minigrad as mg
from minigrad import Tensor, func, functional as F

PROGRAMS = 150     # fixed seeds 0..149: the same programs in every run, a few seconds in all


def np_sigmoid(a):
    return 1 / (1 + np.exp(-a))


def np_gelu(a):
    return 0.5 * a * (1 + np.tanh(np.sqrt(2 / np.pi) * (a + 0.044715 * a ** 3)))


def np_log_softmax(a, axis=-1):
    shifted = a - a.max(axis=axis, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))


def np_layer_norm(a, eps=1e-5):
    mean = a.mean(axis=-1, keepdims=True)
    var = ((a - mean) ** 2).mean(axis=-1, keepdims=True)
    return (a - mean) / np.sqrt(var + eps)


# name: (minigrad, numpy); inputs kept in a range where each op is smooth and finite
UNARY = {
    "neg": (lambda t: -t, lambda a: -a),
    "tanh": (lambda t: t.tanh(), np.tanh),
    "sigmoid": (lambda t: t.sigmoid(), np_sigmoid),
    "exp(tanh)": (lambda t: t.tanh().exp(), lambda a: np.exp(np.tanh(a))),
    "log(x^2+1)": (lambda t: (t * t + 1.0).log(), lambda a: np.log(a * a + 1)),
    "sqrt(x^2+1)": (lambda t: (t * t + 1.0).sqrt(), lambda a: np.sqrt(a * a + 1)),
    "abs": (lambda t: abs(t), np.abs),
    "relu": (lambda t: t.relu(), lambda a: np.maximum(a, 0)),
    "gelu": (lambda t: t.gelu(), np_gelu),
    "clamp": (lambda t: t.clamp(-1.0, 1.0), lambda a: np.clip(a, -1, 1)),
    "square": (lambda t: t ** 2, lambda a: a ** 2),
    "cube": (lambda t: t ** 3, lambda a: a ** 3),
    "2^tanh": (lambda t: 2 ** t.tanh(), lambda a: 2.0 ** np.tanh(a)),
    "affine": (lambda t: 0.5 * t - 1.0, lambda a: 0.5 * a - 1),
}

BINARY = {   # broadcasting
    "add": (lambda s, t: s + t, lambda a, b: a + b),
    "sub": (lambda s, t: s - t, lambda a, b: a - b),
    "mul": (lambda s, t: s * t, lambda a, b: a * b),
    "div": (lambda s, t: s / (t * t + 0.5), lambda a, b: a / (b * b + 0.5)),
}


VIEWS = {   # the same expression on a Tensor and on an array
    "transpose": lambda x: x.T, "rotate axes": lambda x: x.transpose(tuple(range(1, x.ndim)) + (0,)),
    "flatten": lambda x: x.reshape(-1), "new axis": lambda x: x[None], "first": lambda x: x[0],
    "reverse last": lambda x: x[..., ::-1], "tail": lambda x: x[1:]}


TWO_OPERANDS = ("binary", "where", "matmul", "concatenate", "stack")


def broadcastable(*shapes):
    try:
        np.broadcast_shapes(*shapes)
        return True
    except ValueError:
        return False


def make_program(seed):
    """Leaf shapes (mutually broadcastable, 0 to 3 axes of 1 to 3), then 1 to 8 steps (op,
    operand positions, parameters), every applicable op equally likely. Every result joins
    the pool, so later steps can use any earlier result again (and do, most of the time)."""
    rng = np.random.default_rng(seed)
    full = tuple(int(n) for n in rng.integers(1, 4, rng.integers(0, 4)))
    shapes = []
    for _ in range(rng.integers(1, 4)):
        kept = full[rng.integers(0, len(full) + 1):]                    # drop leading axes
        shapes.append(tuple(1 if rng.random() < 0.3 else n for n in kept))   # and stretch some
    leaf_shapes = list(shapes)
    steps = []
    for _ in range(rng.integers(1, 9)):
        i, j = (int(k) for k in rng.integers(0, len(shapes), 2))
        a, b = shapes[i], shapes[j]
        candidates = applicable_ops(a, b)
        kind, name = candidates[rng.integers(len(candidates))]
        params = {"name": name}
        if kind == "reduce":
            axes = [int(x) for x in rng.permutation(len(a))[:rng.integers(len(a) + 1)]]
            axes = [x - len(a) if rng.random() < 0.5 else x for x in axes]      # negative axes too
            params["axis"] = [None, tuple(axes), axes[0] if axes else None][rng.integers(3)]
            params["keepdims"] = bool(rng.integers(2))
        elif kind in ("softmax", "masked_softmax"):
            params["log"] = bool(rng.integers(2))
        elif kind == "stack":
            params["axis"] = int(rng.integers(-len(a) - 1, len(a) + 1))
        result = evaluate_step(kind, [np.zeros(a), np.zeros(b)], params, numpy_ops, np.random.default_rng(0))
        shapes.append(result.shape)
        steps.append((kind, i, j, params))
    return leaf_shapes, steps


def applicable_ops(a, b):
    """(kind, name) of every op that takes operands of shapes a (and b)."""
    ops = [("unary", name) for name in UNARY] + [("reduce", name) for name in ("sum", "mean", "max", "min")]
    if broadcastable(a, b):
        ops += [("binary", name) for name in BINARY] + [("where", None)]
    if len(a):
        ops += [("view", name) for name in VIEWS if name != "tail" or a[0] > 1]
        ops += [("softmax", None), ("masked_fill", None), ("masked_softmax", None)]
    if len(a) and a[-1] > 1:
        ops.append(("layer_norm", None))
    if len(a) == 2:
        ops += [("gram", None), ("cross_entropy", None), ("masked_cross_entropy", None)]
    if len(a) == 2 and len(b) == 2 and a[1] == b[0]:
        ops.append(("matmul", None))
    if len(a) == len(b) and len(a) and a[1:] == b[1:]:
        ops.append(("concatenate", None))
    if a == b:
        ops.append(("stack", None))
    return ops


class MinigradOps:
    unary = {k: v[0] for k, v in UNARY.items()}
    binary = {k: v[0] for k, v in BINARY.items()}

    reduce = staticmethod(lambda name, x, axis, keepdims: getattr(x, name)(axis=axis, keepdims=keepdims))
    where = staticmethod(lambda mask, a, b: mg.where(mask, a, b))
    masked_fill = staticmethod(lambda x, mask: x.masked_fill(mask, 0.25))
    softmax = staticmethod(lambda x, log: x.log_softmax(-1) if log else x.softmax(-1))

    @staticmethod
    def masked_softmax(x, mask, log):
        masked = x.masked_fill(mask, -np.inf)
        return masked.log_softmax(-1).masked_fill(mask, 0.0) if log else masked.softmax(-1)

    layer_norm = staticmethod(lambda x: F.layer_norm(x))
    matmul = staticmethod(lambda a, b: a @ b)
    gram = staticmethod(lambda a: a @ a.T)
    cross_entropy = staticmethod(lambda logits, targets: F.cross_entropy(logits, targets))
    masked_cross_entropy = staticmethod(
        lambda logits, mask, targets: F.cross_entropy(logits.masked_fill(mask, -np.inf), targets))
    concatenate = staticmethod(lambda a, b: mg.concatenate([a, b], axis=0))
    stack = staticmethod(lambda a, b, axis: mg.stack([a, b], axis=axis))


class NumpyOps:
    unary = {k: v[1] for k, v in UNARY.items()}
    binary = {k: v[1] for k, v in BINARY.items()}

    @staticmethod
    def reduce(name, x, axis, keepdims):
        return getattr(np, {"max": "amax", "min": "amin"}.get(name, name))(x, axis=axis, keepdims=keepdims)

    where = staticmethod(np.where)
    masked_fill = staticmethod(lambda x, mask: np.where(mask, 0.25, x))

    @staticmethod
    def softmax(x, log):
        return np_log_softmax(x) if log else np.exp(np_log_softmax(x))

    @staticmethod
    def masked_softmax(x, mask, log):
        out = np_log_softmax(np.where(mask, -np.inf, x))
        return np.where(mask, 0.0, out) if log else np.exp(out)

    layer_norm = staticmethod(np_layer_norm)
    matmul = staticmethod(lambda a, b: a @ b)
    gram = staticmethod(lambda a: a @ a.T)

    @staticmethod
    def cross_entropy(logits, targets):
        return -np_log_softmax(logits)[np.arange(len(targets)), targets].mean()

    @staticmethod
    def masked_cross_entropy(logits, mask, targets):
        return NumpyOps.cross_entropy(np.where(mask, -np.inf, logits), targets)

    concatenate = staticmethod(lambda a, b: np.concatenate([a, b], axis=0))
    stack = staticmethod(lambda a, b, axis: np.stack([a, b], axis=axis))


numpy_ops = NumpyOps()


def evaluate_step(kind, operands, params, ops, rng):
    """One step on minigrad tensors or numpy arrays alike (``ops`` picks the implementation);
    ``rng`` draws the step's masks and targets, the same for both."""
    a, b = operands
    if kind == "unary":
        return ops.unary[params["name"]](a)
    if kind == "binary":
        return ops.binary[params["name"]](a, b)
    if kind == "reduce":
        return ops.reduce(params["name"], a, params["axis"], params["keepdims"])
    if kind == "view":
        return VIEWS[params["name"]](a)
    if kind == "where":
        return ops.where(rng.random(np.broadcast_shapes(np.shape(a), np.shape(b))) < 0.5, a, b)
    if kind == "masked_fill":
        return ops.masked_fill(a, rng.random(np.shape(a)[-1:]) < 0.5)
    if kind == "softmax":
        return ops.softmax(a, params["log"])
    if kind == "layer_norm":
        return ops.layer_norm(a)
    if kind == "matmul":
        return ops.matmul(a, b)
    if kind == "gram":
        return ops.gram(a)
    if kind == "cross_entropy":
        return ops.cross_entropy(a, rng.integers(0, np.shape(a)[1], np.shape(a)[0]))
    if kind == "masked_softmax":
        return ops.masked_softmax(a, partial_mask(rng, np.shape(a)), params["log"])
    if kind == "masked_cross_entropy":
        targets = rng.integers(0, np.shape(a)[1], np.shape(a)[0])
        return ops.masked_cross_entropy(a, partial_mask(rng, np.shape(a), keep=targets), targets)
    if kind == "concatenate":
        return ops.concatenate(a, b)
    if kind == "stack":
        return ops.stack(a, b, params["axis"])
    raise AssertionError(kind)


def partial_mask(rng, shape, keep=None):
    """About half the entries True (to be filled with -inf), but never a whole row (the last
    axis): the entry ``keep`` of each row (a random one by default) stays False. A row of all
    -inf is one of the documented rows of docs/nan-rules.md, checked against PyTorch there."""
    mask = rng.random(shape) < 0.5
    if keep is None:
        keep = rng.integers(0, shape[-1], shape[:-1])
    np.put_along_axis(mask, np.asarray(keep)[..., None], False, axis=-1)
    return mask


def run(leaves, seed, steps, ops):
    """Every intermediate result, and the loss sum_k (result_k * W_k).sum() over all of them
    (so every result reaches the loss, most by more than one path)."""
    rng = np.random.default_rng(seed)
    pool = list(leaves)
    for kind, i, j, params in steps:
        pool.append(evaluate_step(kind, [pool[i], pool[j]], params, ops, rng))
    results = pool[len(leaves):]
    loss = 0.0
    for r in results:
        weights = rng.uniform(-1, 1, np.shape(r))
        loss = loss + (r * weights).sum()
    return results, loss


def check(seed, leaf_shapes, steps):
    """Values equal the numpy reference's; gradients equal its central finite differences."""
    values = [np.random.default_rng([seed, k]).uniform(-2, 2, shape) for k, shape in enumerate(leaf_shapes)]
    leaves = [Tensor(v.copy(), requires_grad=True) for v in values]
    results, loss = run(leaves, seed, steps, MinigradOps)
    expected_results, _ = run(values, seed, steps, numpy_ops)
    for k, (got, want) in enumerate(zip(results, expected_results)):
        assert got.dtype == np.float64, f"step {k} gave dtype {got.dtype}"
        np.testing.assert_allclose(got.data, want, rtol=1e-9, atol=1e-12, err_msg=f"value of step {k}")
    loss.backward()

    eps = 1e-6
    for k, (leaf, value) in enumerate(zip(leaves, values)):
        numeric = np.zeros(value.shape)
        for index in np.ndindex(value.shape):
            plus, minus = value.copy(), value.copy()
            plus[index] += eps
            minus[index] -= eps
            high = run(values[:k] + [plus] + values[k + 1:], seed, steps, numpy_ops)[1]
            low = run(values[:k] + [minus] + values[k + 1:], seed, steps, numpy_ops)[1]
            numeric[index] = (high - low) / (2 * eps)
        analytic = np.zeros(value.shape) if leaf.grad is None else leaf.grad
        np.testing.assert_allclose(analytic, numeric, rtol=1e-4, atol=1e-5, err_msg=f"gradient of leaf {k}")


@pytest.mark.parametrize("seed", range(PROGRAMS))
def test_random_graphs_match_numpy_values_and_finite_difference_gradients(seed):
    leaf_shapes, steps = make_program(seed)
    try:
        check(seed, leaf_shapes, steps)
    except AssertionError as failure:
        # report the shortest failing program: the first n steps of this one
        shortest = next(n for n in range(1, len(steps) + 1) if fails(seed, leaf_shapes, steps[:n]))
        program = "\n".join(f"  r{len(leaf_shapes) + n} = {kind} {params} of r{i}"
                             + (f", r{j}" if kind in TWO_OPERANDS else "")
                             for n, (kind, i, j, params) in enumerate(steps[:shortest]))
        raise AssertionError(f"seed {seed}, leaves r0..r{len(leaf_shapes) - 1} of shapes {leaf_shapes}, "
                             f"fails after {shortest} step(s):\n{program}\n{failure}") from None


def fails(seed, leaf_shapes, steps):
    try:
        check(seed, leaf_shapes, steps)
        return False
    except AssertionError:
        return True


SECOND_ORDER_PROGRAMS = 60     # the first 60 of the same programs, differentiated twice


@pytest.mark.parametrize("seed", range(SECOND_ORDER_PROGRAMS))
def test_random_graphs_second_derivatives_match_finite_differences_of_their_gradients(seed):
    """Hessian-vector products of the same programs, reverse over reverse (autograd.grad with
    create_graph) and forward over reverse (func.jvp of func.grad), against central differences
    of the first-order gradients (checked against numpy above) along the same direction."""
    leaf_shapes, steps = make_program(seed)
    values = [np.random.default_rng([seed, k]).uniform(-2, 2, shape) for k, shape in enumerate(leaf_shapes)]
    direction = [np.random.default_rng([seed, k, 1]).uniform(-1, 1, shape) for k, shape in enumerate(leaf_shapes)]

    def loss(*leaves):
        return run(list(leaves), seed, steps, MinigradOps)[1]

    def flat_gradient(arrays):
        leaves = [Tensor(a, requires_grad=True) for a in arrays]
        loss(*leaves).backward()
        return np.concatenate([(np.zeros(x.shape) if x.grad is None else x.grad).reshape(-1) for x in leaves])

    eps = 1e-5
    numeric = (flat_gradient([x + eps * d for x, d in zip(values, direction)])
               - flat_gradient([x - eps * d for x, d in zip(values, direction)])) / (2 * eps)

    leaves = [Tensor(x.copy(), requires_grad=True) for x in values]
    grads = mg.autograd.grad(loss(*leaves), leaves, create_graph=True, allow_unused=True)
    along = sum(((g * Tensor(d)).sum() for g, d in zip(grads, direction) if g is not None), Tensor(np.array(0.0)))
    second = mg.autograd.grad(along, leaves, allow_unused=True) if along.requires_grad else [None] * len(leaves)
    reverse = np.concatenate([(np.zeros(x.shape) if h is None else h.data).reshape(-1) for x, h in zip(leaves, second)])

    every = tuple(range(len(values)))
    gradient = func.grad(loss, argnums=every)
    _, forward = func.jvp(lambda *xs: mg.concatenate([g.reshape(-1) for g in gradient(*xs)]),
                          tuple(Tensor(x) for x in values), tuple(Tensor(d) for d in direction))
    scale = max(1.0, np.abs(numeric).max())
    np.testing.assert_allclose(reverse, numeric, rtol=1e-4, atol=1e-5 * scale, err_msg="reverse over reverse")
    np.testing.assert_allclose(forward.numpy(), numeric, rtol=1e-4, atol=1e-5 * scale, err_msg="forward over reverse")
