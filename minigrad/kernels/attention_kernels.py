"""Multi-head scaled dot-product attention in one pass, forward and backward: kernels for
``ops/attention.py``'s ``attention`` and ``attention_backward`` (the math is there).

Q, K, V and O stay in the projections' layout (B, T, heads * D), head h at columns
h*D : (h+1)*D, and each (batch item, head) is done while its rows sit in L1: op by op,
every step is a pass over memory, plus copies to split and merge the heads.
"""
import numpy as np

from ..ops import attention as op
from .jit import jit
from .matmul_kernels import four_rows_times, rows_times
from .registry import kernel_for
from .simd import exp_nonpositive, flat, hmax, hsum, lanes, vfma, vload, vmax, vsplat, vstore
from .softmax_kernels import softmax_backward_row


# ---------------------------------------------------------------- the softmax, four score rows at a time
# One row's max, exp and sum are a chain of dependent steps (~150 cycles of latency for little
# work); four rows side by side overlap four chains (docs/kernels-rows.md).
@jit(forceinline=True)
def _scores_and_max(x, bias, scores, j, n, scale, peak):
    """scores[j:j+n] = x[j:j+n] * scale + bias[j:j+n]; returns peak updated with their max."""
    v = vfma(vload(bias, j, n, x.dtype.type(-np.inf)), vload(x, j, n, x.dtype.type(0)), scale)
    vstore(scores, j, n, v)
    return vmax(peak, v)


@jit(forceinline=True)
def _exp_sum(scores, j, n, shift, total):
    """total + exp(scores[j:j+n] - shift) (padding lanes add exp(-inf) = 0); stores back the exp."""
    e = exp_nonpositive(vload(scores, j, n, scores.dtype.type(-np.inf)) - shift)
    vstore(scores, j, n, e)
    return total + e


@jit(forceinline=True)
def _shift(peak, zero):
    """What to subtract before exp: the row max, or 0 for a row of all -inf (no -inf - -inf = NaN)."""
    row_max = hmax(peak)
    return zero if row_max == -np.inf else row_max


@jit(forceinline=True)
def _inverse(total, zero, one):
    """1 / sum as a vector; 0 for a row of all -inf (sum 0: its exps are 0 already)."""
    return vsplat(one / total if total != zero else zero)


@jit(forceinline=True)
def _four_softmax_rows(x, x_rows, bias, bias_rows, scale, block, out, out_rows):
    """out[out_rows[r]] = softmax(x[x_rows[r]] * scale + bias[bias_rows[r]]) for r < 4. Bias rows
    hold 0 (may attend) or -inf (masked); block (4, width) is scratch, so rows may repeat. Returns
    True when a row came out NaN. The vector max may drop a NaN; exp(NaN - shift) then puts it
    back into the sum."""
    step, width, zero, one = lanes(block), block.shape[1], block.dtype.type(0), block.dtype.type(1)
    scale_v, s0, s1, s2, s3 = vsplat(scale), block[0], block[1], block[2], block[3]
    x0, x1, x2, x3 = x[x_rows[0]], x[x_rows[1]], x[x_rows[2]], x[x_rows[3]]
    b0, b1, b2, b3 = bias[bias_rows[0]], bias[bias_rows[1]], bias[bias_rows[2]], bias[bias_rows[3]]
    m0 = m1 = m2 = m3 = vsplat(block.dtype.type(-np.inf))
    for j in range(0, width, step):  # scores and their max
        n = width - j
        m0, m1 = _scores_and_max(x0, b0, s0, j, n, scale_v, m0), _scores_and_max(x1, b1, s1, j, n, scale_v, m1)
        m2, m3 = _scores_and_max(x2, b2, s2, j, n, scale_v, m2), _scores_and_max(x3, b3, s3, j, n, scale_v, m3)
    m0, m1, m2, m3 = _shift(m0, zero), _shift(m1, zero), _shift(m2, zero), _shift(m3, zero)
    t0 = t1 = t2 = t3 = vsplat(zero)
    for j in range(0, width, step):  # exp(scores - shift) and their sum
        n = width - j
        t0, t1 = _exp_sum(s0, j, n, m0, t0), _exp_sum(s1, j, n, m1, t1)
        t2, t3 = _exp_sum(s2, j, n, m2, t2), _exp_sum(s3, j, n, m3, t3)
    t0, t1, t2, t3 = hsum(t0), hsum(t1), hsum(t2), hsum(t3)
    k0, k1, k2, k3 = _inverse(t0, zero, one), _inverse(t1, zero, one), _inverse(t2, zero, one), _inverse(t3, zero, one)
    o0, o1, o2, o3 = out[out_rows[0]], out[out_rows[1]], out[out_rows[2]], out[out_rows[3]]
    for j in range(0, width, step):  # weights = exp * (1 / sum)
        n = width - j
        vstore(o0, j, n, vload(s0, j, n, zero) * k0)
        vstore(o1, j, n, vload(s1, j, n, zero) * k1)
        vstore(o2, j, n, vload(s2, j, n, zero) * k2)
        vstore(o3, j, n, vload(s3, j, n, zero) * k3)
    # a NaN sum: the numpy definition redoes the call (rare). A row of all -inf scores, hidden by
    # the mask or made so by an inf in Q or K, has sum 0 and its zero weights already.
    return t0 != t0 or t1 != t1 or t2 != t2 or t3 != t3


# ---------------------------------------------------------------- the kernels
# The forward goes 4 query rows at a time: one row alone waits on each step's latency,
# four independent chains overlap (docs/kernels-rows.md). Past the end, the last row repeats.
@jit(forceinline=True)
def _transpose_head(x, b, first_column, out):
    """out[d, j] = x[b, j, first_column + d]: one head's keys (or values), positions along a row."""
    for d in range(out.shape[0]):
        for j in range(out.shape[1]):
            out[d, j] = x[b, j, first_column + d]


@jit(forceinline=True)
def _starts(first_row, rows, width, column):
    """Where rows first_row + rows[r] of a (*, width) matrix start in its flat memory, plus column."""
    return ((first_row + rows[0]) * width + column, (first_row + rows[1]) * width + column,
            (first_row + rows[2]) * width + column, (first_row + rows[3]) * width + column)


@jit()
def _attention_kernel(q, k, v, columns, num_heads, bias, bias_strides, out, weights, k_t, block):
    """out (B, Tq, width) and weights (B, heads, Tq, Tk) from q, k, v, whose heads start at
    columns[0], [1], [2] (one array may hold several projections). The mask: rows of 0 / -inf,
    row b*sb + h*sh + i*si of ``bias`` for (b, h, i). Scratch: k_t (D, Tk), block (4, Tk).
    Returns True when a row came out NaN (``_four_softmax_rows``)."""
    batch, q_len, width = out.shape
    k_len, depth = k.shape[1], width // num_heads
    q_col, k_col, v_col = columns
    sb, sh, si = bias_strides
    scale = q.dtype.type(1 / np.sqrt(depth))
    start, one = np.intp(0), np.intp(1)  # typed like the computed offsets: each helper compiles once
    block_rows = (start, k_len, 2 * k_len, 3 * k_len)  # where block's rows start in flat(block)
    block_index = (start, one, np.intp(2), np.intp(3))
    any_nan = False
    for b in range(batch):
        for h in range(num_heads):
            c = h * depth
            _transpose_head(k, b, k_col + c, k_t)
            p = weights[b, h]
            for i0 in range(0, q_len, 4):
                rows = (i0, min(i0 + 1, q_len - 1), min(i0 + 2, q_len - 1), min(i0 + 3, q_len - 1))  # repeat the last
                four_rows_times(flat(q), _starts(b * q_len, rows, q.shape[2], q_col + c), one,
                                flat(k_t), start, k_len, flat(block), block_rows, k_len, depth)
                m = b * sb + h * sh
                bias_rows = (m + rows[0] * si, m + rows[1] * si, m + rows[2] * si, m + rows[3] * si)
                any_nan |= _four_softmax_rows(block, block_index, bias, bias_rows, scale, block, p, rows)
                four_rows_times(flat(weights), _starts((b * num_heads + h) * q_len, rows, k_len, start), one,
                                flat(v), b * k_len * v.shape[2] + v_col + c, v.shape[2],
                                flat(out), _starts(b * q_len, rows, width, c), depth, k_len)
    return any_nan


@jit()
def _attention_backward_kernel(grad, q, k, v, columns, weights, bias, bias_strides, num_heads, dq, dk, dv, v_t, d_s):
    """Writes dq, dk and dv at the columns of their inputs (one array may hold all three).
    Per (b, h): dP = G Vᵀ, dS from it in place, then the three products. The mask as in the
    forward (``bias``: rows of 0 / -inf). Scratch: v_t, d_s."""
    batch, q_len, width = grad.shape
    k_len, depth = k.shape[1], width // num_heads
    q_col, k_col, v_col = columns
    sb, sh, si = bias_strides
    scale = q.dtype.type(1 / np.sqrt(depth))
    start, one = np.intp(0), np.intp(1)  # typed like the computed offsets: each helper compiles once
    for b in range(batch):
        g_start, q_start, k_start = b * q_len * width, b * q_len * q.shape[2], b * k_len * k.shape[2]
        for h in range(num_heads):
            c, p_start = h * depth, (b * num_heads + h) * q_len * k_len
            _transpose_head(v, b, v_col + c, v_t)
            rows_times(flat(grad), g_start + c, width, one, flat(v_t), start, k_len,
                       flat(d_s), start, k_len, q_len, k_len, depth)
            for i in range(q_len):  # dS = P * (dP - sum(P * dP)) / sqrt(D), 0 where the key is hidden
                if not np.isfinite(softmax_backward_row(weights[b, h, i], d_s[i], d_s[i], scale)):
                    hidden = bias[b * sb + h * sh + i * si]
                    for j in range(k_len):  # a NaN or inf in the row: a hidden key still gets 0 (masked_fill's)
                        if hidden[j] != 0:
                            d_s[i, j] = 0
            rows_times(flat(d_s), start, k_len, one, flat(k), k_start + k_col + c, k.shape[2],  # dQ = dS K
                       flat(dq), b * q_len * dq.shape[2] + q_col + c, dq.shape[2], q_len, depth, k_len)
            rows_times(flat(d_s), start, one, k_len, flat(q), q_start + q_col + c, q.shape[2],  # dK = dSᵀ Q
                       flat(dk), b * k_len * dk.shape[2] + k_col + c, dk.shape[2], k_len, depth, q_len)
            rows_times(flat(weights), p_start, one, k_len, flat(grad), g_start + c, width,  # dV = Pᵀ G
                       flat(dv), b * k_len * dv.shape[2] + v_col + c, dv.shape[2], k_len, depth, q_len)


# ---------------------------------------------------------------- registered for the op's functions
def _kernel_fits(arrays, num_heads, width, columns):
    first = arrays[0]
    return (first.dtype in (np.float32, np.float64) and all(a.dtype == first.dtype and a.ndim == 3 for a in arrays)
            and all(a.size > 0 and a.flags.c_contiguous for a in arrays) and width % num_heads == 0
            and all(0 <= c and c + width <= a.shape[2] for a, c in zip(arrays, columns)))


def _mask_as_bias(allowed, weights_shape, dtype):
    """The mask as rows of 0 (may attend) / -inf (masked) to add to the scores, its broadcast
    axes not expanded: (rows (R, Tk), (sb, sh, si)), the row of (b, h, i) at b*sb + h*sh + i*si."""
    k_len = weights_shape[-1]
    allowed = np.asarray(allowed)
    allowed = allowed.reshape((1,) * (4 - allowed.ndim) + allowed.shape)
    n_b, n_h, n_i = allowed.shape[:3]
    bias = np.where(np.broadcast_to(allowed, (n_b, n_h, n_i, k_len)), dtype.type(0), dtype.type(-np.inf))
    strides = (n_h * n_i if n_b > 1 else 0, n_i if n_h > 1 else 0, 1 if n_i > 1 else 0)
    return np.ascontiguousarray(bias.reshape(-1, k_len), dtype=dtype), strides


def _example(rng, dtype, size):
    """Self-attention over a packed qkv (B, T, 3 * width) with a causal mask."""
    batch, length, heads, depth = (3, 7, 2, 5) if size == "small" else (128, 19, 4, 16)
    qkv = rng.standard_normal((batch, length, 3 * heads * depth)).astype(dtype)
    width = heads * depth
    return qkv, qkv, qkv, np.tril(np.ones((length, length), bool)), heads, width, (0, width, 2 * width)


def _backward_example(rng, dtype, size):
    q, k, v, allowed, heads, width, columns = _example(rng, dtype, size)
    _, weights = op.attention.numpy(q, k, v, allowed, heads, width, columns)
    grad = rng.standard_normal((q.shape[0], q.shape[1], width)).astype(dtype)
    return grad, q, k, v, weights, allowed, heads, columns


@kernel_for(op.attention, fits=lambda q, k, v, allowed, heads, width, columns: _kernel_fits((q, k, v), heads, width, columns),
            example=_example, stage="forward", compiled=[_attention_kernel])
def attention(q, k, v, allowed, num_heads, width, columns):
    batch, q_len, k_len = q.shape[0], q.shape[1], k.shape[1]
    out, weights = np.empty((batch, q_len, width), q.dtype), np.empty((batch, num_heads, q_len, k_len), q.dtype)
    bias, strides = _mask_as_bias(allowed, weights.shape, q.dtype)
    scratch = np.empty((width // num_heads, k_len), q.dtype), np.empty((4, k_len), q.dtype)
    if _attention_kernel(q, k, v, np.asarray(columns, np.int64), num_heads, bias, strides, out, weights, *scratch):
        # a NaN row (rare): the exact numpy definition
        return op.attention.numpy(q, k, v, allowed, num_heads, width, columns)
    return out, weights


def _backward_fits(grad, q, k, v, weights, allowed, num_heads, columns):
    return (grad.dtype == q.dtype and grad.flags.c_contiguous and weights.dtype == q.dtype
            and _kernel_fits((q, k, v), num_heads, grad.shape[2], columns))


@kernel_for(op.attention_backward, fits=_backward_fits, example=_backward_example, stage="training",
            compiled=[_attention_backward_kernel])
def attention_backward(grad, q, k, v, weights, allowed, num_heads, columns):
    width = grad.shape[2]
    covered = all(sum(width for y in (q, k, v) if y is x) == x.shape[2] for x in (q, k, v))
    dq, dk, dv = op.gradient_arrays((q, k, v), columns, width, np.empty if covered else np.zeros)
    depth, q_len, k_len = width // num_heads, q.shape[1], k.shape[1]
    bias, strides = _mask_as_bias(allowed, weights.shape, q.dtype)
    _attention_backward_kernel(grad, q, k, v, np.asarray(columns, np.int64), np.ascontiguousarray(weights),
                               bias, strides, num_heads, dq, dk, dv, np.empty((depth, k_len), q.dtype), np.empty((q_len, k_len), q.dtype))
    return dq, dk, dv
