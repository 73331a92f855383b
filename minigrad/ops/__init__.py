"""Every differentiable op, one small class each (forward, backward and tangent rule together).

An op's math is plain numpy in its file; the functions a registered kernel may replace
are marked ``@accelerated`` (``minigrad/accelerated.py``). A fused op has a ``composition``:
the same op from public ops, taking ``forward``'s arguments as Tensors.

    arithmetic.py  Add Sub Mul Div Neg Pow ScalarBasePow
    elementwise.py Exp Log Log1p Sqrt Tanh Sigmoid Abs Clamp ReLU ThresholdBackward Sign
                   Hardswish GELU Cast
    reduce.py      Sum Mean Max Min, argmax (no gradient)
    shape.py       Reshape Transpose BroadcastTo GetItem IndexAdd Concatenate Stack
    select.py      Where MaskedFill
    matmul.py      MatMul
    softmax.py     Softmax LogSoftmax
    nn_ops.py      Linear LayerNorm Dropout CrossEntropy
    attention.py   SelfAttentionCore CrossAttentionCore (the fused attention step)
    data.py        ArrayFunction (a numpy function of the batch's arrays, no gradient: masks, targets)
    xp.py          the array functions rules share between numpy arrays and Tensors
"""
from .arithmetic import Add, Div, Mul, Neg, Pow, ScalarBasePow, Sub, scalar_base_pow
from .attention import CrossAttentionCore, SelfAttentionCore
from .data import ArrayFunction
from .checks import normalize_axis, normalize_axes
from .elementwise import (Abs, Cast, Clamp, Exp, GELU, Hardswish, Log, Log1p, ReLU, Sigmoid, Sign, Sqrt, Tanh,
                          ThresholdBackward)
from .matmul import MatMul, matmul
from .nn_ops import CrossEntropy, Dropout, LayerNorm, Linear
from .reduce import Max, Mean, Min, Sum, argmax
from .select import MaskedFill, Where, where
from .shape import BroadcastTo, Concatenate, GetItem, IndexAdd, Reshape, Stack, Transpose, concatenate, stack
from .softmax import LogSoftmax, Softmax
