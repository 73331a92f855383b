"""+, -, *, / and ** (scalar exponent). Broadcasting is undone by the engine
(``function.unbroadcast``), so each backward returns full-size gradients."""
import numpy as np

from ..function import Function
from .checks import broadcast_shape, unwrap


class Add(Function):
    def forward(self, a, b):
        if a.shape != b.shape:
            broadcast_shape("add", a.shape, b.shape)
        return a + b

    def backward(self, grad):
        return grad, grad


class Sub(Function):
    def forward(self, a, b):
        if a.shape != b.shape:
            broadcast_shape("sub", a.shape, b.shape)
        return a - b

    def backward(self, grad):
        return grad, (-grad if self.needs_input_grad[1] else None)


class Mul(Function):
    def forward(self, a, b):
        if a.shape != b.shape:
            broadcast_shape("mul", a.shape, b.shape)
        self.a, self.b = a, b
        return a * b

    def backward(self, grad):
        need_a, need_b = self.needs_input_grad
        return (grad * self.b if need_a else None,
                grad * self.a if need_b else None)


class Div(Function):
    def forward(self, a, b):
        if a.shape != b.shape:
            broadcast_shape("div", a.shape, b.shape)
        self.a, self.b = a, b
        return a / b

    def backward(self, grad):
        need_a, need_b = self.needs_input_grad
        grad_a = grad / self.b
        return (grad_a if need_a else None,
                -grad_a * self.a / self.b if need_b else None)


class Neg(Function):
    def forward(self, a):
        return -a

    def backward(self, grad):
        return -grad


class Pow(Function):
    """x ** p for a constant number p."""

    def forward(self, a, exponent):
        p = _constant_exponent(exponent)
        self.a, self.p = a, p
        return a ** p

    def backward(self, grad):
        if self.p == 0:
            return np.zeros_like(grad)     # x**0 is constant (avoid 0 * 0**-1 = nan at x = 0)
        return grad * (self.p * self.a ** (self.p - 1))


def _constant_exponent(exponent):
    if getattr(exponent, "requires_grad", False):
        raise TypeError("pow: the exponent must be a constant number; for a tensor exponent "
                        "that needs a gradient write exp(b * log(a))")
    value = np.asarray(unwrap(exponent))
    if value.size != 1 or value.dtype.kind not in "iuf":
        raise TypeError(f"pow: the exponent must be a single number, got {type(exponent).__name__} "
                        f"of shape {value.shape} and dtype {value.dtype}")
    return value.item()
