"""One-input elementwise functions: exp, log, sqrt, tanh, relu, gelu, and a dtype cast."""
import numpy as np

from .. import kernels
from ..function import Function


class Exp(Function):
    def forward(self, a):
        self.out = np.exp(a)
        return self.out

    def backward(self, grad):
        return grad * self.out


class Log(Function):
    def forward(self, a):
        self.a = a
        return np.log(a)

    def backward(self, grad):
        return grad / self.a


class Sqrt(Function):
    def forward(self, a):
        self.out = np.sqrt(a)
        return self.out

    def backward(self, grad):
        return grad / (2 * self.out)


class Tanh(Function):
    def forward(self, a):
        self.out = np.tanh(a)
        return self.out

    def backward(self, grad):
        return grad * (1 - self.out * self.out)


class ReLU(Function):
    def forward(self, a):
        self.out = kernels.relu(a)          # max(a, 0)
        return self.out

    def backward(self, grad):
        return kernels.relu_backward(self.out, grad)   # grad where out > 0


class GELU(Function):
    """GELU with the tanh approximation (PyTorch's ``approximate='tanh'``):
    0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))."""

    def forward(self, a):
        c = a.dtype.type(np.sqrt(2 / np.pi))
        self.a = a
        self.t = np.tanh(c * (a + a.dtype.type(0.044715) * a ** 3))
        return a.dtype.type(0.5) * a * (1 + self.t)

    def backward(self, grad):
        a, t = self.a, self.t
        c = a.dtype.type(np.sqrt(2 / np.pi))
        dinner = c * (1 + a.dtype.type(3 * 0.044715) * a * a)
        return grad * (a.dtype.type(0.5) * (1 + t) + a.dtype.type(0.5) * a * (1 - t * t) * dinner)


class Cast(Function):
    def forward(self, a, dtype):
        self.source_dtype = a.dtype
        return a.astype(dtype)

    def backward(self, grad):
        return grad.astype(self.source_dtype)
