"""Multi-head scaled dot-product attention in one pass, forward and backward.

What it computes, for every batch item b and head h (D = width / heads):

    S = Q_h K_hᵀ / sqrt(D)          scores (Tq, Tk)
    S[~allowed] = -inf              masked keys
    P = softmax(S)                  weights; a row with no allowed key is all 0
    O_h = P V_h                     this head's slice of the output

Q, K, V and O stay in the projections' own layout, (B, T, heads * D): head h
is the column block h*D : (h+1)*D. Done with separate ops, the same step
splits the heads (a transposed copy of Q, K and V), runs 2 batched products,
a scale, a mask and a softmax, and merges the heads (another copy), each op
with its own pass over memory, and the backward the same again. Here each
(b, h) pair is handled while its rows sit in L1. ``transformer.attention``
keeps the step-by-step version (that is the one to read and to draw); the
tests check the two agree, values and gradients.

Backward, from the output gradient G (same layout as O):

    dP = G_h V_hᵀ
    dS = P * (dP - rowsum(P * dP)) / sqrt(D)      softmax backward (masked: P = 0, so dS = 0)
    dQ_h = dS K_h,   dK_h = dSᵀ Q_h,   dV_h = Pᵀ G_h
"""
import math

import numpy as np

from .backend import numpy_selected
from .jit import jit
from .simd import exp_nonpositive, flat, hmax, hsum, lanes, vbroadcast, vfma, vload, vmax, vsplat, vstore, vtranspose
from .softmax_kernels import _softmax_long_row, softmax_numpy


# ---------------------------------------------------------------- numpy twins
def _split_heads(x, num_heads):
    batch, length, width = x.shape
    return x.reshape(batch, length, num_heads, width // num_heads).transpose(0, 2, 1, 3)  # (B, h, T, D)


def _merge_heads(x):
    batch, heads, length, depth = x.shape
    return x.transpose(0, 2, 1, 3).reshape(batch, length, heads * depth)


def attention_numpy(q, k, v, allowed, num_heads):
    """(output (B, Tq, width), weights (B, heads, Tq, Tk)); allowed broadcasts to the weights' shape."""
    q_h, k_h, v_h = (_split_heads(x, num_heads) for x in (q, k, v))
    scale = q.dtype.type(1 / math.sqrt(q_h.shape[-1]))
    scores = np.where(allowed, (q_h @ k_h.swapaxes(-1, -2)) * scale, q.dtype.type(-np.inf))
    weights = softmax_numpy(scores)
    return _merge_heads(weights @ v_h), weights


def attention_backward_numpy(grad, q, k, v, weights, num_heads):
    """(dq, dk, dv), each in the layout of its input."""
    q_h, k_h, v_h, g_h = (_split_heads(x, num_heads) for x in (q, k, v, grad))
    scale = q.dtype.type(1 / math.sqrt(q_h.shape[-1]))
    d_weights = g_h @ v_h.swapaxes(-1, -2)
    d_scores = weights * (d_weights - np.sum(weights * d_weights, axis=-1, keepdims=True)) * scale
    return (_merge_heads(d_scores @ k_h), _merge_heads(d_scores.swapaxes(-1, -2) @ q_h),
            _merge_heads(weights.swapaxes(-1, -2) @ g_h))


# ---------------------------------------------------------------- the kernels
# Work goes 4 query rows at a time, so 4-8 independent FMA chains run side by
# side: one row alone is a single chain that waits on each FMA's latency
# (measured ~2.5x slower). Rows past the end repeat the last row.
@jit(forceinline=True)
def _transpose_head(x, b, first_column, out):
    """out[d, j] = x[b, j, first_column + d]: one head's keys (or values) with
    the positions along a contiguous row, ready for vector loads. Done in
    lanes x lanes blocks with lane shuffles (``vtranspose``): a scalar loop
    here gets vectorised by LLVM into gathers, which cost ~30 cycles each."""
    depth, length, width = out.shape[0], out.shape[1], x.shape[2]
    source, target, step = flat(x), flat(out), lanes(out)
    base = b * x.shape[1] * width + first_column
    for j0 in range(0, length, step):
        for d0 in range(0, depth, step):
            vtranspose(source, base + j0 * width + d0, width, length - j0, depth - d0,
                       target, d0 * length + j0, length)


@jit(forceinline=True)
def _four_rows_times(row0, row1, row2, row3, first_column, transposed, block):
    """block[r] = row_r[first_column : first_column + D] @ transposed, for r = 0..3
    (rows of Q times Kᵀ, or of G times Vᵀ); two vectors of columns per step."""
    step, length, zero = lanes(block), block.shape[1], block.dtype.type(0)
    for j0 in range(0, length, 2 * step):
        n0, n1 = length - j0, length - j0 - step
        a0 = b0 = a1 = b1 = a2 = b2 = a3 = b3 = vsplat(zero)
        for d in range(transposed.shape[0]):
            t_row, c = transposed[d], first_column + d
            t0, t1 = vload(t_row, j0, n0, zero), vload(t_row, j0 + step, n1, zero)
            s = vbroadcast(row0, c)
            a0, b0 = vfma(a0, s, t0), vfma(b0, s, t1)
            s = vbroadcast(row1, c)
            a1, b1 = vfma(a1, s, t0), vfma(b1, s, t1)
            s = vbroadcast(row2, c)
            a2, b2 = vfma(a2, s, t0), vfma(b2, s, t1)
            s = vbroadcast(row3, c)
            a3, b3 = vfma(a3, s, t0), vfma(b3, s, t1)
        for r, a, b in ((0, a0, b0), (1, a1, b1), (2, a2, b2), (3, a3, b3)):
            vstore(block[r], j0, n0, a)
            vstore(block[r], j0 + step, n1, b)


@jit(forceinline=True)
def _four_weighted_sums(c0, c1, c2, c3, x, b, x_column, depth, out0, out1, out2, out3, out_column):
    """out_r[out_column + d] = sum_j c_r[j] * x[b, j, x_column + d] for r = 0..3, d < depth:
    rows of P V (or dS K) written straight into the merged-head layout."""
    step, zero = lanes(out0), out0.dtype.type(0)
    for d0 in range(0, depth, step):
        n = depth - d0
        a0 = a1 = a2 = a3 = vsplat(zero)
        for j in range(c0.shape[0]):
            x_part = vload(x[b, j], x_column + d0, n, zero)
            a0, a1 = vfma(a0, vbroadcast(c0, j), x_part), vfma(a1, vbroadcast(c1, j), x_part)
            a2, a3 = vfma(a2, vbroadcast(c2, j), x_part), vfma(a3, vbroadcast(c3, j), x_part)
        vstore(out0, out_column + d0, n, a0)
        vstore(out1, out_column + d0, n, a1)
        vstore(out2, out_column + d0, n, a2)
        vstore(out3, out_column + d0, n, a3)


@jit(forceinline=True)
def _add_outer_products(c0, c1, c2, c3, row0, row1, row2, row3, row_column, depth, target, b, target_column):
    """target[b, j, target_column + d] += sum_r c_r[j] * row_r[row_column + d]: the 4 rows'
    share of dK (or dV)."""
    step, zero = lanes(row0), row0.dtype.type(0)
    for d0 in range(0, depth, step):
        n = depth - d0
        x0, x1 = vload(row0, row_column + d0, n, zero), vload(row1, row_column + d0, n, zero)
        x2, x3 = vload(row2, row_column + d0, n, zero), vload(row3, row_column + d0, n, zero)
        for j in range(c0.shape[0]):
            t_row = target[b, j]
            acc = vfma(vfma(vload(t_row, target_column + d0, n, zero), vbroadcast(c0, j), x0), vbroadcast(c1, j), x1)
            vstore(t_row, target_column + d0, n, vfma(vfma(acc, vbroadcast(c2, j), x2), vbroadcast(c3, j), x3))


@jit(forceinline=True)
def _masked_scores(raw, mask_row, scale, zero, minus_inf):
    """raw * scale + mask_row for a row of at most 2 vectors, as (low, high); padding lanes -inf."""
    step, width, scale_v = lanes(raw), raw.shape[0], vsplat(scale)
    low = vfma(vload(mask_row, 0, width, minus_inf), vload(raw, 0, width, zero), scale_v)
    high = vfma(vload(mask_row, step, width - step, minus_inf), vload(raw, step, width - step, zero), scale_v)
    return low, high


@jit(forceinline=True)
def _row_max(low, high, zero, minus_inf):
    """What to subtract before exp: the row's max, or 0 for a fully masked row (exp(-inf) = 0)."""
    peak = hmax(vmax(low, high))
    return peak if peak > minus_inf else zero


@jit(forceinline=True)
def _store_normalized(out, e_low, e_high, zero, one):
    """out = (e_low, e_high) / their sum; a fully masked row (sum 0) stays all 0."""
    step, width = lanes(out), out.shape[0]
    total = hsum(e_low + e_high)
    inverse = one / total if total > zero else zero
    vstore(out, 0, width, e_low * inverse)
    vstore(out, step, width - step, e_high * inverse)


@jit(forceinline=True)
def _short_softmax_rows(block, bias, bias_rows, scale, p, rows):
    """p[rows[r]] = softmax(block[r] * scale + bias[bias_rows[r]]) for r = 0..3, rows of at most
    2 vectors. Written out row by row, not as a loop: one row's max, exp and sum form a chain
    of ~150 cycles of latency, and 4 independent chains side by side overlap (~2x faster)."""
    zero, one, minus_inf = block.dtype.type(0), block.dtype.type(1), block.dtype.type(-np.inf)
    l0, h0 = _masked_scores(block[0], bias[bias_rows[0]], scale, zero, minus_inf)
    l1, h1 = _masked_scores(block[1], bias[bias_rows[1]], scale, zero, minus_inf)
    l2, h2 = _masked_scores(block[2], bias[bias_rows[2]], scale, zero, minus_inf)
    l3, h3 = _masked_scores(block[3], bias[bias_rows[3]], scale, zero, minus_inf)
    m0, m1 = _row_max(l0, h0, zero, minus_inf), _row_max(l1, h1, zero, minus_inf)
    m2, m3 = _row_max(l2, h2, zero, minus_inf), _row_max(l3, h3, zero, minus_inf)
    l0, l1, l2, l3 = exp_nonpositive(l0 - m0), exp_nonpositive(l1 - m1), exp_nonpositive(l2 - m2), exp_nonpositive(l3 - m3)
    if block.shape[1] > lanes(block):  # rows of one vector (e.g. 12 keys) skip the second half
        h0, h1, h2, h3 = exp_nonpositive(h0 - m0), exp_nonpositive(h1 - m1), exp_nonpositive(h2 - m2), exp_nonpositive(h3 - m3)
    else:
        h0 = h1 = h2 = h3 = vsplat(zero)
    _store_normalized(p[rows[0]], l0, h0, zero, one)
    _store_normalized(p[rows[1]], l1, h1, zero, one)
    _store_normalized(p[rows[2]], l2, h2, zero, one)
    _store_normalized(p[rows[3]], l3, h3, zero, one)


@jit()
def _attention_kernel(q, k, v, columns, num_heads, bias, bias_strides, out, weights):
    """out (B, Tq, width) and weights (B, heads, Tq, Tk) from q, k, v, whose heads start at
    columns[0], columns[1], columns[2] (q, k, v may be one array holding several projections).
    The mask comes as rows of 0 / -inf to add to the scores: row b*sb + h*sh + i*si of
    ``bias`` for (b, h, i)."""
    batch, q_len, width = out.shape
    k_len, depth = k.shape[1], width // num_heads
    step, last = lanes(q), q_len - 1
    q_col, k_col, v_col = columns
    sb, sh, si = bias_strides
    scale = q.dtype.type(1 / np.sqrt(depth))
    k_t = np.empty((depth, k_len), dtype=q.dtype)
    block = np.empty((4, k_len), dtype=q.dtype)
    rows, bias_rows = np.empty(4, np.int64), np.empty(4, np.int64)
    for b in range(batch):
        for h in range(num_heads):
            c = h * depth
            _transpose_head(k, b, k_col + c, k_t)
            p = weights[b, h]
            for i0 in range(0, q_len, 4):
                for r in range(4):
                    rows[r] = min(i0 + r, last)
                    bias_rows[r] = b * sb + h * sh + rows[r] * si
                i1, i2, i3 = rows[1], rows[2], rows[3]
                _four_rows_times(q[b, i0], q[b, i1], q[b, i2], q[b, i3], q_col + c, k_t, block)
                if k_len <= 2 * step:
                    _short_softmax_rows(block, bias, bias_rows, scale, p, rows)
                else:
                    for r in range(min(4, q_len - i0)):
                        scores, mask_row = block[r], bias[bias_rows[r]]
                        for j in range(k_len):
                            scores[j] = scores[j] * scale + mask_row[j]
                        _softmax_long_row(scores, p[i0 + r])
                _four_weighted_sums(p[i0], p[i1], p[i2], p[i3], v, b, v_col + c, depth,
                                    out[b, i0], out[b, i1], out[b, i2], out[b, i3], c)


@jit()
def _attention_backward_kernel(grad, q, k, v, columns, weights, num_heads, dq, dk, dv):
    """Writes dq and adds dk, dv (zeroed by the caller: every query row adds its share), each
    at the columns of its input; dq, dk, dv may be one array, as q, k, v may be."""
    batch, q_len, width = grad.shape
    k_len, depth = k.shape[1], width // num_heads
    step, zero, last = lanes(q), q.dtype.type(0), q_len - 1
    q_col, k_col, v_col = columns
    scale = q.dtype.type(1 / np.sqrt(depth))
    v_t = np.empty((depth, k_len), dtype=q.dtype)
    d_p = np.empty((4, k_len), dtype=q.dtype)      # dP for 4 rows, then overwritten with dS
    no_row = np.zeros(k_len, dtype=q.dtype)        # coefficients of a repeated (past the end) row
    for b in range(batch):
        for h in range(num_heads):
            c = h * depth
            _transpose_head(v, b, v_col + c, v_t)
            p = weights[b, h]
            for i0 in range(0, q_len, 4):
                i1, i2, i3 = min(i0 + 1, last), min(i0 + 2, last), min(i0 + 3, last)
                _four_rows_times(grad[b, i0], grad[b, i1], grad[b, i2], grad[b, i3], c, v_t, d_p)
                for r in range(4):  # softmax backward: dS = P * (dP - sum(P * dP)) * scale
                    p_row, d_row = p[min(i0 + r, last)], d_p[r]
                    total = vsplat(zero)
                    for j0 in range(0, k_len, step):
                        total = vfma(total, vload(p_row, j0, k_len - j0, zero), vload(d_row, j0, k_len - j0, zero))
                    dot = hsum(total)
                    for j0 in range(0, k_len, step):
                        n = k_len - j0
                        vstore(d_row, j0, n, vload(p_row, j0, n, zero) * (vload(d_row, j0, n, zero) - dot) * scale)
                _four_weighted_sums(d_p[0], d_p[1], d_p[2], d_p[3], k, b, k_col + c, depth,
                                    dq[b, i0], dq[b, i1], dq[b, i2], dq[b, i3], q_col + c)
                valid = q_len - i0  # repeated rows must not add to dK and dV twice
                d1, d2, d3 = (d_p[1] if valid > 1 else no_row), (d_p[2] if valid > 2 else no_row), \
                    (d_p[3] if valid > 3 else no_row)
                p1, p2, p3 = (p[i1] if valid > 1 else no_row), (p[i2] if valid > 2 else no_row), \
                    (p[i3] if valid > 3 else no_row)
                _add_outer_products(d_p[0], d1, d2, d3, q[b, i0], q[b, i1], q[b, i2], q[b, i3], q_col + c,
                                    depth, dk, b, k_col + c)
                _add_outer_products(p[i0], p1, p2, p3, grad[b, i0], grad[b, i1], grad[b, i2], grad[b, i3], c,
                                    depth, dv, b, v_col + c)


# ---------------------------------------------------------------- public entry points
def _kernel_fits(arrays, num_heads, width, columns):
    first = arrays[0]
    return (first.dtype in (np.float32, np.float64) and all(a.dtype == first.dtype and a.ndim == 3 for a in arrays)
            and all(a.size > 0 and a.flags.c_contiguous for a in arrays) and width % num_heads == 0
            and all(0 <= c and c + width <= a.shape[2] for a, c in zip(arrays, columns)))


def _mask_as_bias(allowed, weights_shape, dtype):
    """The mask as rows of 0 (may attend) / -inf (masked) to add to the scores, without
    expanding its broadcast axes: returns (rows (R, Tk), (sb, sh, si)) such that the row of
    (b, h, i) is b*sb + h*sh + i*si."""
    k_len = weights_shape[-1]
    allowed = np.asarray(allowed)
    allowed = allowed.reshape((1,) * (4 - allowed.ndim) + allowed.shape)
    n_b, n_h, n_i = allowed.shape[:3]
    bias = np.where(np.broadcast_to(allowed, (n_b, n_h, n_i, k_len)), dtype.type(0), dtype.type(-np.inf))
    strides = (n_h * n_i if n_b > 1 else 0, n_i if n_h > 1 else 0, 1 if n_i > 1 else 0)
    return np.ascontiguousarray(bias.reshape(-1, k_len), dtype=dtype), strides


def _columns(x, first, width):
    return x[..., first:first + width]


def attention(q, k, v, allowed, num_heads, width=None, columns=(0, 0, 0)):
    """(output (B, Tq, width), weights (B, heads, Tq, Tk)) of multi-head attention.

    q (B, Tq, *), k and v (B, Tk, *): the heads of q are its columns
    columns[0] : columns[0] + width (width defaults to q's last dimension), and so
    on for k and v, so one array may hold several projections side by side.
    allowed: bool, broadcastable to (B, heads, Tq, Tk)."""
    width = q.shape[2] - columns[0] if width is None else width
    if numpy_selected() or not _kernel_fits((q, k, v), num_heads, width, columns):
        return attention_numpy(*(_columns(x, c, width) for x, c in zip((q, k, v), columns)), allowed, num_heads)
    batch, q_len, k_len = q.shape[0], q.shape[1], k.shape[1]
    out = np.empty((batch, q_len, width), dtype=q.dtype)
    weights = np.empty((batch, num_heads, q_len, k_len), dtype=q.dtype)
    bias, strides = _mask_as_bias(allowed, weights.shape, q.dtype)
    _attention_kernel(q, k, v, np.asarray(columns, np.int64), num_heads, bias, strides, out, weights)
    return out, weights


def attention_backward(grad, q, k, v, weights, num_heads, dq, dk, dv, columns=(0, 0, 0)):
    """Writes dq and adds into dk and dv (zero them first) from the output gradient and the
    forward's saved weights; each goes to the columns its input came from (see ``attention``),
    and dq, dk, dv may be one array when q, k, v are."""
    width = grad.shape[2]
    arrays = (q, k, v, dq, dk, dv)
    if numpy_selected() or grad.dtype != q.dtype or not grad.flags.c_contiguous \
            or not _kernel_fits(arrays, num_heads, width, columns * 2):
        parts = (_columns(x, c, width) for x, c in zip((q, k, v), columns))
        d_q, d_k, d_v = attention_backward_numpy(grad, *parts, weights, num_heads)
        _columns(dq, columns[0], width)[...] = d_q
        _columns(dk, columns[1], width)[...] += d_k
        _columns(dv, columns[2], width)[...] += d_v
        return
    _attention_backward_kernel(grad, q, k, v, np.asarray(columns, np.int64), np.ascontiguousarray(weights),
                               num_heads, dq, dk, dv)
