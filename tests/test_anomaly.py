"""minigrad.detect_anomaly(): the first op whose backward makes NaN or inf is
named with the line of user code that created it; off, it costs nothing."""
import numpy as np
import pytest

import minigrad as mg
from minigrad import AnomalyError, Tensor, anomaly, detect_anomaly


def leaf(values):
    return Tensor(np.array(values, dtype=np.float64), requires_grad=True)


def line_of(marker):
    """The line number in this file of the line ending with ``# <marker>``."""
    with open(__file__) as source:
        return next(i for i, line in enumerate(source, 1) if line.rstrip().endswith(f"# {marker}"))


def test_log_of_zero_times_zero_names_log_and_its_line():
    x = leaf([0.0, 1.0])
    with detect_anomaly(), np.errstate(divide="ignore", invalid="ignore"):
        y = x.log()  # the-log-line
        loss = (y * 0.0).sum()
        with pytest.raises(AnomalyError) as info:
            loss.backward()
    message = str(info.value)
    assert "backward of Log produced NaN" in message
    assert f"test_anomaly.py:{line_of('the-log-line')}" in message
    assert "y = x.log()" in message                       # the source text too
    assert "input 0 (shape (2,))" in message


def test_sqrt_of_negative_names_sqrt_not_the_ops_after_it():
    x = leaf([-1.0, 4.0])
    with detect_anomaly(), np.errstate(invalid="ignore"):
        r = x.sqrt()  # the-sqrt-line
        loss = (r * 2.0 + 1.0).sum()
        with pytest.raises(AnomalyError, match=r"backward of Sqrt produced NaN .*input 0") as info:
            loss.backward()
    assert f"test_anomaly.py:{line_of('the-sqrt-line')}" in str(info.value)


def test_inf_in_the_incoming_gradient_is_reported_as_such():
    x = leaf([1.0])
    with detect_anomaly():
        y = x * 2.0
        with pytest.raises(AnomalyError, match=r"Mul produced inf in the gradient flowing into its output"):
            y.backward(np.array([np.inf]))


def test_ops_created_outside_anomaly_mode_are_still_checked_but_without_a_line():
    x = leaf([0.0])
    with np.errstate(divide="ignore", invalid="ignore"):
        loss = (x.log() * 0.0).sum()
        with detect_anomaly(), pytest.raises(AnomalyError, match="outside detect_anomaly"):
            loss.backward()


def test_site_is_the_first_frame_outside_minigrad():
    with detect_anomaly():
        layer = mg.nn.Linear(2, 2).to(np.float64)
        out = layer(Tensor(np.ones((1, 2))))  # the-layer-line
    assert out.grad_fn.created_at.endswith(f"test_anomaly.py:{line_of('the-layer-line')}")


def test_finite_backward_under_anomaly_mode_gives_the_same_gradients():
    x1, x2 = leaf([0.5, 2.0]), leaf([0.5, 2.0])
    (x1.log() * x1).sum().backward()
    with detect_anomaly():
        (x2.log() * x2).sum().backward()
    np.testing.assert_array_equal(x1.grad, x2.grad)


def test_off_by_default_and_free_when_off(monkeypatch):
    assert not anomaly.is_enabled()

    def forbidden(*args):
        raise AssertionError("anomaly machinery ran while detect_anomaly() was off")

    monkeypatch.setattr(anomaly, "user_site", forbidden)
    monkeypatch.setattr(anomaly, "check_step", forbidden)
    x = leaf([0.0, 1.0])
    with np.errstate(divide="ignore", invalid="ignore"):
        y = x.log()
        (y * 0.0).sum().backward(retain_graph=True)   # NaN gradients pass silently, as in PyTorch
    assert np.isnan(x.grad[0]) and not hasattr(y.grad_fn, "created_at")


def test_detect_anomaly_nests_and_restores():
    with detect_anomaly():
        with detect_anomaly(False):
            assert not anomaly.is_enabled()
        assert anomaly.is_enabled()
    assert not anomaly.is_enabled()
