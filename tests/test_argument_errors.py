"""Argument mistakes in shape ops, reductions, optimizers and schedules get one
clear line naming what was wrong, never a numpy/Python internal error, and no
hyper-parameter that cannot train (NaN, negative) is accepted silently."""
import math

import numpy as np
import pytest

import minigrad as mg
from minigrad import Tensor, optim


def x23():
    return Tensor(np.ones((2, 3)))


@pytest.mark.parametrize("op", [mg.concatenate, mg.stack])
def test_concatenate_and_stack_of_an_empty_list_say_so(op):
    with pytest.raises(ValueError, match=rf"{op.__name__} needs at least one tensor, got an empty list"):
        op([])


@pytest.mark.parametrize("op", [mg.concatenate, mg.stack])
def test_concatenate_and_stack_of_a_lone_tensor_ask_for_a_list(op):
    with pytest.raises(TypeError, match=rf"{op.__name__} takes a list of tensors, got one Tensor"):
        op(x23())


@pytest.mark.parametrize("method", ["sum", "mean", "max", "min", "any", "all"])
@pytest.mark.parametrize("axis", [1.0, "0", {1}])
def test_a_reduction_axis_of_the_wrong_type_is_named(method, axis):
    with pytest.raises(TypeError, match=rf"{method}: axis must be None, an int or a tuple of ints, got "
                                        rf"{type(axis).__name__}"):
        getattr(x23(), method)(axis=axis)


@pytest.mark.parametrize("call", [lambda x: x.sum(axis=(1.0,)), lambda x: x.argmax(axis=1.5),
                                  lambda x: x.sum(axis=True), lambda x: mg.concatenate([x, x], axis=0.0)])
def test_a_non_integer_axis_is_named(call):
    with pytest.raises(TypeError, match=r"axis must be an int, got (float|bool)"):
        call(x23())


def params():
    return [Tensor(np.zeros(2), requires_grad=True)]


@pytest.mark.parametrize("make", [optim.SGD, optim.Adam])
@pytest.mark.parametrize("lr", [math.nan, math.inf, -1e-3, "0.1", None])
def test_an_optimizer_refuses_a_learning_rate_that_cannot_train(make, lr):
    with pytest.raises(ValueError, match=rf"{make.__name__}: invalid learning rate .*finite number >= 0"):
        make(params(), lr=lr)


@pytest.mark.parametrize("kwargs, name", [
    (dict(betas=(0.9, math.nan)), "beta at index 1"), (dict(betas=(1.0, 0.999)), "beta at index 0"),
    (dict(betas=(-0.1, 0.9)), "beta at index 0"), (dict(betas=(0.9,)), "betas"),
    (dict(eps=-1e-8), "eps"), (dict(eps=math.nan), "eps"), (dict(weight_decay=-0.1), "weight_decay")])
def test_adam_refuses_bad_betas_eps_and_weight_decay(kwargs, name):
    with pytest.raises(ValueError, match=rf"Adam: invalid {name}"):
        optim.Adam(params(), lr=1e-3, **kwargs)


@pytest.mark.parametrize("kwargs, name", [(dict(momentum=-0.9), "momentum"), (dict(momentum=math.nan), "momentum"),
                                          (dict(weight_decay=math.inf), "weight_decay")])
def test_sgd_refuses_bad_momentum_and_weight_decay(kwargs, name):
    with pytest.raises(ValueError, match=rf"SGD: invalid {name}"):
        optim.SGD(params(), lr=0.1, **kwargs)


@pytest.mark.parametrize("make, name", [
    (lambda o: optim.WarmupConstant(o, math.nan, 10), "base learning rate"),
    (lambda o: optim.WarmupInverseSqrt(o, -1.0, 10), "base learning rate"),
    (lambda o: optim.WarmupConstant(o, 0.1, -5), "warmup"),
    (lambda o: optim.WarmupInverseSqrt(o, 0.1, 2.5), "warmup"),
    (lambda o: optim.WarmupCosine(o, 0.1, 10, 0), "total_steps"),
    (lambda o: optim.WarmupCosine(o, 0.1, 10, 100, min_lr=math.nan), "min_lr"),
    (lambda o: optim.WarmupPlateauCooldown(o, 0.1, 10, 0, 100), "cooldown"),
    (lambda o: optim.WarmupPlateauCooldown(o, 0.1, 10, 50, 100, min_lr=-0.1), "min_lr")])
def test_a_schedule_refuses_values_that_cannot_train(make, name):
    with pytest.raises(ValueError, match=rf"Warmup\w+: invalid {name}"):
        make(optim.SGD(params(), lr=0.1))


def test_valid_hyper_parameters_are_kept_as_given():
    opt = optim.Adam(params(), lr=np.float32(0.5), betas=[0.0, 0.5], eps=0.0, weight_decay=0)
    assert (opt.lr, opt.betas, opt.eps, opt.weight_decay) == (0.5, (0.0, 0.5), 0.0, 0.0)
    schedule = optim.WarmupCosine(opt, 0.2, np.int64(0), 10, min_lr=0.0)
    assert schedule.warmup == 1 and opt.lr == pytest.approx(0.2)
