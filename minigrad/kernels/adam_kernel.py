"""The Adam update, one pass per parameter (the numpy twin takes ~10 passes and temporaries)."""
import numpy as np

from .backend import numpy_selected
from .jit import jit


def adam_update_numpy(param, grad, m, v, beta1, beta2, step_size, eps_hat, weight_decay):
    """In place: m, v <- moving averages of grad and grad²; param -= step_size * m / (sqrt(v) + eps_hat).

    ``step_size`` and ``eps_hat`` already hold Adam's bias corrections.
    """
    if weight_decay:
        grad = grad + weight_decay * param
    m *= beta1
    m += (1 - beta1) * grad
    v *= beta2
    v += (1 - beta2) * grad * grad
    param -= step_size * m / (np.sqrt(v) + eps_hat)


@jit()
def _adam_kernel(param, grad, m, v, beta1, beta2, step_size, eps_hat, weight_decay):
    one = param.dtype.type(1)
    for i in range(param.shape[0]):
        g = grad[i] + weight_decay * param[i]
        m[i] = beta1 * m[i] + (one - beta1) * g
        v[i] = beta2 * v[i] + (one - beta2) * g * g
        param[i] -= step_size * m[i] / (np.sqrt(v[i]) + eps_hat)


def adam_update_all(params, grads, ms, vs, beta1, beta2, step_size, eps_hat, weight_decay=0.0):
    """Adam's update of each (param, grad, m, v), in place. The scalars are converted once
    per dtype: the model has ~40 small parameters, so per-call Python work counts."""
    numpy_path = numpy_selected()
    scalars = {}
    for param, grad, m, v in zip(params, grads, ms, vs):
        dtype = param.dtype
        if numpy_path or dtype not in (np.float32, np.float64) or not (
                grad.dtype == m.dtype == v.dtype == dtype and param.flags.c_contiguous
                and grad.flags.c_contiguous and m.flags.c_contiguous and v.flags.c_contiguous):
            adam_update_numpy(param, grad, m, v, beta1, beta2, step_size, eps_hat, weight_decay)
            continue
        if dtype not in scalars:
            scalars[dtype] = tuple(dtype.type(x) for x in (beta1, beta2, step_size, eps_hat, weight_decay))
        _adam_kernel(param.reshape(-1), grad.reshape(-1), m.reshape(-1), v.reshape(-1), *scalars[dtype])
