"""Adam's update of one parameter (``optim.py``'s ``adam_update``) in one pass (numpy takes ~10
passes and temporaries)."""
import numpy as np

from .. import optim as op
from .jit import jit
from .registry import kernel_for


@jit()
def _adam_kernel(param, grad, m, v, beta1, beta2, step_size, eps_hat, weight_decay):
    one, decay = param.dtype.type(1), weight_decay != 0  # no decay: not even 0 * param (NaN for inf)
    for i in range(param.shape[0]):
        g = grad[i] + weight_decay * param[i] if decay else grad[i]
        m[i] = beta1 * m[i] + (one - beta1) * g
        v[i] = beta2 * v[i] + (one - beta2) * g * g
        param[i] -= step_size * m[i] / (np.sqrt(v[i]) + eps_hat)


def _fits(param, grad, m, v, *scalars):
    """Float arrays of one dtype and shape, C-contiguous (the loop runs over flat memory).
    Written out, not looped: it runs for each of the model's ~40 parameters every step."""
    dtype, shape = param.dtype, param.shape
    return ((dtype == np.float32 or dtype == np.float64) and grad.dtype == dtype and m.dtype == dtype
            and v.dtype == dtype and grad.shape == shape and m.shape == shape and v.shape == shape
            and param.flags.c_contiguous and grad.flags.c_contiguous and m.flags.c_contiguous
            and v.flags.c_contiguous and param.size > 0)


def _example(rng, dtype, size):
    shape = (13, 5) if size == "small" else (256, 64)
    param, grad, m = (rng.standard_normal(shape).astype(dtype) for _ in range(3))
    return param, grad, m, rng.random(shape).astype(dtype), 0.9, 0.98, 1e-3, 1e-9, 0.0


@kernel_for(op.adam_update, fits=_fits, example=_example, stage="training", compiled=[_adam_kernel])
def adam_update(param, grad, m, v, beta1, beta2, step_size, eps_hat, weight_decay):
    dtype = param.dtype.type  # the scalars in the arrays' dtype: one compiled signature
    _adam_kernel(param.reshape(-1), grad.reshape(-1), m.reshape(-1), v.reshape(-1), dtype(beta1), dtype(beta2),
                 dtype(step_size), dtype(eps_hat), dtype(weight_decay))
