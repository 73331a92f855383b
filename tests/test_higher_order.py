"""Gradients of gradients, forward mode and ``minigrad.func``, checked against
finite differences and closed forms (the per-op checks are in test_higher_order_ops.py)."""
import threading

import numpy as np
import pytest

import minigrad as mg
from minigrad import Tensor, autograd, forward_ad, func, gradgradcheck, jvpcheck
from minigrad import functional as F
from minigrad.function import Function
from minigrad.ops import xp
from minigrad.gradcheck import GradcheckError


def leaf(values):
    return Tensor(np.array(values, dtype=np.float64), requires_grad=True)


def numeric_grad(f, x, eps=1e-6):
    """Central differences of a scalar numpy function."""
    g = np.zeros_like(x)
    for k in range(x.size):
        e = np.zeros_like(x)
        e.flat[k] = eps
        g.flat[k] = (f(x + e) - f(x - e)) / (2 * eps)
    return g


# A small MLP
def mlp(x, w1, w2):
    return ((x @ w1).tanh() @ w2).sigmoid().mean()


def mlp_numpy(x, w1, w2):
    return (1 / (1 + np.exp(-(np.tanh(x @ w1) @ w2)))).mean()


rng = np.random.default_rng(0)
X, W1, W2 = rng.standard_normal((4, 3)), rng.standard_normal((3, 5)), rng.standard_normal((5, 2))


# ------------------------------------------------------ differentiable backward
def test_backward_create_graph_gives_a_grad_that_can_be_differentiated_again():
    x = leaf([1.0, 2.0, -3.0])
    (x ** 4).sum().backward(create_graph=True)
    first = x.grad
    assert isinstance(first, Tensor) and first.grad_fn is not None
    np.testing.assert_allclose(first.detach().numpy(), 4 * x.data ** 3)
    x.grad = None
    first.sum().backward(create_graph=True)
    second = x.grad
    np.testing.assert_allclose(second.detach().numpy(), 12 * x.data ** 2)
    third, = autograd.grad(second.sum(), x)
    np.testing.assert_allclose(third.numpy(), 24 * x.data)


def test_plain_backward_still_gives_numpy_arrays():
    x = leaf([1.0, 2.0])
    (x * x).sum().backward()
    assert type(x.grad) is np.ndarray


def test_backward_keeps_its_old_argument_name():
    x = leaf([1.0, 2.0])
    (x * 3).backward(grad=np.array([1.0, 2.0]))
    np.testing.assert_allclose(x.grad, [3, 6])
    x.grad = None
    (x * 3).backward(np.array([1.0, 2.0]))
    np.testing.assert_allclose(x.grad, [3, 6])
    with pytest.raises(TypeError, match="once"):
        (x * 3).backward(np.ones(2), grad=np.ones(2))


def test_hessian_vector_product_of_an_mlp_agrees_with_central_differences():
    w1, w2 = leaf(W1), leaf(W2)
    v1, v2 = rng.standard_normal(W1.shape), rng.standard_normal(W2.shape)
    loss = mlp(Tensor(X), w1, w2)
    g1, g2 = autograd.grad(loss, [w1, w2], create_graph=True)
    hv1, hv2 = autograd.grad((g1 * v1).sum() + (g2 * v2).sum(), [w1, w2])

    def gradient(a, b):
        ta, tb = leaf(a), leaf(b)
        mlp(Tensor(X), ta, tb).backward()
        return ta.grad, tb.grad
    eps = 1e-5
    plus, minus = gradient(W1 + eps * v1, W2 + eps * v2), gradient(W1 - eps * v1, W2 - eps * v2)
    np.testing.assert_allclose(hv1.numpy(), (plus[0] - minus[0]) / (2 * eps), rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(hv2.numpy(), (plus[1] - minus[1]) / (2 * eps), rtol=1e-6, atol=1e-9)
    # and the model matches its numpy twin, so the curvature is the MLP's
    assert abs(loss.item() - mlp_numpy(X, W1, W2)) < 1e-12


def test_the_mlp_passes_gradgradcheck_and_jvpcheck():
    args = [leaf(X), leaf(W1), leaf(W2)]
    assert gradgradcheck(mlp, args)
    assert jvpcheck(mlp, args)


def test_grad_returns_a_tuple_and_leaves_dot_grad_alone():
    x, y = leaf([1.0, 2.0]), leaf([3.0, 4.0])
    gx, gy = autograd.grad((x * y).sum(), [x, y])
    np.testing.assert_allclose(gx.numpy(), [3, 4])
    np.testing.assert_allclose(gy.numpy(), [1, 2])
    assert x.grad is None and y.grad is None


def test_grad_with_respect_to_an_intermediate_stops_there():
    x = leaf([1.0, 2.0])
    h = x * x
    g, = autograd.grad((h * 3).sum(), h)
    np.testing.assert_allclose(g.numpy(), [3, 3])
    assert x.grad is None


def test_grad_of_several_outputs_with_grad_outputs():
    x = leaf([1.0, 2.0])
    g, = autograd.grad([x * 2, x * x], x, grad_outputs=[np.ones(2), np.array([1.0, 10.0])])
    np.testing.assert_allclose(g.numpy(), [2 + 2, 2 + 40])


def test_grad_allow_unused():
    x, unused = leaf([1.0]), leaf([2.0])
    with pytest.raises(RuntimeError, match="not used.*allow_unused=True"):
        autograd.grad((x * 2).sum(), [x, unused])
    gx, gu = autograd.grad((x * 2).sum(), [x, unused], allow_unused=True)
    assert gu is None and gx.item() == 2


def test_grad_needs_inputs_that_require_grad():
    with pytest.raises(RuntimeError, match="input 0 does not require grad"):
        autograd.grad((leaf([1.0]) * 2).sum(), Tensor([1.0]))


def test_retain_graph_defaults_to_create_graph():
    x = leaf([1.0, 2.0])
    y = (x.exp() * x).sum()
    autograd.grad(y, x, create_graph=True)
    autograd.grad(y, x)                  # the graph was kept by create_graph=True
    with pytest.raises(RuntimeError, match="a second time"):
        autograd.grad(y, x)              # ... and freed by the plain call


def test_gradient_wrt_the_incoming_gradient():
    # d/dv of the vjp v . J is J: backward under create_graph is differentiable in grad too
    x = leaf([0.5, -1.0])
    v = leaf([2.0, 3.0])
    g, = autograd.grad(x.tanh(), x, grad_outputs=v, create_graph=True)
    gv, = autograd.grad(g.sum(), v)
    np.testing.assert_allclose(gv.numpy(), 1 - np.tanh(x.data) ** 2)


def test_gradient_penalty_trains_through_the_weights():
    w = leaf([[0.5, -0.3], [0.2, 0.8]])
    x = leaf([[1.0, 2.0]])
    out = ((x.reshape(1, 2, 1) * w).sum(axis=1)).tanh().sum()
    gx, = autograd.grad(out, x, create_graph=True)
    penalty = (gx * gx).sum()
    penalty.backward()

    def penalty_of(w_):
        pre = np.array([[1.0, 2.0]]) @ w_
        return (((1 - np.tanh(pre) ** 2) @ w_.T) ** 2).sum()
    np.testing.assert_allclose(w.grad, numeric_grad(penalty_of, w.data), rtol=1e-6)


# ------------------------------------------------ hooks, retain_grad, anomaly
def test_hooks_see_and_replace_the_gradient_on_the_differentiable_pass():
    x = leaf([1.0, 2.0])
    h = x * x
    seen = []
    h.register_hook(lambda g: seen.append(g) or g * 2)
    h.retain_grad()
    (h * x).sum().backward(create_graph=True)      # d/dx (x^3) with h's gradient doubled: 2x^2 + 2x*x*2
    assert isinstance(seen[0], Tensor)
    assert isinstance(h.grad, Tensor)
    np.testing.assert_allclose(h.grad.detach().numpy(), 2 * x.data)
    np.testing.assert_allclose(x.grad.detach().numpy(), x.data ** 2 + 2 * x.data * (2 * x.data))
    # x.grad = h + 4x^2; the second pass reaches h too, so its hook doubles there as well (PyTorch's rule)
    g2, = autograd.grad(x.grad.sum(), x)
    np.testing.assert_allclose(g2.numpy(), 2 * 2 * x.data + 8 * x.data)


@pytest.mark.filterwarnings("ignore:divide by zero")
def test_detect_anomaly_names_the_op_on_the_second_pass():
    x = leaf([0.0, 1.0])
    with mg.detect_anomaly():
        y = (x ** 1.5).sum()                                 # y' = 1.5 x^0.5 is finite at 0 ...
        g, = autograd.grad(y, x, create_graph=True)
        assert np.isfinite(g.detach().numpy()).all()
        with pytest.raises(mg.AnomalyError, match="Pow"):    # ... y'' = 0.75 x^-0.5 is not
            g.sum().backward()


def test_autograd_steps_under_create_graph_yield_tensors():
    x = leaf([1.0, 2.0])
    steps = list(mg.autograd_steps((x * x).sum(), create_graph=True))
    assert [s.fn.name for s in steps] == ["Sum", "Mul"]
    assert all(isinstance(g, Tensor) for s in steps for g in s.input_grads if g is not None)


# ---------------------------------------------------- what the checks catch
class _WrongSecondDerivative(Function):
    """x^3 whose backward treats 3x^2 as a constant: right first derivative, wrong second."""
    differentiable_backward = True

    def forward(self, a):
        return a ** 3

    def backward(self, grad, *, a):
        return grad * (3 * xp.constant(a) ** 2)

    def jvp(self, tangent, *, a):
        return tangent * (3 * xp.constant(a) ** 2) * 2      # wrong on purpose


def test_gradgradcheck_names_the_input_element_and_both_values():
    x = leaf([1.0, 2.0])
    assert mg.gradcheck(lambda a: _WrongSecondDerivative.apply(a), [x])
    with pytest.raises(GradcheckError, match=r"d\(gradient of input 0\)\[\d\] / d\(input 0\)\[\d\]: "
                                             r"numerical .* vs analytical"):
        gradgradcheck(lambda a: _WrongSecondDerivative.apply(a), [x])
    assert gradgradcheck(lambda a: _WrongSecondDerivative.apply(a), [x], raise_exception=False) is False


def test_jvpcheck_names_the_input_and_both_values():
    with pytest.raises(GradcheckError, match=r"jvpcheck failed for input 0 .* numerical .* vs forward mode"):
        jvpcheck(lambda a: _WrongSecondDerivative.apply(a), [leaf([1.0, 2.0])])


class _DerivedSaved(Function):
    """Claims a differentiable backward but saves an intermediate: must refuse, not guess."""
    differentiable_backward = True

    def forward(self, a):
        self.t = np.tanh(a)
        return self.t * a

    def backward(self, grad):
        return grad * (self.t + 0)


def test_a_saved_intermediate_is_refused_rather_than_treated_as_a_constant():
    x = leaf([1.0, 2.0])
    with pytest.raises(RuntimeError, match="_DerivedSaved has no double-backward / tangent rule yet.*'t'"):
        autograd.grad(_DerivedSaved.apply(x).sum(), x, create_graph=True)


def test_a_detached_twin_sharing_the_array_is_a_constant():
    x = leaf([1.0, 2.0])
    out = (x.detach() * x).sum()       # d/dx = x.detach() (constant): the second derivative is 0, not 1
    g, = autograd.grad(out, x, create_graph=True)
    np.testing.assert_array_equal(g.data, [1.0, 2.0])
    assert not g.requires_grad      # the rule read the detached input itself: a constant, as it should be


def test_replacing_an_inputs_data_after_forward_is_named_by_double_backward():
    x = leaf([1.0, 2.0])
    out = (x * x).sum()
    x.data = x.data * 1.0             # a new array: the op saw the old one
    g, = autograd.grad(out, x, retain_graph=True)     # first order: the values forward used
    np.testing.assert_array_equal(g.data, [2.0, 4.0])
    with pytest.raises(RuntimeError, match=r"backward through Mul: its input 0 \(shape \(2,\)\) had its "
                                           r"\.data replaced after Mul saved it"):
        autograd.grad(out, x, create_graph=True)


def test_a_rule_reading_a_name_that_is_no_input_is_refused_where_the_op_is_defined():
    with pytest.raises(TypeError, match=r"_Typo.backward reads 'c': .* forward's inputs \(a, b\) or 'out'"):
        class _Typo(Function):
            def forward(self, a, b):
                return a + b

            def backward(self, grad, *, c):
                return grad, grad


def test_a_cast_to_integers_carries_no_tangent():
    with forward_ad.dual_level():
        dual = forward_ad.make_dual(Tensor(np.array([1.5, 2.5])), Tensor(np.array([1.0, 1.0])))
        assert forward_ad.unpack_dual(dual.astype(np.int64)).tangent is None


class _FusedSquareSum(Function):
    """A fused op: numpy forward/backward of its own, and the composition it equals."""

    def forward(self, a, scale):
        self.scale = scale
        return scale * (a * a).sum()

    def backward(self, grad, *, a):
        return grad * 2 * self.scale * a

    @staticmethod
    def composition(a, scale):
        return (a * a).sum() * scale


def test_a_hook_on_a_fused_ops_input_runs_once_per_pass():
    x = leaf([0.5, -1.0])
    calls = []
    x.register_hook(lambda g: calls.append(1))
    g, = autograd.grad(_FusedSquareSum.apply(x, scale=2.0), x, create_graph=True)
    assert len(calls) == 1
    np.testing.assert_allclose(g.detach().numpy(), 4 * x.data)


def test_a_fused_op_is_differentiated_through_its_composition():
    args = [leaf([0.5, -1.0, 2.0])]
    fn = lambda a: _FusedSquareSum.apply(a.tanh(), scale=3.0)   # noqa: E731
    assert mg.gradcheck(fn, args) and gradgradcheck(fn, args) and jvpcheck(fn, args)
    hessian = func.hessian(fn)(Tensor(args[0].data))
    t = np.tanh(args[0].data)
    np.testing.assert_allclose(np.diag(hessian.numpy()), 3 * 2 * ((1 - t * t) ** 2 - 2 * t * t * (1 - t * t)))


# ------------------------------------------------------------- forward mode
def test_make_dual_and_unpack_dual():
    x = Tensor(np.array([1.0, 2.0]))
    with forward_ad.dual_level():
        dual = forward_ad.make_dual(x, Tensor(np.array([1.0, 0.5])))
        out = (dual * dual).exp()
        primal, tangent = forward_ad.unpack_dual(out)
        np.testing.assert_allclose(primal.numpy(), np.exp(x.data ** 2))
        np.testing.assert_allclose(tangent.numpy(), np.exp(x.data ** 2) * 2 * x.data * [1.0, 0.5])
        assert out.grad_fn is None and tangent.grad_fn is None     # no reverse graph recorded
        assert forward_ad.unpack_dual(Tensor([1.0])).tangent is None
    assert forward_ad.unpack_dual.__name__ == "unpack_dual"


def test_forward_ad_errors():
    with pytest.raises(RuntimeError, match="dual_level"):
        forward_ad.make_dual(Tensor([1.0]), Tensor([1.0]))
    with forward_ad.dual_level():
        with pytest.raises(ValueError, match="tangent has shape"):
            forward_ad.make_dual(Tensor([1.0, 2.0]), Tensor([1.0]))


def test_in_place_update_of_a_dual_tensor_updates_its_tangent():
    with forward_ad.dual_level():
        x = forward_ad.make_dual(Tensor(np.array([1.0, 2.0])), Tensor(np.array([1.0, 1.0])))
        y = Tensor(np.array([5.0, 5.0]))
        y += x * x
        y *= 3.0
        np.testing.assert_allclose(forward_ad.unpack_dual(y).tangent.numpy(), 3 * 2 * np.array([1.0, 2.0]))


def test_nested_levels_do_not_confuse_their_perturbations():
    # d/dx [x * (d/dy (x + y) at y = 1)] at x = 1 is 1; mixing the levels gives 2
    with forward_ad.dual_level():
        x = forward_ad.make_dual(Tensor(np.array(1.0)), Tensor(np.array(1.0)))
        with forward_ad.dual_level():
            y = forward_ad.make_dual(Tensor(np.array(1.0)), Tensor(np.array(1.0)))
            inner = forward_ad.unpack_dual(x + y).tangent
        outer = forward_ad.unpack_dual(x * inner).tangent
    assert outer.item() == 1.0
    one = (Tensor(np.array(1.0)),)
    _, derivative = func.jvp(lambda x: x * func.jvp(lambda y: x + y, one, one)[1], one, one)
    assert derivative.item() == 1.0


def test_nested_forward_mode_gives_second_derivatives():
    # forward over forward: d/dx of (d/dy sin-free f(x, y) = x^2 y^3 at y) = 2x * 3y^2
    f = lambda x, y: x * x * y ** 3      # noqa: E731
    x0, y0 = Tensor(np.array(1.5)), Tensor(np.array(-0.7))
    d_dy = lambda x: func.jvp(lambda y: f(x, y), (y0,), (Tensor(np.array(1.0)),))[1]   # noqa: E731
    _, mixed = func.jvp(d_dy, (x0,), (Tensor(np.array(1.0)),))
    assert abs(mixed.item() - 2 * 1.5 * 3 * 0.49) < 1e-12


def test_backward_inside_a_dual_level_carries_tangents():
    # forward over reverse without create_graph: the gradient's tangent is d(dloss/dw)/dx . t
    x = Tensor(np.array([0.3, -0.4]))
    t = np.array([1.0, 2.0])
    with forward_ad.dual_level():
        dual = forward_ad.make_dual(x, Tensor(t))
        dual.requires_grad = False
        w = Tensor(np.array([0.3, -0.4]), requires_grad=True)
        loss = (w * dual).tanh().sum()
        g, = autograd.grad(loss, w)
        _, hvp = forward_ad.unpack_dual(g)
    s = np.tanh(w.data * x.data)                     # g = (1 - s^2) x, elementwise
    expected = ((1 - s * s) - 2 * s * (1 - s * s) * w.data * x.data) * t
    np.testing.assert_allclose(hvp.numpy(), expected, rtol=1e-12)


# -------------------------------------------------------------- minigrad.func
def f_scalar(x):
    return (x.tanh() * x.exp()).sum() / (x * x + 1).sum()


def f_numpy(x):
    return (np.tanh(x) * np.exp(x)).sum() / (x * x + 1).sum()


X3 = np.array([0.3, -1.2, 0.8])


def test_func_grad_and_its_options():
    g = func.grad(f_scalar)(Tensor(X3))
    np.testing.assert_allclose(g.numpy(), numeric_grad(f_numpy, X3), rtol=1e-7)
    assert not g.requires_grad
    ga, gb = func.grad(lambda a, b: (a * b * b).sum(), argnums=(0, 1))(Tensor(X3), Tensor(2 * X3))
    np.testing.assert_allclose(ga.numpy(), 4 * X3 ** 2)
    np.testing.assert_allclose(gb.numpy(), 2 * X3 * 2 * X3)
    g, aux = func.grad(lambda a: ((a * a).sum(), "aux"), has_aux=True)(Tensor(X3))
    assert aux == "aux"
    with pytest.raises(RuntimeError, match="one-element"):
        func.grad(lambda a: a * 2)(Tensor(X3))


def test_grad_of_grad():
    d3 = func.grad(func.grad(func.grad(lambda x: (x ** 4).sum())))
    assert d3(Tensor(np.array(1.5))).item() == pytest.approx(24 * 1.5)


def test_vjp_and_jvp():
    out, vjp_fn = func.vjp(lambda x: x.tanh() * x, Tensor(X3))
    v = np.array([1.0, -2.0, 0.5])
    grad_x, = vjp_fn(Tensor(v))
    derivative = np.tanh(X3) + X3 * (1 - np.tanh(X3) ** 2)
    np.testing.assert_allclose(out.numpy(), np.tanh(X3) * X3)
    np.testing.assert_allclose(grad_x.numpy(), v * derivative)
    out, tangent = func.jvp(lambda x: x.tanh() * x, (Tensor(X3),), (Tensor(v),))
    np.testing.assert_allclose(tangent.numpy(), v * derivative)


def test_jacrev_and_jacfwd_agree_with_finite_differences():
    f = lambda x: (x.reshape(3, 1) * x).tanh()[:, 1:] * 2.0     # noqa: E731  R^3 -> R^{3x2}
    numpy_f = lambda x: np.tanh(x.reshape(3, 1) * x)[:, 1:] * 2.0   # noqa: E731
    expected = np.zeros((3, 2, 3))
    for k in range(3):
        e = np.zeros(3)
        e[k] = 1e-6
        expected[..., k] = (numpy_f(X3 + e) - numpy_f(X3 - e)) / 2e-6
    np.testing.assert_allclose(func.jacrev(f)(Tensor(X3)).numpy(), expected, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(func.jacfwd(f)(Tensor(X3)).numpy(), expected, rtol=1e-7, atol=1e-9)


def test_hessian_and_its_compositions_agree():
    expected = np.array([numeric_grad(lambda x: numeric_grad(f_numpy, x, 1e-5)[i], X3, 1e-5) for i in range(3)])
    x = Tensor(X3)
    for name, h in {"hessian": func.hessian(f_scalar), "jacfwd(jacrev)": func.jacfwd(func.jacrev(f_scalar)),
                    "jacrev(jacrev)": func.jacrev(func.jacrev(f_scalar)),
                    "jacrev(jacfwd)": func.jacrev(func.jacfwd(f_scalar)),
                    "jacfwd(jacfwd)": func.jacfwd(func.jacfwd(f_scalar)),
                    "jacrev(grad)": func.jacrev(func.grad(f_scalar))}.items():
        result = h(x)
        assert not result.requires_grad, name
        np.testing.assert_allclose(result.numpy(), expected, rtol=1e-5, atol=1e-8, err_msg=name)


def test_func_results_stay_connected_to_weights_outside_the_arguments():
    w = leaf([0.5, -0.5, 2.0])
    g = func.grad(lambda x: (x * w).tanh().sum())(Tensor(X3))
    assert g.requires_grad
    (g * g).sum().backward()

    def penalty(w_):
        return (((1 - np.tanh(X3 * w_) ** 2) * w_) ** 2).sum()
    np.testing.assert_allclose(w.grad, numeric_grad(penalty, w.data), rtol=1e-6)


def test_jacrev_and_jacfwd_with_has_aux_return_the_aux_undifferentiated():
    f = lambda x: ((x * x).tanh(), {"norm": (x * x).sum(), "label": "squares"})     # noqa: E731
    expected = np.diag(2 * X3 * (1 - np.tanh(X3 * X3) ** 2))
    for name, transform in {"jacrev": func.jacrev, "jacfwd": func.jacfwd}.items():
        jacobian, aux = transform(f, has_aux=True)(Tensor(X3))
        np.testing.assert_allclose(jacobian.numpy(), expected, rtol=1e-12, err_msg=name)
        assert aux["label"] == "squares" and aux["norm"].item() == pytest.approx((X3 * X3).sum()), name
        assert not aux["norm"].requires_grad and getattr(aux["norm"], "_tangents", None) is None, name
    # and they compose: the Hessian of a function with an aux
    hessian, aux = func.jacfwd(func.jacrev(lambda x: ((x ** 3).sum(), x.sum()), has_aux=True), has_aux=True)(Tensor(X3))
    np.testing.assert_allclose(hessian.numpy(), np.diag(6 * X3), rtol=1e-12)
    assert aux.item() == pytest.approx(X3.sum())
    with pytest.raises(TypeError, match=r"jacfwd\(has_aux=True\): f must return a pair"):
        func.jacfwd(lambda x: x * 2, has_aux=True)(Tensor(X3))


def test_forward_ad_levels_belong_to_the_thread():
    seen = {}
    with forward_ad.dual_level():
        x = forward_ad.make_dual(Tensor(np.array([1.0, 2.0])), Tensor(np.array([1.0, 1.0])))

        def other_thread():
            seen["levels"] = forward_ad.state.active
            seen["tangents"] = getattr(x * x, "_tangents", None)      # no level open here: plain values
            with pytest.raises(RuntimeError, match="no forward-AD level is open in this thread"):
                forward_ad.make_dual(Tensor([1.0]), Tensor([1.0]))
            seen["done"] = True
        worker = threading.Thread(target=other_thread)
        worker.start()
        worker.join()
        np.testing.assert_allclose(forward_ad.unpack_dual(x * x).tangent.numpy(), [2.0, 4.0])
    assert seen == {"levels": (), "tangents": None, "done": True}


def test_threads_running_forward_mode_at_once_keep_their_tangents_apart():
    barrier, errors = threading.Barrier(2), []

    def run(scale):
        try:
            barrier.wait()
            for _ in range(50):
                _, tangent = func.jvp(lambda x: (x * x).sum() * scale, (Tensor(X3),), (Tensor(np.ones(3)),))
                assert tangent.item() == pytest.approx(2 * X3.sum() * scale)
        except Exception as error:      # noqa: BLE001  (reported by the main thread)
            errors.append(error)
    workers = [threading.Thread(target=run, args=(s,)) for s in (1.0, 3.0)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert errors == []


# ------------------------------------------- constants carry no tangent term
def test_a_constant_operand_adds_no_tangent_term_even_at_inf():
    # Mul's tangent is da * b + a * db; b = 2 has no tangent, so no 0 * inf = NaN term (PyTorch: 2)
    _, tangent = func.jvp(lambda x: x * 2.0, (Tensor([np.inf]),), (Tensor([1.0]),))
    np.testing.assert_array_equal(tangent.numpy(), [2.0])
    _, tangent = func.jvp(lambda x: Tensor([np.inf]) * x + x / Tensor([np.inf]), (Tensor([3.0]),), (Tensor([1.0]),))
    np.testing.assert_array_equal(tangent.numpy(), [np.inf])


LOGITS = np.array([[1.0, -np.inf, 0.5, 2.0]])      # one masked logit
UNMASKED = [0, 2, 3]


def test_forward_mode_through_cross_entropy_with_a_masked_logit_is_finite():
    v = np.array([[0.3, -0.7, 1.1, 0.2]])
    _, tangent = func.jvp(lambda z: F.cross_entropy(z, np.array([0])), (Tensor(LOGITS),), (Tensor(v),))
    p = np.exp(LOGITS[0, UNMASKED] - np.log(np.exp(LOGITS[0, UNMASKED]).sum()))
    np.testing.assert_allclose(tangent.numpy(), p @ v[0, UNMASKED] - v[0, 0], rtol=1e-12)


def test_the_hessian_through_cross_entropy_with_a_masked_logit_has_no_nan():
    f = lambda z: F.cross_entropy(z, np.array([0])).tanh()     # noqa: E731
    hessian = func.hessian(f)(Tensor(LOGITS)).numpy().reshape(4, 4)
    unmasked = func.hessian(f)(Tensor(LOGITS[:, UNMASKED])).numpy().reshape(3, 3)
    assert not np.isnan(hessian).any()
    np.testing.assert_allclose(hessian[np.ix_(UNMASKED, UNMASKED)], unmasked, rtol=1e-12)
    assert (hessian[1] == 0).all() and (hessian[:, 1] == 0).all()


# ------------------------------------------- grad() walks only what it needs
def test_grad_walks_only_the_part_of_the_graph_leading_to_its_inputs():
    w, x = leaf([1.0, 1.0, 1.0]), leaf([1.0, 1.0, 1.0])
    a = (w * w).sum()
    y = (x * 2).sum() + a
    autograd.grad(a, w)                       # frees a's branch
    g, = autograd.grad(y, x)                  # needs only x's branch: fine, as in PyTorch
    np.testing.assert_array_equal(g.numpy(), [2.0, 2.0, 2.0])
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        autograd.grad(y, w)                   # w lies below the freed branch
    z = (x * 3).sum() + (w * w).sum()
    autograd.grad(z, x)                       # frees x's branch and Add, not (w * w)'s
    with pytest.raises(RuntimeError, match="a second time"):
        autograd.grad(z, [x, w])
