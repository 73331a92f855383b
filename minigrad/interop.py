"""How a Tensor meets numpy and Python numbers, following PyTorch's rules.

- ``np.asarray(t)`` / ``np.array(t)`` give the tensor's numeric array (sharing
  memory, like ``t.numpy()``) when ``t`` does not require grad; for one that
  does they raise and point to ``t.detach().numpy()``: a plain array silently
  drops the graph, so PyTorch makes you say so.
- ``float(t)``, ``int(t)``, ``bool(t)`` work on one-element tensors;
  ``operator.index(t)`` (``range(t)``, ``list[t]``) only on integer ones.
- ``np.sum(t)``, ``np.mean(t)``, ``np.max(t)``, ``np.min(t)``, ``np.argmax(t)``,
  ``np.any(t)``, ``np.all(t)`` call the Tensor methods and return Tensors
  (numpy's ``out=`` and ``dtype=`` are refused with a message); ``np.prod(t)``
  says what to call instead. Other numpy functions either take the array
  via ``np.asarray`` (so the rule above applies) or are ufuncs, which a Tensor
  declines (``__array_ufunc__ = None``) so that ``ndarray + Tensor`` runs
  Tensor's ``__radd__`` and keeps the graph: call the Tensor method instead
  (``t.exp()``, ``t.abs()``, ...).
"""


class NumpyInterop:
    __slots__ = ()

    # numpy must not treat a Tensor as an array-like in arithmetic: `ndarray + Tensor`
    # then falls back to Tensor.__radd__ (keeping the graph), and np.exp(tensor) fails loudly.
    __array_ufunc__ = None

    def __array__(self, dtype=None, copy=None):
        if self.requires_grad:
            raise RuntimeError(
                "can't convert a Tensor that requires grad to a numpy array (the array would lose "
                "the graph); use tensor.detach().numpy() instead")
        array = self.data if dtype is None else self.data.astype(dtype, copy=False)
        return array.copy() if copy else array

    def _one_element(self, kind):
        if self.data.size != 1:
            raise ValueError(f"only one-element tensors can be converted to Python {kind}s, "
                             f"got shape {self.shape}")
        return self.data.reshape(()).item()

    def __float__(self):
        return float(self._one_element("float"))

    def __int__(self):
        return int(self._one_element("int"))

    def __bool__(self):
        if self.data.size != 1:
            raise ValueError(f"the truth value of a tensor of shape {self.shape} is ambiguous; "
                             "use .any() or .all() on its .data, or compare one element")
        return bool(self.data.reshape(()).item())

    def __index__(self):
        if self.data.dtype.kind not in "iu" or self.data.size != 1:
            raise TypeError(f"only integer tensors of a single element can be converted to an index, "
                            f"got dtype {self.dtype} and shape {self.shape}")
        return int(self.data.reshape(()).item())


    def prod(self, *args, **kwargs):
        # np.prod(t) would otherwise end in numpy's "operand 'Tensor' does not support ufuncs"
        raise TypeError("Tensor has no prod(); for positive entries use tensor.log().sum(axis).exp() "
                        "(differentiable), for a plain array np.prod(tensor.detach().numpy())")


def refuse_numpy_arguments(method: str, numpy_args: dict):
    """np.sum(t) calls t.sum(axis=..., dtype=None, out=None): accept those Nones, refuse the rest."""
    given = {k: v for k, v in numpy_args.items() if v is not None}
    if given:
        names = ", ".join(f"{k}=" for k in given)
        raise TypeError(f"Tensor.{method}() does not take {names}; call tensor.{method}(axis, keepdims) "
                        "and convert the result with .astype() (numpy's out= cannot hold a Tensor)")
