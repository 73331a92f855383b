"""Fused neural-network ops: linear, layer norm, dropout and cross-entropy.

Each could be written from smaller ops; fusing them gives one node in the
graph, one pass over memory and a simple, exact backward. Each fused op's
``composition`` is that same function written with public minigrad ops (taking
the arguments of ``forward``, as Tensors): the tests check values and gradients
against it, and higher-order derivatives go through it.
"""
import numpy as np

from ..accelerated import accelerated
from .. import tensor_type
from ..function import Function
from .checks import unwrap
from .matmul import over_rows, summed_over_rows
from .select import where
from .softmax import log_softmax


def column_sums(rows):
    """rows.sum(axis=0) of a 2-D array (a bias gradient: the output gradient summed over positions),
    as the product ``ones @ rows``: numpy's sum over the first axis of a (2432, 64..256) float32
    gradient measured 2-5x slower than this one BLAS call."""
    return np.ones(rows.shape[0], dtype=rows.dtype) @ rows


class Linear(Function):
    """y = x @ weight + bias, x (..., in), weight (in, out), bias (out,).

    One node instead of MatMul + Add: the batch is folded into the rows so BLAS
    runs once, and the bias is added in place, saving one full-size temporary.
    """

    def forward(self, x, weight, bias):
        if x.shape[-1] != weight.shape[0] or bias.shape != weight.shape[1:]:
            raise ValueError(f"linear: input {x.shape}, weight {weight.shape} and bias {bias.shape} do not fit "
                             "(need x (..., in), weight (in, out), bias (out,))")
        y = over_rows(np.matmul, x, weight)                                    # y = x @ W + b
        y += bias
        return y

    def backward(self, grad, *, x, weight):
        need_x, need_weight, need_bias = self.needs_input_grad
        return (over_rows(np.matmul, grad, weight.T) if need_x else None,             # dx = g @ Wᵀ
                summed_over_rows(np.matmul, x, grad) if need_weight else None,        # dW = sum over positions of xᵀ g
                column_sums(grad.reshape(-1, grad.shape[-1])) if need_bias else None)  # db = sum over positions of g

    @staticmethod
    def composition(x, weight, bias):
        """The same op from public ops: x @ weight + bias."""
        return x @ weight + bias


@accelerated
def layer_norm(x, weight, bias, eps):
    """y = (x - mean) * rstd * weight + bias over the last axis, rstd = 1/sqrt(var + eps);
    returns (y, mean, rstd), mean and rstd shaped x.shape[:-1]."""
    eps = x.dtype.type(eps)
    mean = np.mean(x, axis=-1)
    centered = x - mean[..., None]
    rstd = 1 / np.sqrt(np.mean(centered * centered, axis=-1) + eps)
    return centered * rstd[..., None] * weight + bias, mean, rstd


@accelerated
def layer_norm_backward(grad, x, weight, mean, rstd):
    """(dx, dweight, dbias) of layer_norm from its saved mean and rstd. With ĝ = grad * weight
    and x̂ = (x - mean) * rstd, per row: dx = rstd * (ĝ - mean(ĝ) - x̂ * mean(ĝ * x̂));
    over all rows: dweight = sum(grad * x̂), dbias = sum(grad)."""
    x_hat = (x - mean[..., None]) * rstd[..., None]
    g = grad * weight
    dx = rstd[..., None] * (g - np.mean(g, axis=-1, keepdims=True)
                            - x_hat * np.mean(g * x_hat, axis=-1, keepdims=True))
    leading = tuple(range(x.ndim - 1))
    return dx, np.sum(grad * x_hat, axis=leading), np.sum(grad, axis=leading)


class LayerNorm(Function):
    """y = (x - mean) / sqrt(var + eps) * weight + bias over the last axis."""

    def forward(self, x, weight, bias, eps=1e-5):
        if weight.shape != (x.shape[-1],) or bias.shape != (x.shape[-1],):
            raise ValueError(f"layer_norm: input of shape {x.shape} needs weight and bias of shape "
                             f"({x.shape[-1]},), got {weight.shape} and {bias.shape}")
        y, self.mean, self.rstd = layer_norm(x, weight, bias, eps)
        return y

    def backward(self, grad, *, x, weight):
        return layer_norm_backward(grad, x, weight, self.mean, self.rstd)

    @staticmethod
    def composition(x, weight, bias, eps=1e-5):
        """The same op from public ops: (x - mean) / sqrt(var + eps) * weight + bias."""
        centered = x - x.mean(axis=-1, keepdims=True)
        variance = (centered * centered).mean(axis=-1, keepdims=True)
        return centered / (variance + eps).sqrt() * weight + bias


class Dropout(Function):
    """Zero each entry with probability p and scale the rest by 1/(1-p).

    The mask is drawn once, in forward, and does not depend on x: it is kept as booleans
    and the scale as a number, constants beyond first order; the tangent is masked the same way."""
    differentiable_backward = True

    def forward(self, x, p, generator):
        self.keep = generator.random(x.shape, dtype=np.float64 if x.dtype == np.float64 else np.float32) >= p
        self.scale = x.dtype.type(1.0 / (1.0 - p))
        return x * (self.keep.astype(x.dtype) * self.scale)        # y = x * keep / (1 - p)

    def backward(self, grad):
        return grad * self.keep * self.scale                        # dx = g * keep / (1 - p)

    jvp = backward      # elementwise: the Jacobian is diagonal


class CrossEntropy(Function):
    """Mean cross-entropy of logits (..., C) against integer targets (...).

    Same definition as PyTorch's ``cross_entropy``: targets equal to
    ``ignore_index`` add nothing and are not counted in the mean;
    ``label_smoothing`` eps mixes the one-hot target with the uniform
    distribution over all C classes. If every target is ignored, the mean over
    zero targets is NaN and the gradient is 0, whatever the output gradient
    (NaN too, as from ``loss ** 2``): as in PyTorch, whose backward writes
    gradients only into the rows of targets it counted. A row of all -inf logits
    has a NaN loss and NaN gradient, counted or not (docs/nan-rules.md).
    """

    def forward(self, logits, targets, ignore_index=None, label_smoothing=0.0):
        classes = logits.shape[-1]
        rows = logits.reshape(-1, classes)
        t = targets.reshape(-1)
        valid = np.ones(t.shape, bool) if ignore_index is None else t != ignore_index
        out_of_range = valid & ((t < 0) | (t >= classes))
        if out_of_range.any():
            bad = int(t[np.argmax(out_of_range)])
            raise IndexError(f"cross_entropy: target {bad} is out of range for {classes} classes "
                             f"(valid: 0..{classes - 1}" + (f", or ignore_index={ignore_index})" if ignore_index is not None else ")"))
        safe_t = np.where(valid, t, 0)
        # loss = mean over valid rows of -log_softmax(logits)[target] (with smoothing eps:
        # (1 - eps) * that - eps * mean(log_softmax(logits)))
        logp = log_softmax(rows)
        picked = np.arange(len(t))
        loss = -logp[picked, safe_t]
        if label_smoothing:
            loss = (1 - label_smoothing) * loss - label_smoothing * logp.mean(axis=-1)
        infinite = np.isinf(loss)       # one check per row; the rare rows found are looked at below
        if infinite.any():
            logp, loss = _nan_where_all_masked(rows, logp, loss, infinite)
        count = int(valid.sum())
        self.logp, self.safe_t, self.valid, self.count = logp, safe_t, valid, count
        self.smoothing, self.logits_shape = label_smoothing, logits.shape
        total = np.where(valid, loss, 0).sum(dtype=logits.dtype)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.asarray(total / logits.dtype.type(count), dtype=logits.dtype)

    def backward(self, grad):
        # dlogits = (softmax(logits) - (1 - eps) * onehot(target) - eps / C) * g / count
        eps, classes = self.smoothing, self.logp.shape[-1]
        d = np.exp(self.logp)                              # softmax probabilities
        d[np.arange(len(self.safe_t)), self.safe_t] -= d.dtype.type(1 - eps)
        if eps:
            d -= d.dtype.type(eps / classes)
        weight = np.where(self.valid, grad / max(self.count, 1), 0)  # ignored rows: exactly 0, even for a NaN grad
        d *= weight.astype(d.dtype)[:, None]
        return d.reshape(self.logits_shape), None

    @staticmethod
    def composition(logits, targets, ignore_index=None, label_smoothing=0.0):
        """The same loss from public ops: the mean over counted rows of -((1 - eps) log p[target]
        + eps / C sum(log p)), log p = log_softmax(logits). The target's entry is picked, not
        multiplied by a one-hot, so a masked (-inf) logit elsewhere gives no -inf * 0."""
        t = np.asarray(unwrap(targets)).reshape(-1)
        classes, eps = logits.shape[-1], label_smoothing
        counted = np.flatnonzero(np.ones(t.shape, bool) if ignore_index is None else t != ignore_index)
        rows = logits.reshape(-1, classes)
        # log_softmax written out, so that a row of all -inf is NaN at every order, as in PyTorch
        # (the log_softmax op keeps such a row at -inf with a zero gradient, for masked attention)
        shifted = rows - rows.max(axis=-1, keepdims=True)
        log_p = shifted - shifted.exp().sum(axis=-1, keepdims=True).log()
        per_row = -log_p[counted, t[counted]]
        if eps:
            per_row = per_row * (1 - eps) - log_p[counted].sum(axis=-1) * (eps / classes)
        total = per_row.sum()
        if not counted.size:    # NaN (0 / 0) with a zero gradient at every order, as forward and backward
            return where(np.array(True), tensor_type.Tensor(np.asarray(np.nan, logits.dtype)), total)
        return total / float(counted.size)


def _nan_where_all_masked(rows, logp, loss, infinite):
    """log_softmax and loss NaN in rows whose logits are all -inf (PyTorch: a 0 / 0 softmax), so
    that row's loss and its whole gradient are NaN, ignored or not (log_softmax alone keeps such
    a row at -inf, for masked attention). Rows only among ``infinite``, where the loss is inf."""
    candidates = np.flatnonzero(infinite)
    masked = candidates[np.isneginf(rows[candidates]).all(axis=-1)]
    if masked.size:
        logp, loss = logp.copy(), loss.copy()
        logp[masked] = np.nan
        loss[masked] = np.nan
    return logp, loss


