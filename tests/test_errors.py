"""Error messages: every bad call says what went wrong in the user's terms.

Shape mismatches (add, mul, matmul, concatenate, reshape, masked_fill, Linear,
layer_norm, cross_entropy) must name BOTH shapes; out-of-range axes say so;
bad exponents, float index arrays, integer tensors requiring grad, bad
cross_entropy targets, out-of-range Embedding ids, and load_state_dict
problems each get a specific message naming the culprit.
"""
import re

import numpy as np
import pytest

import minigrad as mg
from minigrad import Tensor, nn
from minigrad import functional as F


def t(*shape):
    return Tensor(np.ones(shape))


def raises_naming(error, *fragments):
    """Context manager: ``error`` whose message contains every fragment literally."""
    return pytest.raises(error, match="(?s)" + "".join(f"(?=.*{re.escape(f)})" for f in fragments))


# ------------------------------------------------------------ shape mismatch
@pytest.mark.parametrize("op", [lambda a, b: a + b, lambda a, b: a * b, lambda a, b: a - b,
                                lambda a, b: a / b, lambda a, b: mg.where(np.ones((2, 3), bool), a, b)],
                         ids=["add", "mul", "sub", "div", "where"])
def test_elementwise_shape_mismatch_names_both_shapes(op):
    with raises_naming(ValueError, "(2, 3)", "(4,)", "broadcast"):
        op(t(2, 3), t(4))


@pytest.mark.parametrize("left, right", [((2, 3), (4, 5)), ((2, 2, 3), (2, 4, 5))], ids=str)
def test_matmul_inner_mismatch_names_both_shapes(left, right):
    with raises_naming(ValueError, str(left), str(right)):
        t(*left) @ t(*right)


def test_matmul_vector_mismatch_names_the_users_shapes():
    with raises_naming(ValueError, "(3,)", "(4, 5)"):
        t(3) @ t(4, 5)


def test_matmul_batch_mismatch_names_both_shapes():
    with raises_naming(ValueError, "(2, 3, 4)", "(3, 4, 5)"):
        t(2, 3, 4) @ t(3, 4, 5)


def test_matmul_of_a_scalar_is_refused():
    with raises_naming(ValueError, "1-D", "()"):
        t() @ t(3, 3)


def test_concatenate_mismatch_names_both_shapes():
    with raises_naming(ValueError, "(2, 3)", "(2, 4)"):
        mg.concatenate([t(2, 3), t(2, 4)], axis=0)


def test_stack_mismatch_names_both_shapes():
    with raises_naming(ValueError, "(2, 3)", "(3, 2)"):
        mg.stack([t(2, 3), t(3, 2)])


def test_reshape_mismatch_names_both_shapes():
    with raises_naming(ValueError, "(2, 3)", "(4, 2)"):
        t(2, 3).reshape(4, 2)


def test_masked_fill_mask_that_cannot_broadcast_names_both_shapes():
    with raises_naming(ValueError, "(2,)", "(3,)"):
        t(3).masked_fill(np.ones(2, bool), 0.0)


def test_masked_fill_mask_that_would_enlarge_names_both_shapes():
    with raises_naming(ValueError, "(3, 4)", "(4,)"):
        t(4).masked_fill(np.ones((3, 4), bool), 0.0)


def test_masked_fill_non_boolean_mask():
    with raises_naming(TypeError, "boolean", "float64"):
        t(3).masked_fill(np.ones(3), 0.0)


def test_linear_mismatch_names_input_and_weight_shapes():
    layer = nn.Linear(3, 4)
    with raises_naming(ValueError, "(2, 5)", "(3, 4)"):
        layer(t(2, 5))


def test_layer_norm_module_mismatch_names_input_shape_and_size():
    with raises_naming(ValueError, "(2, 3)", "LayerNorm(4)"):
        nn.LayerNorm(4)(t(2, 3))


def test_layer_norm_functional_mismatch_names_all_shapes():
    with raises_naming(ValueError, "(2, 3)", "(3,)", "(4,)"):
        F.layer_norm(t(2, 3), t(4), t(4))


def test_cross_entropy_target_shape_mismatch_names_both_shapes():
    with raises_naming(ValueError, "(4, 3)", "(5,)"):
        F.cross_entropy(t(4, 3), np.zeros(5, np.int64))


def test_backward_gradient_shape_mismatch_names_both_shapes():
    x = Tensor(np.ones(3), requires_grad=True)
    with raises_naming(ValueError, "(2,)", "(3,)"):
        (x * 2).backward(np.ones(2))


# --------------------------------------------------------------------- axes
@pytest.mark.parametrize("call", [lambda x: x.sum(axis=3), lambda x: x.mean(axis=-4), lambda x: x.max(axis=(0, 5)),
                                  lambda x: x.softmax(axis=3), lambda x: x.log_softmax(axis=-4),
                                  lambda x: x.swapaxes(0, 3), lambda x: mg.concatenate([x, x], axis=3),
                                  lambda x: mg.stack([x, x], axis=5)],
                         ids=["sum", "mean", "max", "softmax", "log_softmax", "swapaxes", "concatenate", "stack"])
def test_axis_out_of_range_says_so(call):
    with raises_naming(ValueError, "out of range"):
        call(t(2, 3, 4))


def test_repeated_axis_is_refused():
    with raises_naming(ValueError, "twice"):
        t(2, 3).sum(axis=(1, -1))


def test_transpose_with_a_non_permutation():
    with raises_naming(ValueError, "permutation", "(2, 3, 4)"):
        t(2, 3, 4).transpose(0, 0, 1)


def test_max_of_an_empty_tensor():
    with raises_naming(ValueError, "empty"):
        Tensor(np.ones((0, 3))).max()


# -------------------------------------------------------------- pow/index
@pytest.mark.parametrize("exponent", [Tensor(np.array([1.0, 2.0])), np.array([2.0, 3.0]), [2, 3]],
                         ids=["tensor", "array", "list"])
def test_non_scalar_exponent(exponent):
    with raises_naming(TypeError, "single number", "(2,)"):
        t(2) ** exponent


def test_exponent_requiring_grad_is_refused():
    with raises_naming(TypeError, "constant"):
        t(2) ** Tensor(2.0, requires_grad=True)


def test_string_exponent_is_refused():
    with raises_naming(TypeError, "single number"):
        t(2) ** "2"


@pytest.mark.parametrize("index", [np.array([0.0, 1.0]), Tensor([0.0, 1.0]), [0.5, 1.0]],
                         ids=["ndarray", "tensor", "list"])
def test_float_index_arrays_are_refused(index):
    with raises_naming(IndexError, "integers", "float"):
        t(3, 2)[index]


def test_index_out_of_bounds_names_the_shape():
    with raises_naming(IndexError, "(3, 2)"):
        t(3, 2)[np.array([0, 7])]


def test_integer_tensor_cannot_require_grad():
    with raises_naming(TypeError, "floating-point", "int64"):
        Tensor(np.arange(3), requires_grad=True)


def test_softmax_of_integers_is_refused():
    with raises_naming(TypeError, "floating-point"):
        Tensor([1, 2, 3]).softmax()


# ----------------------------------------------------------- cross_entropy
def test_cross_entropy_target_out_of_range():
    with raises_naming(IndexError, "target 5", "3 classes"):
        F.cross_entropy(t(2, 3), np.array([0, 5]))


def test_cross_entropy_negative_target_out_of_range():
    with raises_naming(IndexError, "target -1"):
        F.cross_entropy(t(2, 3), np.array([-1, 0]))


def test_cross_entropy_ignore_index_is_not_out_of_range():
    loss = F.cross_entropy(t(2, 3), np.array([-100, 1]), ignore_index=-100)
    np.testing.assert_allclose(loss.item(), np.log(3))


@pytest.mark.parametrize("targets", [np.array([0.0, 1.0]), Tensor([0.0, 1.0])], ids=["ndarray", "tensor"])
def test_cross_entropy_float_targets_are_refused(targets):
    with raises_naming(TypeError, "integer", "float"):
        F.cross_entropy(t(2, 3), targets)


def test_cross_entropy_label_smoothing_out_of_range():
    with raises_naming(ValueError, "label_smoothing", "1.5"):
        F.cross_entropy(t(2, 3), np.array([0, 1]), label_smoothing=1.5)


# ----------------------------------------------------------------- modules
def test_embedding_id_out_of_range():
    with raises_naming(IndexError, "id 7", "0..4"):
        nn.Embedding(5, 2)(np.array([[1, 7]]))


def test_embedding_negative_id():
    with raises_naming(IndexError, "id -1"):
        nn.Embedding(5, 2)(np.array([-1, 0]))


def test_embedding_float_ids():
    with raises_naming(TypeError, "integer", "float"):
        nn.Embedding(5, 2)(np.array([1.0]))


@pytest.mark.parametrize("p", [-0.1, 1.5])
def test_dropout_p_out_of_range(p):
    with raises_naming(ValueError, str(p)):
        nn.Dropout(p)
    with raises_naming(ValueError, str(p)):
        F.dropout(t(3), p)


class TwoLayers(nn.Module):
    def __init__(self):
        self.first = nn.Linear(2, 3)
        self.second = nn.Linear(3, 1)


def test_load_state_dict_missing_names_the_parameter():
    state = TwoLayers().state_dict()
    del state["second.bias"]
    with raises_naming(KeyError, "missing", "second.bias"):
        TwoLayers().load_state_dict(state)


def test_load_state_dict_unexpected_names_the_parameter():
    state = TwoLayers().state_dict()
    state["third.weight"] = np.zeros(2)
    with raises_naming(KeyError, "unexpected", "third.weight"):
        TwoLayers().load_state_dict(state)


def test_load_state_dict_wrong_shape_names_the_parameter_and_shapes():
    state = TwoLayers().state_dict()
    state["first.weight"] = np.zeros((3, 2))
    model = TwoLayers()
    before = model.first.weight.numpy().copy()
    with raises_naming(ValueError, "first.weight", "(2, 3)", "(3, 2)"):
        model.load_state_dict(state)
    np.testing.assert_array_equal(model.first.weight.numpy(), before)   # nothing half-loaded


def test_load_state_dict_non_strict_skips_missing():
    source, target = TwoLayers(), TwoLayers()
    state = source.state_dict()
    del state["second.bias"]
    bias_before = target.second.bias.numpy().copy()
    target.load_state_dict(state, strict=False)
    np.testing.assert_array_equal(target.first.weight.numpy(), source.first.weight.numpy())
    np.testing.assert_array_equal(target.second.bias.numpy(), bias_before)


def test_optimizer_rejects_an_empty_parameter_list_and_negative_lr():
    with raises_naming(ValueError, "empty"):
        mg.optim.SGD([], lr=0.1)
    with raises_naming(ValueError, "-1"):
        mg.optim.Adam(TwoLayers().parameters(), lr=-1)


def test_optimizer_state_from_another_model_names_the_shapes():
    small = mg.optim.SGD(nn.Linear(2, 3).parameters(), lr=0.1, momentum=0.9)
    state = {"lr": 0.1, "step_count": 1, "velocity.0": np.zeros((5, 5))}
    with raises_naming(ValueError, "velocity.0", "(5, 5)", "(2, 3)"):
        small.load_state_dict(state)
