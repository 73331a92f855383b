"""Layers, optimizers and schedules.

Module: dotted parameter names and their order (nested modules, ModuleList,
tied weights), counts, train()/eval() propagation, zero_grad, state_dict
round trips, to(np.float64). Linear/LayerNorm/Embedding/Dropout forward values
against numpy formulas, Linear's PyTorch init bounds, Dropout statistics and
edge cases, gradcheck of every layer in float64 (its own parameters perturbed).
optim: SGD, SGD+momentum, Adam (torch.optim.Adam, bias-corrected) and weight
decay against hand-computed numpy updates, clip_grad_norm, the warm-up
schedules, optimizer/schedule state_dict resumes, and XOR learned by an MLP.
"""
import math

import numpy as np
import pytest

import minigrad as mg
from minigrad import Tensor, gradcheck, nn, optim
from minigrad import functional as F


class Block(nn.Module):
    def __init__(self):
        self.norm = nn.LayerNorm(4)
        self.proj = nn.Linear(4, 4)
        self.drop = nn.Dropout(0.5)


class Net(nn.Module):
    def __init__(self):
        self.embed = nn.Embedding(5, 4)
        self.layers = nn.ModuleList([Block(), Block()])
        self.head = nn.Linear(4, 2, bias=False)

    def forward(self, ids):
        h = self.embed(ids)
        for block in self.layers:
            h = h + block.drop(block.proj(block.norm(h)).gelu())
        return self.head(h)


EXPECTED_NAMES = ["embed.weight",
                  "layers.0.norm.weight", "layers.0.norm.bias", "layers.0.proj.weight", "layers.0.proj.bias",
                  "layers.1.norm.weight", "layers.1.norm.bias", "layers.1.proj.weight", "layers.1.proj.bias",
                  "head.weight"]


# ------------------------------------------------------------------ Module
def test_named_parameters_dotted_names_in_assignment_order():
    assert [name for name, _ in Net().named_parameters()] == EXPECTED_NAMES


def test_parameter_count():
    net = Net()
    assert len(net.parameters()) == 10
    assert net.num_parameters() == 5 * 4 + 2 * (4 + 4 + 4 * 4 + 4) + 4 * 2


def test_module_list_indexing_and_length():
    blocks = nn.ModuleList([nn.Linear(1, 1), nn.Linear(1, 2), nn.Linear(1, 3)])
    assert len(blocks) == 3
    assert blocks[-1].out_features == 3 and blocks[1].out_features == 2
    assert [b.out_features for b in blocks] == [1, 2, 3]


def test_tied_parameter_is_listed_once():
    net = Net()
    net.head.weight = net.layers[0].proj.weight
    names = [name for name, _ in net.named_parameters()]
    assert "head.weight" not in names and len(names) == 9


def test_train_and_eval_propagate_to_every_submodule():
    net = Net()
    net.eval()
    assert all(not m.training for _, m in net.named_modules())
    net.train()
    assert all(m.training for _, m in net.named_modules())
    assert len(list(net.named_modules())) == 1 + 1 + 1 + 2 * 4 + 1


def test_eval_makes_a_nested_dropout_deterministic():
    mg.manual_seed(0)
    net = Net().eval()
    ids = np.array([[0, 1, 2, 3]])
    np.testing.assert_array_equal(net(ids).numpy(), net(ids).numpy())
    net.train()
    assert not np.array_equal(net(ids).numpy(), net(ids).numpy())


def test_zero_grad_clears_every_parameter_gradient():
    net = Net()
    net(np.array([1, 2])).sum().backward()
    assert all(p.grad is not None for p in net.parameters())
    net.zero_grad()
    assert all(p.grad is None for p in net.parameters())


def test_state_dict_round_trip():
    mg.manual_seed(1)
    source = Net().eval()
    mg.manual_seed(2)
    target = Net().eval()
    ids = np.array([[4, 0, 2]])
    assert not np.allclose(source(ids).numpy(), target(ids).numpy())
    state = source.state_dict()
    assert list(state) == EXPECTED_NAMES
    target.load_state_dict(state)
    np.testing.assert_array_equal(source(ids).numpy(), target(ids).numpy())
    state["head.weight"][:] = 99.0    # the state is a copy, not a view of the parameters
    assert not np.any(source.head.weight.numpy() == 99.0)


def test_to_float64_converts_every_parameter():
    net = Net().to(np.float64)
    assert all(p.dtype == np.float64 for p in net.parameters())
    assert net(np.array([1, 2])).dtype == np.float64
    assert all(p.dtype == np.float32 for p in Net().parameters())


def test_repr_lists_children():
    text = repr(Block())
    assert "LayerNorm(4, eps=1e-05)" in text and "Linear(4, 4, bias=True)" in text and "Dropout(p=0.5)" in text


# ------------------------------------------------------------------ layers
def test_linear_forward_matches_numpy():
    layer = nn.Linear(3, 2)
    x = np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32)
    y = layer(Tensor(x))
    np.testing.assert_allclose(y.numpy(), x @ layer.weight.numpy() + layer.bias.numpy(), rtol=1e-5)
    assert y.shape == (4, 2) and y.dtype == np.float32
    no_bias = nn.Linear(3, 2, bias=False)
    assert no_bias.bias is None and len(no_bias.parameters()) == 1
    np.testing.assert_allclose(no_bias(Tensor(x)).numpy(), x @ no_bias.weight.numpy(), rtol=1e-5)


def test_linear_on_a_batch_of_sequences():
    layer = nn.Linear(4, 5)
    x = np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32)
    np.testing.assert_allclose(layer(Tensor(x)).numpy(), x @ layer.weight.numpy() + layer.bias.numpy(),
                               rtol=1e-5, atol=1e-6)


def test_linear_init_follows_the_pytorch_bound():
    mg.manual_seed(0)
    layer = nn.Linear(100, 400)
    bound = 1 / math.sqrt(100)
    for p in (layer.weight, layer.bias):
        values = p.numpy()
        assert p.dtype == np.float32
        assert np.abs(values).max() <= bound
        assert np.abs(values).max() > 0.97 * bound        # uses the whole range
    w = layer.weight.numpy()
    assert abs(w.mean()) < 0.01 * bound
    assert abs(w.std() - bound / math.sqrt(3)) < 0.02 * bound   # std of U(-b, b)


def test_manual_seed_makes_init_repeatable():
    mg.manual_seed(42)
    a = nn.Linear(3, 3).weight.numpy()
    mg.manual_seed(42)
    b = nn.Linear(3, 3).weight.numpy()
    np.testing.assert_array_equal(a, b)


def test_layer_norm_forward_matches_numpy():
    norm = nn.LayerNorm(5, eps=1e-5)
    rng = np.random.default_rng(0)
    norm.weight.data = rng.standard_normal(5).astype(np.float32)
    norm.bias.data = rng.standard_normal(5).astype(np.float32)
    x = (rng.standard_normal((2, 3, 5)) * 3 + 1).astype(np.float32)
    expected = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5) * norm.weight.numpy() \
        + norm.bias.numpy()
    np.testing.assert_allclose(norm(Tensor(x)).numpy(), expected, rtol=1e-4, atol=1e-5)


def test_layer_norm_init():
    norm = nn.LayerNorm(3)
    np.testing.assert_array_equal(norm.weight.numpy(), 1)
    np.testing.assert_array_equal(norm.bias.numpy(), 0)


def test_embedding_forward_and_gradient_with_repeated_ids():
    emb = nn.Embedding(6, 3)
    ids = np.array([[1, 4, 1], [0, 1, 5]])
    out = emb(ids)
    np.testing.assert_array_equal(out.numpy(), emb.weight.numpy()[ids])
    out.sum().backward()
    counts = np.bincount(ids.ravel(), minlength=6)[:, None] * np.ones((1, 3))
    np.testing.assert_array_equal(emb.weight.grad, counts)


def test_embedding_init_is_standard_normal():
    mg.manual_seed(0)
    w = nn.Embedding(1000, 50).weight.numpy()
    assert abs(w.mean()) < 0.02 and abs(w.std() - 1) < 0.02


def test_dropout_in_training_zeros_about_p_and_scales_survivors():
    mg.manual_seed(0)
    p = 0.25
    x = Tensor(np.ones((200, 200), np.float32))
    y = nn.Dropout(p)(x).numpy()
    zero_fraction = (y == 0).mean()
    assert abs(zero_fraction - p) < 0.01
    np.testing.assert_allclose(y[y != 0], 1 / (1 - p), rtol=1e-6)
    assert abs(y.mean() - 1.0) < 0.02


def test_dropout_masks_differ_between_calls_and_repeat_after_seed():
    x = Tensor(np.ones(100, np.float32))
    mg.manual_seed(3)
    first, second = F.dropout(x, 0.5).numpy(), F.dropout(x, 0.5).numpy()
    assert not np.array_equal(first, second)
    mg.manual_seed(3)
    np.testing.assert_array_equal(F.dropout(x, 0.5).numpy(), first)


def test_dropout_rng_state_save_and_restore():
    x = Tensor(np.ones(50, np.float32))
    mg.manual_seed(9)
    state = mg.get_rng_state()
    first = F.dropout(x, 0.5).numpy()
    mg.set_rng_state(state)
    np.testing.assert_array_equal(F.dropout(x, 0.5).numpy(), first)


def test_dropout_is_identity_in_eval():
    drop = nn.Dropout(0.9).eval()
    x = Tensor(np.arange(6.0, dtype=np.float32))
    np.testing.assert_array_equal(drop(x).numpy(), x.numpy())


def test_dropout_p0_is_identity_and_p1_zeros_everything():
    x = Tensor(np.arange(1.0, 7.0), requires_grad=True)
    np.testing.assert_array_equal(nn.Dropout(0.0)(x).numpy(), x.numpy())
    y = nn.Dropout(1.0)(x)
    np.testing.assert_array_equal(y.numpy(), 0)
    y.sum().backward()
    np.testing.assert_array_equal(x.grad, 0)


# -------------------------------------------------------- layer gradchecks
def _float64_input(*shape, seed=0):
    return Tensor(np.random.default_rng(seed).standard_normal(shape), requires_grad=True)


def test_linear_gradcheck():
    layer = nn.Linear(3, 4).to(np.float64)
    assert gradcheck(lambda x, w, b: layer(x).tanh(), [_float64_input(2, 5, 3), layer.weight, layer.bias])


def test_layer_norm_gradcheck():
    norm = nn.LayerNorm(4).to(np.float64)
    rng = np.random.default_rng(1)
    norm.weight.data, norm.bias.data = rng.standard_normal(4), rng.standard_normal(4)
    assert gradcheck(lambda x, w, b: norm(x) * norm(x).exp(), [_float64_input(3, 4), norm.weight, norm.bias])


def test_embedding_gradcheck():
    emb = nn.Embedding(5, 3).to(np.float64)
    ids = np.array([[0, 3, 3], [4, 0, 3]])
    assert gradcheck(lambda w: (emb(ids) * emb(ids)).sum(axis=1), [emb.weight])


def test_dropout_gradcheck():
    drop = nn.Dropout(0.4)

    def fn(x):
        mg.manual_seed(7)
        return drop(x).tanh()

    assert gradcheck(fn, [_float64_input(4, 5)])


def test_small_network_gradcheck():
    mg.manual_seed(0)
    net = Net().to(np.float64).eval()
    ids = np.array([[1, 4, 2]])
    assert gradcheck(lambda *params: F.cross_entropy(net(ids)[0], np.array([0, 1, 1])), net.parameters())


# ------------------------------------------------------------------ optim
def _param(values):
    return nn.Parameter(np.array(values, np.float64), dtype=np.float64)


def _set_grad(p, g):
    p.grad = np.array(g, dtype=np.float64)


def test_sgd_single_step():
    p = _param([1.0, -2.0])
    _set_grad(p, [0.5, 0.25])
    optim.SGD([p], lr=0.1).step()
    np.testing.assert_allclose(p.numpy(), [1 - 0.05, -2 - 0.025])


def test_sgd_momentum_two_steps():
    p = _param([1.0, 2.0])
    opt = optim.SGD([p], lr=0.1, momentum=0.9)
    g1, g2 = np.array([1.0, -1.0]), np.array([0.5, 2.0])
    _set_grad(p, g1)
    opt.step()
    np.testing.assert_allclose(p.numpy(), [1, 2] - 0.1 * g1)
    _set_grad(p, g2)
    opt.step()
    np.testing.assert_allclose(p.numpy(), [1, 2] - 0.1 * g1 - 0.1 * (0.9 * g1 + g2))


def test_sgd_weight_decay():
    p = _param([2.0, -4.0])
    _set_grad(p, [1.0, 1.0])
    optim.SGD([p], lr=0.1, weight_decay=0.5).step()
    np.testing.assert_allclose(p.numpy(), [2 - 0.1 * (1 + 1), -4 - 0.1 * (1 - 2)])


def test_optimizer_skips_parameters_without_gradient():
    p, q = _param([1.0]), _param([2.0])
    _set_grad(p, [1.0])
    opt = optim.Adam([p, q], lr=0.1)
    opt.step()
    assert q.numpy()[0] == 2.0 and p.numpy()[0] != 1.0


def _numpy_adam(p, grads, lr, b1, b2, eps, weight_decay=0.0):
    """torch.optim.Adam, written out."""
    m, v = np.zeros_like(p), np.zeros_like(p)
    for t, g in enumerate(grads, start=1):
        g = g + weight_decay * p
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        m_hat, v_hat = m / (1 - b1 ** t), v / (1 - b2 ** t)
        p = p - lr * m_hat / (np.sqrt(v_hat) + eps)
    return p


@pytest.mark.parametrize("weight_decay", [0.0, 0.1])
def test_adam_three_steps_match_torch_formula(weight_decay):
    start = np.array([0.5, -1.5, 3.0])
    grads = [np.array([0.1, -2.0, 0.0]), np.array([0.3, 1.0, 1e-3]), np.array([-0.2, 0.5, 4.0])]
    p = _param(start)
    opt = optim.Adam([p], lr=0.01, betas=(0.8, 0.99), eps=1e-3, weight_decay=weight_decay)
    for g in grads:
        _set_grad(p, g)
        opt.step()
    np.testing.assert_allclose(p.numpy(), _numpy_adam(start, grads, 0.01, 0.8, 0.99, 1e-3, weight_decay),
                               rtol=1e-12, atol=1e-14)


def test_adam_first_step_moves_each_coordinate_by_about_lr():
    p = _param([0.0, 0.0])
    _set_grad(p, [1e-4, -50.0])
    optim.Adam([p], lr=0.01).step()
    np.testing.assert_allclose(p.numpy(), [-0.01, 0.01], rtol=1e-3)


def test_clip_grad_norm_scales_to_max_norm_and_returns_the_norm_before():
    p, q = _param([0.0, 0.0]), _param([0.0])
    _set_grad(p, [3.0, 4.0])
    _set_grad(q, [12.0])
    total = optim.clip_grad_norm([p, q], max_norm=6.5)
    assert total == pytest.approx(13.0)
    new_norm = math.sqrt((p.grad ** 2).sum() + (q.grad ** 2).sum())
    assert new_norm == pytest.approx(6.5, rel=1e-6)
    np.testing.assert_allclose(np.concatenate([p.grad, q.grad]) / new_norm, np.array([3, 4, 12]) / 13)


def test_clip_grad_norm_leaves_small_gradients_alone():
    p = _param([0.0, 0.0])
    _set_grad(p, [0.3, 0.4])
    assert optim.clip_grad_norm([p], max_norm=1.0) == pytest.approx(0.5)
    np.testing.assert_array_equal(p.grad, [0.3, 0.4])


def test_clip_grad_norm_ignores_parameters_without_gradient():
    p, q = _param([0.0]), _param([0.0])
    _set_grad(p, [2.0])
    assert optim.clip_grad_norm([p, q], max_norm=1.0) == pytest.approx(2.0)
    assert q.grad is None and p.grad[0] == pytest.approx(1.0, rel=1e-5)


# --------------------------------------------------------------- schedules
def _lrs(schedule_cls, steps, **kw):
    """The learning rate used at optimizer steps 1..steps."""
    opt = optim.SGD([_param([0.0])], lr=123.0)
    schedule = schedule_cls(opt, **kw)
    lrs = []
    for _ in range(steps):
        lrs.append(opt.lr)
        opt.step()
        schedule.step()
    return lrs


def test_warmup_inverse_sqrt():
    lrs = _lrs(optim.WarmupInverseSqrt, 16, base_lr=1.0, warmup=4)
    np.testing.assert_allclose(lrs[:4], [0.25, 0.5, 0.75, 1.0])   # linear, peak at warmup
    assert max(lrs) == lrs[3]
    np.testing.assert_allclose(lrs[8], math.sqrt(4 / 9))
    np.testing.assert_allclose(lrs[15], 0.5)                       # sqrt(4 / 16)


def test_warmup_constant():
    lrs = _lrs(optim.WarmupConstant, 8, base_lr=0.2, warmup=4)
    np.testing.assert_allclose(lrs, [0.05, 0.1, 0.15, 0.2, 0.2, 0.2, 0.2, 0.2])


def test_warmup_cosine():
    lrs = _lrs(optim.WarmupCosine, 14, base_lr=1.0, warmup=2, total_steps=10, min_lr=0.1)
    np.testing.assert_allclose(lrs[:2], [0.5, 1.0])
    np.testing.assert_allclose(lrs[5], 0.1 + 0.45 * (1 + math.cos(math.pi * 0.5)))   # step 6: halfway
    np.testing.assert_allclose(lrs[9], 0.1)                                           # step 10 = total
    np.testing.assert_allclose(lrs[10:], 0.1)                                         # stays at min
    assert all(a >= b for a, b in zip(lrs[1:], lrs[2:]))                              # decays monotonically


def _plateau_lrs(steps, start_after=None, **kw):
    """Rates at steps 1..steps; start_cooldown() is called after step ``start_after``."""
    opt = optim.SGD([_param([0.0])], lr=123.0)
    schedule = optim.WarmupPlateauCooldown(opt, **kw)
    lrs = []
    for step in range(1, steps + 1):
        lrs.append(opt.lr)
        opt.step()
        schedule.step()
        if step == start_after:
            schedule.start_cooldown()
    return lrs, schedule


def test_warmup_plateau_cooldown_decays_from_the_trigger():
    lrs, schedule = _plateau_lrs(20, start_after=6, base_lr=1.0, warmup=2, cooldown=4, total_steps=100, min_lr=0.1)
    np.testing.assert_allclose(lrs[:6], [0.5, 1.0, 1.0, 1.0, 1.0, 1.0])            # warm-up, plateau
    np.testing.assert_allclose(lrs[7], 0.1 + 0.45 * (1 + math.cos(math.pi * 0.5)))  # step 8: half-way down
    np.testing.assert_allclose(lrs[9:], 0.1)                                        # step 10 on: the floor
    assert schedule.cooldown_start == 6
    schedule.start_cooldown()                                                       # a second call: no effect
    assert schedule.cooldown_start == 6


def test_warmup_plateau_cooldown_settles_by_the_last_step_without_a_trigger():
    lrs, schedule = _plateau_lrs(12, base_lr=1.0, warmup=2, cooldown=4, total_steps=10)
    np.testing.assert_allclose(lrs[:6], [0.5, 1, 1, 1, 1, 1])
    assert lrs[9] == pytest.approx(0.0) and schedule.cooldown_start is None         # step 10 = total: 0
    assert all(a >= b for a, b in zip(lrs[1:], lrs[2:]))


def test_warmup_plateau_cooldown_triggered_during_warmup_decays_from_there():
    lrs, _ = _plateau_lrs(8, start_after=1, base_lr=1.0, warmup=4, cooldown=2, total_steps=100, min_lr=0.0)
    np.testing.assert_allclose(lrs, [0.25, 0.125, 0, 0, 0, 0, 0, 0], atol=1e-12)


def test_warmup_plateau_cooldown_state_round_trip():
    _, schedule = _plateau_lrs(7, start_after=5, base_lr=1.0, warmup=2, cooldown=4, total_steps=100, min_lr=0.1)
    opt = optim.SGD([_param([0.0])], lr=1.0)
    fresh = optim.WarmupPlateauCooldown(opt, 1.0, 2, 4, 100, min_lr=0.1)
    fresh.load_state_dict(schedule.state_dict())
    assert fresh.cooldown_start == 5 and opt.lr == schedule.optimizer.lr
    assert [fresh.lr_at(s) for s in range(1, 20)] == [schedule.lr_at(s) for s in range(1, 20)]


# ----------------------------------------------------------------- resume
def _regression_problem():
    rng = np.random.default_rng(0)
    return Tensor(rng.standard_normal((16, 3)).astype(np.float32)), Tensor(rng.standard_normal((16, 1)).astype(np.float32))


def _make_run(opt_name):
    mg.manual_seed(0)
    model = nn.Linear(3, 1)
    if opt_name == "adam":
        opt = optim.Adam(model.parameters(), lr=0.05, weight_decay=0.01)
    else:
        opt = optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    return model, opt, optim.WarmupCosine(opt, base_lr=0.05, warmup=3, total_steps=12, min_lr=0.001)


def _train(model, opt, schedule, steps):
    x, y = _regression_problem()
    for _ in range(steps):
        opt.zero_grad()
        ((model(x) - y) ** 2).mean().backward()
        opt.step()
        schedule.step()


@pytest.mark.parametrize("opt_name", ["sgd", "adam"])
def test_optimizer_and_schedule_state_round_trip_continue_identically(opt_name):
    model, opt, schedule = _make_run(opt_name)
    _train(model, opt, schedule, 5)
    saved = (model.state_dict(), opt.state_dict(), schedule.state_dict())
    _train(model, opt, schedule, 5)
    uninterrupted = model.state_dict()

    resumed_model, resumed_opt, resumed_schedule = _make_run(opt_name)
    resumed_model.load_state_dict(saved[0])
    resumed_opt.load_state_dict(saved[1])
    resumed_schedule.load_state_dict(saved[2])
    assert resumed_opt.lr == pytest.approx(optim.WarmupCosine(optim.SGD([_param([0.0])], 1.0), 0.05, 3, 12, 0.001)
                                           .lr_at(6))
    _train(resumed_model, resumed_opt, resumed_schedule, 5)
    for name, value in uninterrupted.items():
        np.testing.assert_array_equal(resumed_model.state_dict()[name], value, err_msg=name)
    assert resumed_opt.lr == opt.lr and resumed_opt.step_count == opt.step_count == 10


def test_optimizer_state_is_a_copy():
    model, opt, schedule = _make_run("adam")
    _train(model, opt, schedule, 2)
    state = opt.state_dict()
    state["m.0"][:] = 123.0
    assert not np.any(opt.m[0] == 123.0)


# -------------------------------------------------------------------- XOR
XOR_X = np.array([[0, 0], [0, 1], [1, 0], [1, 1]], np.float32)
XOR_Y = np.array([[0], [1], [1], [0]], np.float32)


class MLP(nn.Module):
    def __init__(self):
        self.hidden = nn.Linear(2, 8)
        self.out = nn.Linear(8, 1)

    def forward(self, x):
        return self.out(self.hidden(x).tanh())


@pytest.mark.parametrize("make_opt", [lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9),
                                      lambda ps: optim.Adam(ps, lr=0.05)], ids=["sgd_momentum", "adam"])
def test_mlp_learns_xor(make_opt):
    """Target: mean squared error < 0.01 after 300 full-batch steps (seed 0)."""
    mg.manual_seed(0)
    model = MLP()
    opt = make_opt(model.parameters())
    x, y = Tensor(XOR_X), Tensor(XOR_Y)
    for _ in range(300):
        opt.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
    assert loss.item() < 0.01
    np.testing.assert_array_equal(model(x).numpy() > 0.5, XOR_Y > 0.5)
