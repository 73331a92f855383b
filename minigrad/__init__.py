"""minigrad: a small, readable reverse-mode autograd engine with Numba kernels.

    tensor.py     Tensor (its numpy interop in interop.py, += and friends in inplace.py)
    autograd.py   the backward pass, as one generator (autograd_steps); grad()
    hooks.py      Tensor.register_hook
    anomaly.py    detect_anomaly(): find the op whose backward makes NaN/inf
    function.py   the op base class (rules read what they need as arguments) and the central un-broadcast
    observers.py  who watches the engine (profiler, anomaly mode, module scopes), per thread
    ops/          every op, forward and backward side by side
    accelerated.py @accelerated numpy functions and the one switch: kernel or numpy
    kernels/      the Numba kernels, loaded on first use; each registers itself for an op's function
    profiler.py   profile(): which ops ran, for how long, on a kernel or on numpy
    functional.py softmax, cross_entropy, layer_norm, dropout, ...
    nn.py         Module, Parameter, Linear, LayerNorm, Dropout, Embedding
    optim.py      SGD, Adam, warm-up schedules, gradient clipping
    flat.py       FlatParameters: parameters as views of one array (one optimizer call for all)
    gradcheck.py  finite-difference checks: gradcheck, gradgradcheck, jvpcheck
    forward_ad.py forward mode: dual_level, make_dual, unpack_dual
    func.py       grad, vjp, jvp, jacrev, jacfwd, hessian (torch.func's names)
"""
from . import autograd, forward_ad, func, functional, kernels, nn, optim
from .anomaly import AnomalyError, detect_anomaly
from .autograd import BackwardStep, autograd_steps
from .grad_mode import enable_grad, is_grad_enabled, no_grad
from .gradcheck import GradcheckError, gradcheck, gradgradcheck, jvpcheck
from .ops import concatenate, stack, where
from .profiler import profile
from .rng import get_rng_state, manual_seed, set_rng_state
from .tensor import Tensor
from .trace import TraceError, trace     # binds minigrad.trace to the function (the module: minigrad/trace.py)

__all__ = ["Tensor", "no_grad", "enable_grad", "is_grad_enabled", "gradcheck", "GradcheckError",
           "gradgradcheck", "jvpcheck", "autograd", "forward_ad", "func",
           "autograd_steps", "BackwardStep", "detect_anomaly", "AnomalyError",
           "concatenate", "stack", "where", "manual_seed", "get_rng_state", "set_rng_state",
           "functional", "nn", "optim", "kernels", "profile", "trace", "TraceError"]
__version__ = "0.1.0"
