"""The page's check overlay: each leaf's gradient in the step against central finite differences.

A float64 copy of the model runs the same attention step on the same inputs;
for every leaf that needs a gradient (the module's parameters, its input x and
memory) a few elements (the largest gradient and some drawn at random) and one
random direction over all elements are perturbed by ±eps, and
(L(p + eps) - L(p - eps)) / 2 eps is compared with the gradient the step's
backward gave. eps and the tolerances are ``minigrad.gradcheck``'s defaults.
"""
import copy
import inspect

import numpy as np

from minigrad import Tensor, gradcheck, no_grad
from minigrad.gradcheck import numeric_jacobian

from ..attention_graph import as_leaves, capture_attention_call, find_attention_module
from .subject import as_subject

_DEFAULTS = inspect.signature(gradcheck).parameters
EPS = _DEFAULTS["eps"].default
TOLERANCE = {"atol": _DEFAULTS["atol"].default, "rtol": _DEFAULTS["rtol"].default}
ELEMENTS = 6                # elements checked per tensor, besides one random direction over all of them


def check_gradients(model, subject, kind, layer, record, seed=0) -> dict:
    """{tensor index in ``record``: {"ok", "max_error", "rows": [[what, backward's, finite difference]]}};
    ``max_error`` is the largest difference as a fraction of the tolerance (at most 1: ok)."""
    model64 = copy.deepcopy(model).to(np.float64)
    name, module = find_attention_module(model64, kind, layer)
    call = as_leaves(capture_attention_call(model64, module, as_subject(model, subject).inputs(model64)))
    leaves64 = dict(model64.named_parameters())
    leaves64[call.x.name] = call.x
    if call.memory is not None:
        leaves64[call.memory.name] = call.memory
    was_fused, module.fused = module.fused, False

    def loss() -> float:
        with no_grad():
            return float(call.run(module).data.sum())

    rng = np.random.default_rng(seed)
    results = {}
    try:
        for index, gradient in record.totals.items():
            tensor = record.tensors[index]
            if tensor.grad_fn is None and record.name_of(tensor) in leaves64:
                results[index] = _check_one(leaves64[record.name_of(tensor)], gradient, loss, rng)
    finally:
        module.fused = was_fused
    return results


def _check_one(leaf, gradient, loss, rng) -> dict:
    flat = leaf.data.reshape(-1)     # float64 and contiguous: a view, so writing it changes the leaf
    assert np.shares_memory(flat, leaf.data), "a leaf's data must be contiguous to perturb it in place"
    grad = np.asarray(gradient, dtype=np.float64).reshape(-1)
    picks = [int(np.argmax(np.abs(grad)))]
    picks += [int(k) for k in rng.choice(flat.size, size=min(ELEMENTS - 1, flat.size), replace=False)]
    picks = list(dict.fromkeys(picks))
    numeric = _differences(flat, loss, flat[picks], lambda values: flat.__setitem__(picks, values))
    rows = [[f"[{', '.join(map(str, np.unravel_index(k, leaf.shape)))}]", float(grad[k]), float(n)]
            for k, n in zip(picks, numeric)]
    direction, original = rng.standard_normal(flat.size), flat.copy()
    (along,) = _differences(flat, loss, [0.0], lambda t: flat.__setitem__(slice(None), original + t[0] * direction))
    rows.append(["random direction v: ⟨∇, v⟩", float(grad @ direction), float(along)])
    # each difference as a fraction of what gradcheck allows (atol + rtol |numerical|): at most 1 passes;
    # not relative to the value alone, as some gradients are exactly 0 (a key's bias: softmax ignores it)
    errors = [abs(a - n) / (TOLERANCE["atol"] + TOLERANCE["rtol"] * abs(n)) for _, a, n in rows]
    return {"ok": bool(max(errors) <= 1), "max_error": float(max(errors)), "rows": rows}


def _differences(flat, loss, start, place) -> np.ndarray:
    """d loss / d u at u = ``start``, by gradcheck's own central differences, where ``place(u)``
    writes u into the leaf's values ``flat`` (a few of its elements, or a step along a direction)."""
    original = flat.copy()
    u = Tensor(np.array(start, dtype=np.float64))

    def evaluate():
        place(u.data)
        return np.array([loss()])

    try:
        return numeric_jacobian(evaluate, u, EPS)[:, 0]
    finally:
        flat[:] = original
