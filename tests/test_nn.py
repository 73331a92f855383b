"""Modules and layers.

Module: dotted parameter names and their order (nested modules, ModuleList,
tied weights), counts, train()/eval() propagation, zero_grad, state_dict
round trips, to(np.float64). Linear/LayerNorm/Embedding/Dropout forward values
against numpy formulas, Linear's PyTorch init bounds, Dropout statistics and
edge cases, gradcheck of every layer in float64 (its own parameters perturbed).
"""
import math

import numpy as np

import minigrad as mg
from minigrad import Tensor, gradcheck, nn
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
