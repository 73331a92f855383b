"""The Adam update, one pass per parameter.
"""
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


def adam_update(param, grad, m, v, beta1, beta2, step_size, eps_hat, weight_decay=0.0):
    """Adam's update of one parameter, in place (the numpy twin takes ~10 passes and temporaries)."""
    arrays = (param, grad, m, v)
    if numpy_selected() or not all(a.flags.c_contiguous and a.dtype == param.dtype for a in arrays) \
            or param.dtype not in (np.float32, np.float64):
        return adam_update_numpy(param, grad, m, v, beta1, beta2, step_size, eps_hat, weight_decay)
    scalar = param.dtype.type
    _adam_kernel(param.reshape(-1), grad.reshape(-1), m.reshape(-1), v.reshape(-1), scalar(beta1),
                 scalar(beta2), scalar(step_size), scalar(eps_hat), scalar(weight_decay))
