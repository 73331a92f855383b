"""One-input elementwise functions: exp, log, log1p, sqrt, tanh, sigmoid, abs, clamp, relu,
hardswish, gelu, and a dtype cast.

The backward of an elementwise op is ``grad * f'(x)``, written with operators so
it runs on numpy arrays and on Tensors alike (``differentiable_backward``, see
``function.py``). Its Jacobian is diagonal, so the tangent rule (J v) is the
same product as the backward (v J): ``_Elementwise.jvp`` is the backward."""
import numpy as np

from ..accelerated import accelerated
from ..function import Function
from . import xp


class _Elementwise(Function):
    differentiable_backward = True

    def __init_subclass__(cls, **kwargs):
        cls.jvp = cls.backward            # diagonal Jacobian: J v = v J, the same product
        super().__init_subclass__(**kwargs)


class Exp(_Elementwise):
    def forward(self, a):
        return np.exp(a)

    def backward(self, grad, *, out):
        return grad * out


class Log(_Elementwise):
    def forward(self, a):
        return np.log(a)

    def backward(self, grad, *, a):
        return grad / a


class Log1p(_Elementwise):
    """log(1 + x), exact for small x where log(1 + x) would round 1 + x first."""

    def forward(self, a):
        return np.log1p(a)

    def backward(self, grad, *, a):
        return grad / (1 + a)


class Sqrt(_Elementwise):
    def forward(self, a):
        return np.sqrt(a)

    def backward(self, grad, *, out):
        return grad / (2 * out)


class Tanh(_Elementwise):
    def forward(self, a):
        return np.tanh(a)

    def backward(self, grad, *, out):
        return grad * (1 - out * out)


class Sigmoid(_Elementwise):
    """1 / (1 + exp(-x)), computed from exp(-|x|) so that no exp overflows."""

    def forward(self, a):
        return xp.sigmoid(a)

    def backward(self, grad, *, out):
        return grad * (out * (1 - out))


class Abs(_Elementwise):
    """|x|; the gradient at 0 and at NaN is 0 (PyTorch's sgn: sgn(0) = sgn(NaN) = 0)."""

    def forward(self, a):
        return np.abs(a)

    def backward(self, grad, *, a):
        return grad * xp.sign(a)


class Sign(Function):
    """sign(x), 0 at 0 and at NaN (PyTorch's sgn). Its derivative is exactly 0, even where the
    incoming gradient is inf or NaN (PyTorch's zero tensor), and it is an op rather than a
    constant so that ``Abs``'s gradient stays connected to x beyond first order, as in PyTorch."""
    differentiable_backward = True

    def forward(self, a):
        return xp.sign(a)           # on arrays

    def backward(self, grad, *, a):
        return xp.zeros_like(a)

    def jvp(self, tangent, *, a):
        return xp.zeros_like(a)


class Clamp(_Elementwise):
    """Limit x to [low, high] (either may be None). As in PyTorch the gradient passes
    where low <= x <= high, bounds included, and is 0 outside; with low > high every
    entry becomes high (and gets no gradient)."""

    def forward(self, a, low=None, high=None):
        if low is None and high is None:
            raise ValueError("clamp: give at least one of min and max")
        out = a
        keep = np.ones(a.shape, dtype=bool)
        if low is not None:
            low = _bound(low, a.dtype, "min")
            keep &= a >= low
            out = np.maximum(out, low)
        if high is not None:
            high = _bound(high, a.dtype, "max")
            keep &= a <= high
            out = np.minimum(out, high)
        self.keep = keep
        return out

    def backward(self, grad):
        # a selection, not a product: a NaN output gradient where x was clamped gives 0 (PyTorch)
        return xp.where(self.keep, grad, grad.dtype.type(0))


def _bound(value, dtype, which):
    if getattr(value, "requires_grad", False):
        raise TypeError(f"clamp: {which} must be a constant (a number or an array without gradient)")
    value = np.asarray(getattr(value, "data", value))
    if value.dtype.kind not in "iufb":
        raise TypeError(f"clamp: {which} must be a number, got dtype {value.dtype}")
    return value.astype(dtype) if dtype.kind == "f" else value


@accelerated
def relu(x):
    """max(x, 0); relu(NaN) is NaN (PyTorch's threshold: x <= 0 ? 0 : x)."""
    return np.where(x <= 0, x.dtype.type(0), x)


@accelerated
def relu_backward(out, grad):
    """0 where the output is <= 0, else grad: PyTorch's threshold_backward(grad, out, 0). So a NaN
    output (from a NaN input) passes its gradient, as in PyTorch, and a NaN gradient where the
    output is 0 gives 0."""
    return xp.where(out <= 0, grad.dtype.type(0), grad)    # xp: the same line runs on Tensors


class ReLU(_Elementwise):
    """max(x, 0); its gradient passes where the output is not <= 0 (NaN included, as PyTorch).
    Arrays take the kernel; Tensors (beyond first order) the op ``ThresholdBackward``."""

    def forward(self, a):
        return relu(a)

    def backward(self, grad, *, out):
        return threshold_backward(out, grad)


def threshold_backward(out, grad):
    """``relu_backward``: on arrays the function (its kernel); on Tensors the op below."""
    if xp.is_tensor(out) or xp.is_tensor(grad):
        return ThresholdBackward.apply(out, grad)
    return relu_backward(out, grad)


class ThresholdBackward(Function):
    """ReLU's backward as an op of its own, PyTorch's ``threshold_backward``: beyond first order
    the gradient of ``relu(x).sum()`` stays connected to the output it reads, with derivative 0
    there. So, as in PyTorch, it requires grad and differentiating it again gives zeros rather
    than "does not require grad" (a selection by a mask alone, as ``where``, stays unconnected
    in both)."""
    differentiable_backward = True

    def forward(self, result, grad):       # result: ReLU's output ("out" would name this op's own)
        return relu_backward(result, grad)

    def backward(self, g, *, result):
        return xp.zeros_like(result), threshold_backward(result, g)

    def jvp(self, result_tangent, grad_tangent, *, result):
        return xp.zeros_like(result) if grad_tangent is None else threshold_backward(result, grad_tangent)


@accelerated
def hardswish(x):
    """x * min(max(x + 3, 0), 6) / 6 (PyTorch's hardswish, MobileNetV3's activation): 0 up to -3,
    x from 3, a parabola between; NaN at -inf (-inf * 0), as PyTorch."""
    return x * np.clip(x + 3, 0, 6) / 6


@accelerated
def hardswish_backward(a, grad):
    """PyTorch's hardswish_backward: 0 where x <= -3, grad * (x / 3 + 1/2) where -3 < x < 3, grad
    elsewhere (x >= 3, and NaN). A selection, so a NaN gradient where x <= -3 gives 0."""
    middle = grad * (a / 3 + a.dtype.type(0.5))
    return xp.where(xp.constant(a) <= -3, grad.dtype.type(0), xp.where(xp.constant(a) < 3, middle, grad))


class Hardswish(_Elementwise):
    """x * relu6(x + 3) / 6. The backward is ``hardswish_backward``: its kernel on arrays, its
    numpy lines on Tensors (``xp.call``), so beyond first order it is recorded op by op: the
    second derivative is 1/3 between -3 and 3 and 0 elsewhere, as PyTorch's."""

    def forward(self, a):
        return hardswish(a)

    def backward(self, grad, *, a):
        return xp.call(hardswish_backward, a, grad)


class GELU(Function):
    """GELU with the tanh approximation (PyTorch's ``approximate='tanh'``):
    0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).

    Its backward uses ``t``, an intermediate forward keeps on the op, so beyond first order
    it is differentiated through ``composition``, the same formula in named ops."""

    @staticmethod
    def composition(a):
        c = a.dtype.type(np.sqrt(2 / np.pi))
        return a.dtype.type(0.5) * a * (1 + (c * (a + a.dtype.type(0.044715) * a ** 3)).tanh())

    def forward(self, a):
        c = a.dtype.type(np.sqrt(2 / np.pi))
        self.t = np.tanh(c * (a + a.dtype.type(0.044715) * a ** 3))
        return a.dtype.type(0.5) * a * (1 + self.t)

    def backward(self, grad, *, a):
        t = self.t
        c = a.dtype.type(np.sqrt(2 / np.pi))
        dinner = c * (1 + a.dtype.type(3 * 0.044715) * a * a)
        return grad * (a.dtype.type(0.5) * (1 + t) + a.dtype.type(0.5) * a * (1 - t * t) * dinner)


class Cast(Function):
    differentiable_backward = True

    def forward(self, a, dtype):
        self.source_dtype, self.dtype = a.dtype, dtype
        return a.astype(dtype)

    def backward(self, grad):
        return grad.astype(self.source_dtype)

    def jvp(self, tangent):
        return tangent.astype(self.dtype)


