"""gradcheck never passes a NaN or infinite gradient: ``error > tolerance`` is
False for NaN, so the check must ask ``not error <= tolerance``."""
import numpy as np
import pytest

from minigrad import GradcheckError, Tensor, gradcheck
from minigrad.function import Function

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")   # the NaNs and log(0) are the point


class _NaNBackward(Function):
    """x * 2 whose backward multiplies by NaN: the analytic gradient is NaN."""

    def forward(self, a):
        return a * 2

    def backward(self, grad):
        return grad * np.nan


class _FiniteBackwardOfNaNForward(Function):
    """Forward NaN at the second element (so the numeric gradient there is NaN), backward finite."""

    def forward(self, a):
        out = a * 2
        out[1] = np.nan
        return out

    def backward(self, grad):
        return grad * 2


def leaf(values):
    return Tensor(np.array(values, dtype=np.float64), requires_grad=True)


def test_a_nan_analytic_gradient_fails_naming_input_element_and_both_values():
    with pytest.raises(GradcheckError, match=r"input 0 .* element \(0,\).*numerical 2 vs analytical nan"
                                             r".*NaN or infinite gradient never passes"):
        gradcheck(lambda x: _NaNBackward.apply(x), [leaf([1.0, 2.0])])


def test_a_nan_numeric_gradient_fails_where_the_analytic_one_is_finite():
    # output element 1 is NaN whatever x[0] is: its numeric derivative is NaN, the analytic one 0
    with pytest.raises(GradcheckError, match=r"element \(0,\), output element \(1,\): numerical nan vs "
                                             r"analytical 0"):
        gradcheck(lambda x: _FiniteBackwardOfNaNForward.apply(x), [leaf([1.0, 2.0])])


def test_log_at_zero_fails():
    # the analytic gradient at x = 0 is g / 0: NaN for g = 0 (output 0), inf for g = 1 (output 1)
    with pytest.raises(GradcheckError, match=r"input 0 \(shape \(2,\)\) at element \(1,\), output element "
                                             r"\(0,\): numerical 0 vs analytical nan"):
        gradcheck(lambda x: x.log(), [leaf([1.0, 0.0])])


def test_raise_exception_false_returns_false_for_nan():
    assert gradcheck(lambda x: _NaNBackward.apply(x), [leaf([1.0])], raise_exception=False) is False


def test_finite_gradients_still_pass():
    assert gradcheck(lambda x: (x * x).log(), [leaf([1.0, -2.0])])


def test_second_derivatives_and_tangents_never_pass_a_nan_or_infinity_either():
    """log at 0: the second derivative -1/x² and the tangent t/x are infinite, and the central
    differences NaN; ``error > tolerance`` would have passed them."""
    from minigrad import gradgradcheck, jvpcheck
    at_zero = leaf([0.0, 1.0])
    with pytest.raises(GradcheckError, match="gradgradcheck failed.*NaN or infinite gradient never passes"):
        gradgradcheck(lambda x: x.log().sum(), [at_zero])
    with pytest.raises(GradcheckError, match="jvpcheck failed.*NaN or infinite gradient never passes"):
        jvpcheck(lambda x: x.log(), [at_zero])
    assert gradgradcheck(lambda x: x.log().sum(), [leaf([0.5, 1.0])])      # finite: still passes
    assert jvpcheck(lambda x: x.log(), [leaf([0.5, 1.0])])
