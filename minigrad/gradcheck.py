"""Check analytic gradients against central finite differences, in float64.

    gradcheck(lambda a, b: (a @ b).tanh(), [a, b])
    gradgradcheck(lambda a: (a * a).tanh().sum(), [a])    # second derivatives (create_graph=True)
    jvpcheck(lambda a: (a * a).tanh(), [a])               # forward mode (minigrad.forward_ad)

For every input tensor with ``requires_grad=True`` it compares the Jacobian
that reverse mode (``autograd.grad``) gives with the one from
(f(x + eps) - f(x - eps)) / (2 eps), element by element, and on a mismatch
says which input, which element, and both values. A NaN or infinite gradient on either side never passes, even
when both sides are NaN (PyTorch's gradcheck compares with equal_nan=False
too): the check asks whether each error is within tolerance, since asking
whether it exceeds it is False for NaN. Inputs are copied to float64 first
(float32 differences are too coarse for the default tolerances), so the
function under test must accept float64 tensors. The checks leave their inputs
as they found them (values, arrays, ``.grad``), even when interrupted.
"""
import numpy as np

from . import forward_ad
from .autograd import grad
from .grad_mode import enable_grad
from .ops import concatenate
from .tensor import Tensor


class GradcheckError(AssertionError):
    pass


def _checked_inputs(check, inputs):
    """The inputs as float64 (see ``_as_float64``) and the positions of those that require grad."""
    inputs = [_as_float64(x) for x in inputs]
    checked = [i for i, x in enumerate(inputs) if isinstance(x, Tensor) and x.requires_grad]
    if not checked:
        raise ValueError(f"{check}: no input has requires_grad=True, so there is nothing to check")
    return inputs, checked


def _output(check, fn, inputs):
    with enable_grad():
        out = fn(*inputs)
    if not isinstance(out, Tensor) or not out.requires_grad:
        raise ValueError(f"{check}: fn must return a Tensor that depends on the inputs being checked")
    return out


def _worst_mismatch(analytic, expected, atol, rtol):
    """The index of the worst element outside ``atol + rtol * |expected|``, or None if all agree.

    "not <=" rather than ">": a NaN error (NaN or inf on either side) is a failure, never a
    pass; non-finite mismatches count as the worst."""
    error = np.abs(analytic - expected)
    bad = ~(error <= atol + rtol * np.abs(expected))
    if not bad.any():
        return None
    worst = np.where(np.isnan(error), np.inf, error * bad)
    return np.unravel_index(np.argmax(worst), np.shape(expected))


def _values(check, expected, analytic, where, atol, rtol):
    note = "" if np.isfinite(expected[where]) and np.isfinite(analytic[where]) \
        else "; a NaN or infinite gradient never passes"
    return f"numerical {expected[where]:.8g} vs {check} {analytic[where]:.8g} (atol={atol}, rtol={rtol}){note}"


def gradcheck(fn, inputs, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True, max_full_outputs=256,
              seed=0):
    """True if every gradient matches; otherwise raise ``GradcheckError`` (or return False).

    Outputs with more than ``max_full_outputs`` elements are checked through
    random projections v . J (three of them) instead of the full Jacobian.
    """
    inputs, checked = _checked_inputs("gradcheck", inputs)
    out = _output("gradcheck", fn, inputs)
    if out.dtype != np.float64:
        raise ValueError(f"gradcheck: fn returned dtype {out.dtype} for float64 inputs; it must keep float64")

    rng = np.random.default_rng(seed)
    full = out.size <= max_full_outputs
    directions = np.eye(out.size).reshape((out.size,) + out.shape) if full \
        else rng.standard_normal((3,) + out.shape)

    def evaluate():
        with enable_grad():
            return fn(*inputs).data.astype(np.float64).reshape(-1)

    # numerical Jacobians: one column per input element, from two evaluations each
    numeric = {i: numeric_jacobian(evaluate, inputs[i], eps) for i in checked}

    for row, v in enumerate(directions):
        # grad(), not backward(): no .grad anywhere (the inputs', a closure's weights') is touched
        analytic_rows = grad(out, [inputs[i] for i in checked], np.asarray(v), retain_graph=True, allow_unused=True)
        for i, analytic in zip(checked, analytic_rows):
            x = inputs[i]
            analytic = np.zeros(x.shape) if analytic is None else analytic.data
            if analytic.shape != x.shape:
                return _fail(raise_exception, f"gradcheck: input {i} has shape {x.shape} but its gradient "
                                              f"has shape {analytic.shape}")
            # a full row is a column of the Jacobian, taken as it is: a product with the one-hot
            # direction would spread a NaN of another output element over the whole row (NaN * 0)
            column = numeric[i][:, row] if full else numeric[i] @ v.reshape(-1)
            expected = column.reshape(x.shape)
            where = _worst_mismatch(analytic, expected, atol, rtol)
            if where is not None:
                what = f"output element {tuple(map(int, np.unravel_index(row, out.shape)))}" if full \
                    else f"random projection {row} of the output"
                return _fail(raise_exception,
                             f"gradcheck failed for input {i} (shape {x.shape}) at element "
                             f"{tuple(map(int, where))}, {what}: "
                             + _values("analytical", expected, analytic, where, atol, rtol))
    return True


def numeric_jacobian(evaluate, x, eps):
    """(x.size, out.size) matrix of central differences. ``x`` is perturbed in place one
    element at a time and always restored, whatever ``evaluate`` raises (Ctrl-C included):
    the same array object, the same bits."""
    original_data = x.data
    if not x.data.flags.c_contiguous:
        x.data = x.data.copy(order="C")   # else reshape(-1) copies and the perturbation misses x
    flat = x.data.reshape(-1)          # a view: perturbing it perturbs x
    columns = []
    try:
        for k in range(flat.size):
            original = flat[k]
            try:
                flat[k] = original + eps
                plus = evaluate()
                flat[k] = original - eps
                minus = evaluate()
            finally:
                flat[k] = original
            columns.append((plus - minus) / (2 * eps))
    finally:
        x.data = original_data
    return np.array(columns)


def _as_float64(x):
    # float64 tensors are used as they are, so a module's own parameters can be checked
    if isinstance(x, Tensor) and x.dtype.kind == "f" and x.dtype != np.float64:
        copy = Tensor(x.data.astype(np.float64), requires_grad=x.requires_grad)
        copy.name = x.name
        return copy
    return x


def _fail(raise_exception, message):
    if raise_exception:
        raise GradcheckError(message)
    return False


def gradgradcheck(fn, inputs, grad_outputs=None, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True, seed=0):
    """True if every second derivative matches; otherwise raise ``GradcheckError`` (or return False).

    As PyTorch's ``gradgradcheck``: with a random ``grad_outputs`` v (or the one
    given), the gradients g_j = d(v . fn)/d(input j) from
    ``autograd.grad(create_graph=True)`` are differentiated again, with respect
    to every checked input and to v, and compared with central differences of
    g_j computed by the ordinary first-order backward. A mismatch names the
    gradient, its element, the input it is differentiated by, that element, and
    both values.
    """
    inputs, checked = _checked_inputs("gradgradcheck", inputs)
    out = _output("gradgradcheck", fn, inputs)
    v = np.random.default_rng(seed).standard_normal(out.shape) if grad_outputs is None \
        else np.asarray(getattr(grad_outputs, "data", grad_outputs), dtype=np.float64)
    v = Tensor(np.array(v, dtype=np.float64), requires_grad=True)
    variables = [inputs[i] for i in checked] + [v]
    names = [f"input {i}" for i in checked] + ["grad_outputs"]
    sizes = [inputs[i].size for i in checked]

    def gradients(create_graph):
        with enable_grad():
            gs = grad(fn(*inputs), [inputs[i] for i in checked], v, create_graph=create_graph, allow_unused=True)
        return [Tensor(np.zeros(inputs[i].shape)) if g is None else g for i, g in zip(checked, gs)]

    def evaluate():     # the first-order gradients as one flat vector
        return np.concatenate([g.data.reshape(-1) for g in gradients(False)])

    numeric = [numeric_jacobian(evaluate, x, eps) for x in variables]   # (x.size, total gradient size)
    flat = concatenate([g.reshape(-1) for g in gradients(True)])
    for k in range(flat.size):
        if flat.requires_grad:
            row = grad(flat, variables, np.eye(flat.size)[k], retain_graph=True, allow_unused=True)
        else:
            row = (None,) * len(variables)     # the gradients do not depend on the inputs at all
        for x, name, expected_column, analytic in zip(variables, names, numeric, row):
            analytic = np.zeros(x.shape) if analytic is None else analytic.data
            expected = expected_column[:, k].reshape(x.shape)
            where = _worst_mismatch(analytic, expected, atol, rtol)
            if where is not None:
                which = int(np.searchsorted(np.cumsum(sizes), k, side="right"))
                element = np.unravel_index(k - sum(sizes[:which]), inputs[checked[which]].shape)
                return _fail(raise_exception,
                             f"gradgradcheck failed: d(gradient of input {checked[which]})"
                             f"[{', '.join(map(str, map(int, element)))}] / d({name})"
                             f"[{', '.join(map(str, map(int, where)))}]: "
                             + _values("analytical", expected, analytic, where, atol, rtol))
    return True


def jvpcheck(fn, inputs, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True, seed=0):
    """True if forward mode's Jacobian-vector products match central differences.

    For each input with ``requires_grad=True`` in turn, a random tangent t (zero
    on the other inputs) goes through ``fn`` with ``minigrad.forward_ad``; the
    output's tangent must equal (fn(x + eps t) - fn(x - eps t)) / (2 eps). A
    mismatch names the input, the output element and both values.
    """
    inputs, checked = _checked_inputs("jvpcheck", inputs)
    rng = np.random.default_rng(seed)
    for i in checked:
        x = inputs[i]
        t = rng.standard_normal(x.shape)
        with forward_ad.dual_level():
            dual_inputs = list(inputs)
            dual_inputs[i] = forward_ad.make_dual(x, Tensor(t))
            out = fn(*dual_inputs)
            primal, tangent = forward_ad.unpack_dual(out)
        analytic = np.zeros(out.shape) if tangent is None else tangent.data
        original = x.data
        try:
            x.data = original + eps * t
            plus = fn(*inputs).data
            x.data = original - eps * t
            minus = fn(*inputs).data
        finally:
            x.data = original
        expected = (plus - minus) / (2 * eps)
        where = _worst_mismatch(analytic, expected, atol, rtol)
        if where is not None:
            return _fail(raise_exception,
                         f"jvpcheck failed for input {i} (shape {x.shape}) along a random tangent, at output "
                         f"element {tuple(map(int, where))}: "
                         + _values("forward mode", expected, analytic, where, atol, rtol))
    return True
