"""The base class of every differentiable op, and the one place gradients are
reduced back to an input's shape.

An op is a small class with ``forward`` and ``backward`` side by side:

    class Mul(Function):
        def forward(self, a, b):          # numpy arrays in, numpy array out
            self.a, self.b = a, b          # save what backward needs
            return a * b

        def backward(self, grad):          # one gradient per input
            return grad * self.b, grad * self.a

``Mul.apply(x, y)`` runs ``forward`` on the tensors' arrays and, when a graph is
being recorded, remembers the inputs so ``Tensor.backward`` can call
``backward`` later. Broadcasting is undone centrally (``unbroadcast``), so no op
has to sum its gradient back to its input's shape itself.
"""
import numpy as np

from . import anomaly, grad_mode, inplace, profiler

# Names of the modules currently running (innermost last), recorded on each op
# while ``nn.record_scopes(model)`` is active so graph drawings can group ops by module.
scope_stack = []


class Function:
    """One node of the graph: the op that produced a tensor.

    Attributes set by ``apply``:
      inputs            the input Tensors, in argument order
      needs_input_grad  one bool per input; backward may return None where False
      recorded_at       the in-place clock when the op ran (backward compares inputs' changes)
      created_at        "file:line" of the user's code, only under ``detect_anomaly()``
    """

    released = False
    scope = None        # dotted name of the module that ran this op (see nn.record_scopes)

    @property
    def name(self) -> str:
        return type(self).__name__

    @classmethod
    def apply(cls, *inputs, **options):
        # Runs ~60 times per training step of the date model: plain loops, no helper calls.
        tensors = tuple([x if isinstance(x, _tensor.Tensor) else _tensor.Tensor(x) for x in inputs])
        fn = cls()
        fn.needs_input_grad = needs = tuple([t.requires_grad for t in tensors])
        if profiler.active is None:     # one attribute read when not profiling
            out = fn.forward(*[t.data for t in tensors], **options)
        else:
            out = profiler.active.forward(fn, [t.data for t in tensors], options)
        if type(out) is not np.ndarray:
            out = np.asarray(out)       # a numpy scalar (e.g. a full sum) becomes a 0-d array
        if not (grad_mode._enabled and True in needs):
            return _tensor.Tensor._from_op(out, None)
        fn.inputs = tensors
        fn.recorded_at = inplace.clock
        if scope_stack:
            fn.scope = scope_stack[-1]
        if anomaly._enabled:     # one attribute read when off: no stack is looked at
            fn.created_at = anomaly.user_site()
        return _tensor.Tensor._from_op(out, fn)

    def forward(self, *arrays, **options):
        raise NotImplementedError(f"{self.name} has no forward")

    def backward(self, grad):
        raise NotImplementedError(f"{self.name} has no backward")

    def release(self):
        """Drop saved arrays and inputs once backward has used them (frees memory)."""
        self.__dict__.clear()
        self.released = True

    def __repr__(self):
        return f"<{self.name}>"


def unbroadcast(grad: np.ndarray, shape: tuple) -> np.ndarray:
    """Sum ``grad`` down to ``shape``, undoing numpy broadcasting.

    Broadcasting prepends axes and stretches size-1 axes; the gradient of a
    broadcast input is the sum over every copy it was stretched into.
    """
    extra = grad.ndim - len(shape)
    if extra > 0:
        grad = grad.sum(axis=tuple(range(extra)))
    stretched = tuple(i for i, n in enumerate(shape) if n == 1 and grad.shape[i] != 1)
    if stretched:
        grad = grad.sum(axis=stretched, keepdims=True)
    return grad


from . import tensor as _tensor  # noqa: E402  (tensor.py imports this module: bind it after Function exists)
