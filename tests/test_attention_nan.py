"""Where NaN goes in masked attention, family by family, beside PyTorch 2.13's two answers.

PyTorch computes masked attention two ways, and they place NaN differently:
  "op by op"  (q @ kᵀ / sqrt(d)).masked_fill(~mask, -inf).softmax(-1) @ v  (docs/nan-rules.md's column)
  "sdpa"      torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)  (CPU)
Both were measured once with PyTorch 2.13 (CPU, float64, one head of width 2, batch 1; the
output gradient given) and are written out: the project never imports torch.

minigrad's fused self- and cross-attention (Numba kernel and numpy alike) and its step-by-step
ops give one answer, ``ours``: op by op's, except that a query whose scores are all -inf, hidden
by the mask or by an inf in Q or K, gets zero weights (softmax's rule), as sdpa does.
"""
import numpy as np
import pytest

from minigrad import Tensor, kernels
from minigrad import functional as F
from transformer.models.attention import scaled_dot_product_attention

nan, inf = np.nan, np.inf
CAUSAL = [[True, False, False], [True, True, False], [True, True, True]]
V = [[2.0, -0.5], [1.5, 0.25], [-1.0, 2.0]]
Q = [[0.5, -1.0], [1.5, 0.25], [1.0, 0.5]]
K = [[0.25, 1.0], [0.5, 0.5], [1.5, -0.25]]
ONES = [[1.0, 1.0]] * 3

# the finite rows of a causal attention over Q, K, V above (queries 0 and 2), as both PyTorch answers give them
OUT_0, OUT_2 = [2.0, -0.5], [0.5468012423960535, 0.8047444945121403]
DQ_2 = [-0.1161411442515188, 0.09633156226621116]

# family: (inputs, {"op by op": answer, "sdpa": answer}, ours: the name of the answer we give, or our own)
FAMILIES = {
    # -inf in query 1: every score it may see is -inf
    "inf-makes-every-score-minus-inf": (
        dict(q=[[0.5, -1.0], [-inf, 0.75], [1.0, 0.5]], k=K, v=V, mask=CAUSAL, grad=ONES),
        {"op by op": {"out": [OUT_0, [nan, nan], OUT_2], "dq": [[0.0, 0.0], [nan, nan], DQ_2],
                      "dk": [[nan, nan], [nan, nan], [nan, -0.05438029049473072]], "dv": [[nan, nan]] * 3},
         "sdpa": {"out": [OUT_0, [0.0, 0.0], OUT_2], "dq": [[0.0, 0.0], [0.0, 0.0], DQ_2],
                  "dk": [[nan, 0.014761126524115074], [nan, 0.03961916397061567], [nan, -0.054380290494730664]],
                  "dv": [[1.2812365895265552] * 2, [0.28123658952655517] * 2, [0.43752682094688955] * 2]}},
        "sdpa"),
    # +inf in the keys query 0 and 1 may see: query 0's scores are all -inf, query 1's +inf; key 2 is padding
    "inf-in-the-keys": (
        dict(q=[[-1.0, 0.5], [1.0, 0.25]], k=[[inf, 0.0], [inf, 1.0], [0.5, 0.5]], v=V,
             mask=[[True, True, False]], grad=[[1.0, 1.0]] * 2),
        {"op by op": {"out": [[nan, nan]] * 2, "dq": [[nan, nan]] * 2, "dk": [[nan, nan], [nan, nan], [0.0, 0.0]],
                      "dv": [[nan, nan]] * 3},
         "sdpa": {"out": [[0.0, 0.0], [nan, nan]], "dq": [[nan, 0.0], [nan, nan]], "dk": [[nan, nan]] * 3,
                  "dv": [[nan, nan]] * 3}},
        # sdpa's zero row for query 0, op by op's 0 to the hidden key
        {"out": [[0.0, 0.0], [nan, nan]], "dq": [[nan, 0.0], [nan, nan]], "dk": [[nan, nan], [nan, nan], [0.0, 0.0]],
         "dv": [[nan, nan]] * 3}),
    # query 1 may see no key
    "query-allowed-no-key": (
        dict(q=Q, k=K, v=V, mask=[[True, False, False], [False, False, False], [True, True, True]], grad=ONES),
        {"op by op": {"out": [OUT_0, [nan, nan], OUT_2], "dq": [[0.0, 0.0], [0.0, 0.0], DQ_2],
                      "dk": [[0.029522253048230147, 0.014761126524115074], [0.07923832794123134, 0.03961916397061567],
                             [-0.10876058098946133, -0.054380290494730664]], "dv": [[nan, nan]] * 3},
         "sdpa": {"out": [OUT_0, [0.0, 0.0], OUT_2], "dq": [[0.0, 0.0], [0.0, 0.0], DQ_2],
                  "dk": [[0.029522253048230147, 0.014761126524115074], [0.07923832794123134, 0.03961916397061567],
                         [-0.10876058098946133, -0.054380290494730664]],
                  "dv": [[1.2812365895265552] * 2, [0.28123658952655517] * 2, [0.43752682094688955] * 2]}},
        "sdpa"),
    # NaN in key 2, hidden from queries 0 and 1
    "nan-score-behind-the-mask": (
        dict(q=Q, k=[[0.25, 1.0], [0.5, 0.5], [nan, -0.25]], v=V, mask=CAUSAL, grad=ONES),
        {"op by op": {"out": [OUT_0, [1.727960278325387, -0.09194041748808049], [nan, nan]],
                      "dq": [[nan, 0.0], [nan, -0.02192534858895131], [nan, nan]], "dk": [[nan, nan]] * 3,
                      "dv": [[nan, nan]] * 3},
         "sdpa": {"out": [[nan, nan]] * 3, "dq": [[nan, nan]] * 3, "dk": [[nan, nan]] * 3, "dv": [[nan, nan]] * 3}},
        "op by op"),
    # +inf in key 2, padding: query 0's hidden score is +inf, query 1's -inf
    "inf-score-behind-the-mask": (
        dict(q=[[1.0, 0.5], [-1.0, 0.25]], k=[[0.5, 1.0], [-0.5, 0.5], [inf, 0.0]], v=V,
             mask=[[True, True, False]], grad=[[1.0, 1.0]] * 2),
        {"op by op": {"out": [[1.8538131629872572, -0.28071974448088594], [1.6750364898966779, -0.012554734845016624]],
                      "dq": [[nan, -0.01828678092429997], [nan, -0.020110283788235667]],
                      "dk": [[0.0036470057278713136, -0.028341922818417756],
                             [-0.0036470057278712303, 0.028341922818417707], [0.0, 0.0]],
                      "dv": [[1.05769930576787] * 2, [0.9423006942321299] * 2, [0.0, 0.0]]},
         "sdpa": {"out": [[nan, nan], [1.6750364898966779, -0.012554734845016624]],
                  "dq": [[nan, nan], [nan, -0.020110283788235664]], "dk": [[nan, nan]] * 3, "dv": [[nan, nan]] * 3}},
        "op by op"),
    # a NaN output gradient for query 0, which sees key 0 only
    "nan-gradient-of-a-query": (
        dict(q=Q, k=K, v=V, mask=CAUSAL, grad=[[nan, 1.0], [1.0, 1.0], [1.0, 1.0]]),
        {"op by op": {"out": [OUT_0, [1.727960278325387, -0.09194041748808049], OUT_2],
                      "dq": [[nan, nan], [0.01096267429447569, -0.02192534858895131], DQ_2],
                      "dk": [[nan, nan], [0.14501437370808534, 0.05058183826509132],
                             [-0.10876058098946144, -0.05438029049473072]],
                      "dv": [[nan, 1.7371571461773292], [nan, 0.8253160328757811], [nan, 0.43752682094688966]]},
         "sdpa": {"out": [OUT_0, [1.7279602783253871, -0.09194041748808052], OUT_2],
                  "dq": [[nan, nan], [0.010962674294475689, -0.021925348588951316], DQ_2], "dk": [[nan, nan]] * 3,
                  "dv": [[nan, 1.7371571461773292], [nan, 0.8253160328757811], [nan, 0.43752682094688955]]}},
        "op by op"),
}
PATHS = ["fused self-attention", "fused cross-attention", "step by step"]


def attend(path, q, k, v, mask, grad, heads=1):
    """{"out", "dq", "dk", "dv"} of attention over q (B, Tq, W), k and v (B, Tk, W) by one path."""
    width = q.shape[2]
    if path == "fused self-attention":          # Q, K and V packed in one input
        qkv = Tensor(np.concatenate([q, k, v], -1), requires_grad=True)
        out, _ = F.self_attention(qkv, heads, mask)
        out.backward(grad)
        return dict(out=out.data, dq=qkv.grad[..., :width], dk=qkv.grad[..., width:2 * width],
                    dv=qkv.grad[..., 2 * width:])
    if path == "fused cross-attention":
        queries, kv = Tensor(q, requires_grad=True), Tensor(np.concatenate([k, v], -1), requires_grad=True)
        out, _ = F.cross_attention(queries, kv, heads, mask)
        out.backward(grad)
        return dict(out=out.data, dq=queries.grad, dk=kv.grad[..., :width], dv=kv.grad[..., width:])
    split = [Tensor(split_heads(x, heads), requires_grad=True) for x in (q, k, v)]
    out, _ = scaled_dot_product_attention(*split, np.asarray(mask))
    out.backward(split_heads(grad, heads))
    return dict(out=merge_heads(out.data), **{d: merge_heads(x.grad) for d, x in zip(("dq", "dk", "dv"), split)})


def split_heads(x, heads):
    batch, length, width = x.shape
    return x.reshape(batch, length, heads, width // heads).transpose(0, 2, 1, 3).copy()


def merge_heads(x):
    batch, heads, length, depth = x.shape
    return x.transpose(0, 2, 1, 3).reshape(batch, length, heads * depth)


def equal(got, want, rtol=1e-12):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    return got.shape == want.shape and np.allclose(got, want, rtol=rtol, atol=1e-15, equal_nan=True) \
        and (np.isnan(got) == np.isnan(want)).all() and (np.isinf(got) == np.isinf(want)).all()


def family_paths():
    for family, (inputs, _, _) in FAMILIES.items():
        same_length = len(inputs["q"]) == len(inputs["k"])
        for path in PATHS:
            if same_length or path != "fused self-attention":
                yield family, path


@pytest.mark.parametrize("backend", kernels.BACKENDS)
@pytest.mark.parametrize("family, path", list(family_paths()))
def test_family_as_documented(family, path, backend):
    inputs, pytorch, ours = FAMILIES[family]
    want = pytorch[ours] if isinstance(ours, str) else ours
    q, k, v, grad = (np.array([inputs[x]]) for x in ("q", "k", "v", "grad"))
    with kernels.use_backend(backend), np.errstate(all="ignore"):
        got = attend(path, q, k, v, np.array(inputs["mask"]), grad)
    for what in want:
        assert equal(got[what][0], want[what]), f"{family}, {path}: {what} {got[what][0].tolist()}"
    for name, answer in pytorch.items():   # the other answer really differs: the doc's difference is real
        if name != ours:
            assert any(not equal(got[what][0], answer[what]) for what in answer), (family, name)


def special_value_cases(count, seed=0):
    """Small attentions (1 or 2 heads, up to 5 positions) with causal, padding or no mask and one
    NaN, +inf or -inf in q, k, v or the output gradient; a -inf or inf in q or k often makes
    every score of a query -inf."""
    rng = np.random.default_rng(seed)
    for _ in range(count):
        heads, length = int(rng.integers(1, 3)), int(rng.integers(1, 6))
        width = heads * int(rng.integers(1, 4))
        q, k, v, grad = rng.standard_normal((4, 2, length, width))
        mask = np.ones((2, 1, length, length), bool)
        if rng.random() < 0.5:
            mask &= np.tril(mask[0, 0])
        if rng.random() < 0.5:
            mask &= (np.arange(length) < rng.integers(1, length + 1, (2, 1)))[:, None, None, :]
        target = (q, k, v, grad)[int(rng.integers(0, 4))]
        target[tuple(int(rng.integers(0, n)) for n in target.shape)] = rng.choice([nan, inf, -inf])
        yield q, k, v, mask, grad, heads


@pytest.mark.parametrize("backend", kernels.BACKENDS)
def test_fused_and_step_by_step_place_nan_alike(backend):
    """Fused self- and cross-attention give what the step-by-step ops give: NaN and inf at the same
    places, other values to rounding (the fused op scales by 1 / sqrt(d), step by step divides)."""
    with kernels.use_backend(backend), np.errstate(all="ignore"):
        for n, (q, k, v, mask, grad, heads) in enumerate(special_value_cases(300)):
            want = attend("step by step", q, k, v, mask, grad, heads)
            for path in PATHS[:2]:
                got = attend(path, q, k, v, mask, grad, heads)
                for what in want:
                    assert equal(got[what], want[what], rtol=1e-10), f"case {n}, {path}: {what}"
