"""A Hessian-vector product through the whole date Transformer (float64, fused attention,
the training loss with padding and label smoothing) against central differences of its
gradient, and forward mode through its encoder and decoder stacks: every op of the model
has second-order and tangent rules, and they compose."""

import numpy as np

import minigrad
from minigrad import Tensor, autograd, jvpcheck
from minigrad import functional as F
from transformer import ModelConfig, Transformer
from transformer.models.attention import causal_mask
from transformer.tasks.dates import PAD, SRC_LEN, TGT_LEN, encode_batch

SMALL = dict(d_model=8, num_heads=2, num_encoder_layers=1, num_decoder_layers=1, d_ff=16)
SOURCES, TARGETS = ["1845-01-05", "1996-09-08", "2001-12-31"], ["January 5, 1845", "September 8, 1996",
                                                                "December 31, 2001"]

def small_model_and_loss():
    minigrad.manual_seed(3)
    model = Transformer(ModelConfig(**SMALL)).double()
    src, tgt = encode_batch(SOURCES, SRC_LEN), encode_batch(TARGETS, TGT_LEN)

    def loss():
        logits = model(src, tgt[:, :-1])
        return F.cross_entropy(logits, tgt[:, 1:], ignore_index=PAD, label_smoothing=0.1)
    return model, loss

def ops_in_graph(root):
    names, seen, todo = set(), set(), [root]
    while todo:
        t = todo.pop()
        if id(t) in seen or t.grad_fn is None:
            continue
        seen.add(id(t))
        names.add(t.grad_fn.name)
        todo.extend(t.grad_fn.inputs)
    return names

def test_hessian_vector_product_of_the_date_transformer_agrees_with_central_differences():
    model, loss = small_model_and_loss()
    params = model.parameters()
    rng = np.random.default_rng(0)
    v = [rng.standard_normal(p.shape) for p in params]

    value = loss()
    assert value.dtype == np.float64
    assert {"SelfAttentionCore", "CrossAttentionCore", "Linear", "LayerNorm", "CrossEntropy"} <= ops_in_graph(value)
    grads = autograd.grad(value, params, create_graph=True)
    hvp = autograd.grad(sum((g * vi).sum() for g, vi in zip(grads, v)), params)
    hvp = np.concatenate([h.numpy().ravel() for h in hvp])

    def gradient_at(step):
        originals = [p.data for p in params]
        for p, vi in zip(params, v):
            p.data = p.data + step * vi
        try:
            return np.concatenate([g.numpy().ravel() for g in autograd.grad(loss(), params)])
        finally:
            for p, original in zip(params, originals):
                p.data = original
    eps = 1e-5
    central = (gradient_at(eps) - gradient_at(-eps)) / (2 * eps)
    relative = np.max(np.abs(hvp - central)) / np.max(np.abs(central))
    assert relative < 1e-4, f"H v differs from central differences by {relative:.2e} (relative to max |H v|)"


def test_forward_mode_through_the_encoder_and_decoder_stacks():
    # a tangent on the token vectors goes through fused self- and cross-attention, layer norm,
    # Linear and ReLU; jvpcheck compares it with central differences
    model, _ = small_model_and_loss()
    src, tgt = encode_batch(SOURCES, SRC_LEN), encode_batch(TARGETS, TGT_LEN)[:, :-1]
    _, src_mask = model.encode(src)
    self_mask = causal_mask(tgt.shape[1])[None, None]
    rng = np.random.default_rng(1)
    x = Tensor(rng.standard_normal((len(SOURCES), SRC_LEN, SMALL["d_model"])), requires_grad=True)
    y = Tensor(rng.standard_normal((len(SOURCES), tgt.shape[1], SMALL["d_model"])), requires_grad=True)
    assert jvpcheck(lambda x_, y_: model.decoder(y_, model.encoder(x_, src_mask), self_mask, src_mask), [x, y],
                    rtol=1e-6, atol=1e-8)
