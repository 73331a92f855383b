"""Optimizers and schedules.

SGD, SGD+momentum, Adam (torch.optim.Adam, bias-corrected) and weight decay
against hand-computed numpy updates, clip_grad_norm, the warm-up schedules,
optimizer/schedule state_dict resumes, and XOR learned by an MLP.
"""
import math

import numpy as np
import pytest

import minigrad as mg
from minigrad import Tensor, nn, optim


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
