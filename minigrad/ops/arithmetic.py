"""+, -, *, /, x ** p (constant exponent) and b ** x (constant base). Broadcasting is undone by the engine
(``function.unbroadcast``), so each backward returns full-size gradients.

Each op's ``backward`` (vector-Jacobian product) and ``jvp`` (Jacobian-vector
product, forward mode) use only operators, so the same lines run on numpy
arrays (first order) and on Tensors (``create_graph=True``, nested forward
mode): ``differentiable_backward = True``, see ``function.py``."""
import numpy as np

from ..function import Function, tangent_sum
from .. import tensor_type
from . import xp
from .checks import broadcast_shape, unwrap


class Add(Function):
    differentiable_backward = True

    def forward(self, a, b):
        if a.shape != b.shape:
            broadcast_shape("add", a.shape, b.shape)
        return a + b

    def backward(self, grad):
        return grad, grad

    def jvp(self, da, db):
        return tangent_sum(da, db)


class Sub(Function):
    differentiable_backward = True

    def forward(self, a, b):
        if a.shape != b.shape:
            broadcast_shape("sub", a.shape, b.shape)
        return a - b

    def backward(self, grad):
        return grad, (-grad if self.needs_input_grad[1] else None)

    def jvp(self, da, db):
        return tangent_sum(da, None if db is None else -db)


class Mul(Function):
    differentiable_backward = True

    def forward(self, a, b):
        if a.shape != b.shape:
            broadcast_shape("mul", a.shape, b.shape)
        return a * b

    def backward(self, grad, *, a, b):
        need_a, need_b = self.needs_input_grad
        return (grad * b if need_a else None,
                grad * a if need_b else None)

    def jvp(self, da, db, *, a, b):
        return tangent_sum(None if da is None else da * b, None if db is None else a * db)


class Div(Function):
    differentiable_backward = True

    def forward(self, a, b):
        if a.shape != b.shape:
            broadcast_shape("div", a.shape, b.shape)
        return a / b

    def backward(self, grad, *, a, b):
        need_a, need_b = self.needs_input_grad
        grad_a = grad / b
        return (grad_a if need_a else None,
                -grad_a * a / b if need_b else None)

    def jvp(self, da, db, *, a, b):
        return tangent_sum(None if da is None else da / b, None if db is None else -db * a / b / b)


class Neg(Function):
    differentiable_backward = True

    def forward(self, a):
        return -a

    def backward(self, grad):
        return -grad

    def jvp(self, da):
        return -da


class Pow(Function):
    """x ** p for a constant number p."""
    differentiable_backward = True

    def forward(self, a, exponent):
        self.p = _constant_exponent(exponent)
        return a ** self.p

    def backward(self, grad, *, a):
        if self.p == 0:
            return xp.zeros_like(grad)     # x**0 is constant (avoid 0 * 0**-1 = nan at x = 0)
        return grad * (self.p * a ** (self.p - 1))

    jvp = backward      # elementwise: the Jacobian is diagonal, so J v and v J are the same product


class ScalarBasePow(Function):
    """base ** x for a constant base (``2 ** x``; the base is an input without gradient);
    d/dx = base ** x * log(base).

    As in PyTorch, the gradient is 0 where base == 0 and x >= 0 (instead of 0 * -inf)."""
    differentiable_backward = True

    def forward(self, a, base):
        self.zero_base_ok = (base == 0) & (a >= 0)
        return base ** a

    def backward(self, grad, *, base, out):
        return grad * self._slope(base, out), None

    def jvp(self, da, dbase, *, base, out):
        return da * self._slope(base, out)      # the base is a constant: no tangent of its own

    def _slope(self, base, out):
        with np.errstate(divide="ignore", invalid="ignore"):     # log(0) = -inf, log(-2) = nan: kept
            slope = out * xp.log(base)
        return xp.where(self.zero_base_ok, slope.dtype.type(0), slope)


def scalar_base_pow(x, base):
    """``base ** x`` for a constant base (a number or an array without gradient)."""
    if getattr(base, "requires_grad", False):
        raise TypeError("pow: the base must be a constant here; for a tensor base that needs a "
                        "gradient write base ** x as exp(x * log(base))")
    base = np.asarray(unwrap(base))
    if base.dtype.kind not in "iuf":
        raise TypeError(f"pow: the base must be a number, got dtype {base.dtype}")
    if x.dtype.kind == "f":
        base = base.astype(x.dtype)
    broadcast_shape("pow", base.shape, x.shape)
    return ScalarBasePow.apply(x, tensor_type.constant(base))


def _constant_exponent(exponent):
    if getattr(exponent, "requires_grad", False):
        raise TypeError("pow: the exponent must be a constant number; for a tensor exponent "
                        "that needs a gradient write exp(b * log(a))")
    value = np.asarray(unwrap(exponent))
    if value.size != 1 or value.dtype.kind not in "iuf":
        raise TypeError(f"pow: the exponent must be a single number, got {type(exponent).__name__} "
                        f"of shape {value.shape} and dtype {value.dtype}")
    return value.item()
