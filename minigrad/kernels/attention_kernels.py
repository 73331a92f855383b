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
from .simd import exp_nonpositive, hmax, hsum, lanes, vbroadcast, vfma, vload, vmax, vsplat, vstore, vtranspose
from .softmax_kernels import softmax_backward_row, softmax_numpy, softmax_row


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
# side (one row alone waits on each FMA's latency; docs/kernels-rows.md has the
# figures). Rows past the end repeat the last row.
@jit(forceinline=True)
def _transpose_head(x, b, first_column, out):
    """out[d, j] = x[b, j, first_column + d]: one head's keys (or values) with
    the positions along a contiguous row, ready for vector loads. Done in
    lanes x lanes blocks with lane shuffles (``vtranspose``), not the slow
    gathers LLVM makes of a scalar loop here."""
    depth, length, width = out.shape[0], out.shape[1], x.shape[2]
    source, target, step = x.reshape(-1), out.reshape(-1), lanes(out)
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
def _scores_and_max(x, mask_row, j, n, scale_v, peak):
    """x[j:j+n] = x[j:j+n] * scale + mask_row[j:j+n] in place; returns peak updated with their max."""
    minus_inf = x.dtype.type(-np.inf)
    scores = vfma(vload(mask_row, j, n, minus_inf), vload(x, j, n, x.dtype.type(0)), scale_v)
    vstore(x, j, n, scores)
    return vmax(peak, scores)


@jit(forceinline=True)
def _exp_in_place(x, j, n, shift, total):
    """x[j:j+n] = exp(x[j:j+n] - shift); returns total plus them (padding lanes add exp(-inf) = 0)."""
    e = exp_nonpositive(vload(x, j, n, x.dtype.type(-np.inf)) - shift)
    vstore(x, j, n, e)
    return total + e


@jit(forceinline=True)
def _four_masked_softmax_rows(block, m0, m1, m2, m3, scale, p0, p1, p2, p3):
    """p_r = softmax(block[r] * scale + m_r) for r = 0..3, where the mask rows m_r hold 0 (may
    attend) or -inf (masked); block is overwritten. The four rows go side by side: one row's
    max, exp and sum are a chain of dependent steps, and four independent chains overlap
    (docs/kernels-rows.md). The mask is added as a bias; that differs
    from replacing the masked scores only where a masked score is NaN or +inf, and then the
    row comes out NaN: ``_exact_masked_softmax_row`` redoes such a row."""
    step, width, zero = lanes(block), block.shape[1], block.dtype.type(0)
    minus_inf, scale_v = block.dtype.type(-np.inf), vsplat(scale)
    x0, x1, x2, x3 = block[0], block[1], block[2], block[3]
    a0 = a1 = a2 = a3 = vsplat(minus_inf)
    for j in range(0, width, step):
        n = width - j
        a0, a1 = _scores_and_max(x0, m0, j, n, scale_v, a0), _scores_and_max(x1, m1, j, n, scale_v, a1)
        a2, a3 = _scores_and_max(x2, m2, j, n, scale_v, a2), _scores_and_max(x3, m3, j, n, scale_v, a3)
    s0, s1, s2, s3 = hmax(a0), hmax(a1), hmax(a2), hmax(a3)  # shift by the max, or by 0 for an all -inf row
    s0, s1 = (zero if s0 == minus_inf else s0), (zero if s1 == minus_inf else s1)
    s2, s3 = (zero if s2 == minus_inf else s2), (zero if s3 == minus_inf else s3)
    t0 = t1 = t2 = t3 = vsplat(zero)
    for j in range(0, width, step):
        n = width - j
        t0, t1 = _exp_in_place(x0, j, n, s0, t0), _exp_in_place(x1, j, n, s1, t1)
        t2, t3 = _exp_in_place(x2, j, n, s2, t2), _exp_in_place(x3, j, n, s3, t3)
    t0, t1, t2, t3 = hsum(t0), hsum(t1), hsum(t2), hsum(t3)
    one = block.dtype.type(1)
    t0, t1 = (one / t0 if t0 != zero else zero), (one / t1 if t1 != zero else zero)  # all -inf: 0 * 0
    t2, t3 = (one / t2 if t2 != zero else zero), (one / t3 if t3 != zero else zero)
    for j in range(0, width, step):
        n = width - j
        vstore(p0, j, n, vload(x0, j, n, zero) * t0)
        vstore(p1, j, n, vload(x1, j, n, zero) * t1)
        vstore(p2, j, n, vload(x2, j, n, zero) * t2)
        vstore(p3, j, n, vload(x3, j, n, zero) * t3)
    return t0 != t0 or t1 != t1 or t2 != t2 or t3 != t3  # NaN: some row needs the exact path


@jit()
def _exact_masked_softmax_row(q_row, first_column, k_t, mask_row, scale, p_row):
    """p_row = softmax(q_row[first_column:] @ k_t * scale, with the masked scores replaced by
    -inf), as ``np.where`` does in the numpy twin. Only for rows that came out NaN (rare),
    hence plain loops."""
    zero, minus_inf = p_row.dtype.type(0), p_row.dtype.type(-np.inf)
    for j in range(p_row.shape[0]):
        score = zero
        for d in range(k_t.shape[0]):
            score += q_row[first_column + d] * k_t[d, j]
        p_row[j] = score * scale if mask_row[j] == zero else minus_inf
    softmax_row(p_row, p_row)


@jit()
def _attention_kernel(q, k, v, columns, num_heads, bias, bias_strides, out, weights, k_t, block):
    """out (B, Tq, width) and weights (B, heads, Tq, Tk) from q, k, v, whose heads start at
    columns[0], columns[1], columns[2] (q, k, v may be one array holding several projections).
    The mask comes as rows of 0 / -inf to add to the scores: row b*sb + h*sh + i*si of
    ``bias`` for (b, h, i). Scratch: k_t (D, Tk), block (4, Tk)."""
    batch, q_len, width = out.shape
    k_len, depth = k.shape[1], width // num_heads
    last = q_len - 1
    q_col, k_col, v_col = columns
    sb, sh, si = bias_strides
    scale = q.dtype.type(1 / np.sqrt(depth))
    for b in range(batch):
        for h in range(num_heads):
            c = h * depth
            _transpose_head(k, b, k_col + c, k_t)
            p = weights[b, h]
            for i0 in range(0, q_len, 4):
                i1, i2, i3 = min(i0 + 1, last), min(i0 + 2, last), min(i0 + 3, last)
                _four_rows_times(q[b, i0], q[b, i1], q[b, i2], q[b, i3], q_col + c, k_t, block)
                mask0, mask1 = bias[b * sb + h * sh + i0 * si], bias[b * sb + h * sh + i1 * si]
                mask2, mask3 = bias[b * sb + h * sh + i2 * si], bias[b * sb + h * sh + i3 * si]
                if _four_masked_softmax_rows(block, mask0, mask1, mask2, mask3, scale, p[i0], p[i1], p[i2], p[i3]):
                    for i in range(i0, min(i0 + 4, q_len)):
                        if p[i, 0] != p[i, 0]:
                            _exact_masked_softmax_row(q[b, i], q_col + c, k_t, bias[b * sb + h * sh + i * si],
                                                      scale, p[i])
                _four_weighted_sums(p[i0], p[i1], p[i2], p[i3], v, b, v_col + c, depth,
                                    out[b, i0], out[b, i1], out[b, i2], out[b, i3], c)


@jit()
def _attention_backward_kernel(grad, q, k, v, columns, weights, num_heads, dq, dk, dv, v_t, d_p, zeros):
    """Writes dq and adds dk, dv (zeroed by the caller: every query row adds its share), each
    at the columns of its input; dq, dk, dv may be one array, as q, k, v may be.
    Scratch: v_t (D, Tk), d_p (4, Tk); zeros: a row of at least max(Tk, q's width) zeros."""
    batch, q_len, width = grad.shape
    k_len, depth = k.shape[1], width // num_heads
    last = q_len - 1
    q_col, k_col, v_col = columns
    scale = q.dtype.type(1 / np.sqrt(depth))
    # d_p: dP for 4 rows, then overwritten with dS. A repeated (past the end) row adds 0 * 0
    # to dK and dV: zero coefficients AND zero inputs, since 0 * (an inf or NaN in q or grad) is NaN
    no_coefficients, no_q, no_grad = zeros[:k_len], zeros[:q.shape[2]], zeros[:width]
    for b in range(batch):
        for h in range(num_heads):
            c = h * depth
            _transpose_head(v, b, v_col + c, v_t)
            p = weights[b, h]
            for i0 in range(0, q_len, 4):
                i1, i2, i3 = min(i0 + 1, last), min(i0 + 2, last), min(i0 + 3, last)
                _four_rows_times(grad[b, i0], grad[b, i1], grad[b, i2], grad[b, i3], c, v_t, d_p)
                for r in range(4):  # dS = P * (dP - sum(P * dP)) / sqrt(D), in place of dP
                    softmax_backward_row(p[min(i0 + r, last)], d_p[r], d_p[r], scale)
                _four_weighted_sums(d_p[0], d_p[1], d_p[2], d_p[3], k, b, k_col + c, depth,
                                    dq[b, i0], dq[b, i1], dq[b, i2], dq[b, i3], q_col + c)
                valid = q_len - i0  # repeated rows must not add to dK and dV twice
                d1 = d_p[1] if valid > 1 else no_coefficients
                d2 = d_p[2] if valid > 2 else no_coefficients
                d3 = d_p[3] if valid > 3 else no_coefficients
                p1 = p[i1] if valid > 1 else no_coefficients
                p2 = p[i2] if valid > 2 else no_coefficients
                p3 = p[i3] if valid > 3 else no_coefficients
                q1, g1 = (q[b, i1], grad[b, i1]) if valid > 1 else (no_q, no_grad)
                q2, g2 = (q[b, i2], grad[b, i2]) if valid > 2 else (no_q, no_grad)
                q3, g3 = (q[b, i3], grad[b, i3]) if valid > 3 else (no_q, no_grad)
                _add_outer_products(d_p[0], d1, d2, d3, q[b, i0], q1, q2, q3, q_col + c, depth, dk, b, k_col + c)
                _add_outer_products(p[i0], p1, p2, p3, grad[b, i0], g1, g2, g3, c, depth, dv, b, v_col + c)


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
    _attention_kernel(q, k, v, np.asarray(columns, np.int64), num_heads, bias, strides, out, weights,
                      np.empty((width // num_heads, k_len), q.dtype), np.empty((4, k_len), q.dtype))
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
    k_len = k.shape[1]
    _attention_backward_kernel(grad, q, k, v, np.asarray(columns, np.int64), np.ascontiguousarray(weights),
                               num_heads, dq, dk, dv, np.empty((width // num_heads, k_len), q.dtype),
                               np.empty((4, k_len), q.dtype), np.zeros(max(k_len, q.shape[2]), q.dtype))
