"""BatchSampler draws the batches ``encode_batch(language.sample(...))`` draws, bit for bit, and
leaves the generator where ``Language.sample`` leaves it (the ladder's record depends on it)."""
import numpy as np
import pytest

from transformer.tasks.batch_sampler import BatchSampler
from transformer.tasks.language import KINDS, Language, encode_batch


def same_batch(a, b):
    assert a.kinds == b.kinds
    for field in ("inputs", "targets", "loss_mask", "answer_position"):
        x, y = getattr(a, field), getattr(b, field)
        assert x.dtype == y.dtype and x.shape == y.shape and np.array_equal(x, y), field


@pytest.mark.parametrize("seed", [0, 3, 12])
@pytest.mark.parametrize("options", [
    dict(mix=KINDS + ("recall", "recall"), loss_on="answer", length=20),     # the ladder's batches
    dict(loss_on="sentence", length=None),                                   # padded to each batch's longest
    dict(kind="recall", loss_on="answer", length=None),
    dict(mix=("topic", "blend"), loss_on="sentence", length=24),
])
def test_batches_are_encode_batch_of_sample(seed, options):
    kinds = KINDS if seed != 3 else ("topic", "colour", "recall")
    if options.get("kind") not in (None, *kinds) or any(k not in kinds for k in options.get("mix") or ()):
        kinds = KINDS
    language = Language(seed=seed, kinds=kinds)
    sampler = BatchSampler(language, "train", kind=options.get("kind"), mix=options.get("mix"),
                           loss_on=options["loss_on"], length=options["length"])
    ours, theirs = np.random.default_rng([seed, 2]), np.random.default_rng([seed, 2])
    for count in (64, 1, 7, 64, 33):
        examples = language.sample("train", count, theirs, kind=options.get("kind"), mix=options.get("mix"))
        same_batch(sampler.sample(count, ours), encode_batch(examples, options["loss_on"], options["length"]))
    assert ours.bit_generator.state == theirs.bit_generator.state      # the next draws agree too


def test_held_out_split_and_a_fresh_batch_each_call():
    language = Language(seed=1)
    sampler = BatchSampler(language, "held-out", loss_on="answer", length=20)
    rng = np.random.default_rng(0)
    first, second = sampler.sample(16, rng), sampler.sample(16, rng)
    assert not np.array_equal(first.inputs, second.inputs)
    first.inputs[:] = 0                          # a batch is the caller's to change: the table is not
    theirs = np.random.default_rng(0)
    same_batch(sampler.sample(16, np.random.default_rng(0)), encode_batch(language.sample("held-out", 16, theirs),
                                                                          "answer", 20))
