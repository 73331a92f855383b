"""The generated language: deterministic from its seed, split by combination, and each kind
has the property it is there for."""
from collections import Counter, defaultdict

import numpy as np
import pytest

from transformer.tasks import language
from transformer.tasks.language import (THINGS, BOS, EOS, KINDS, LOSES_TO, PAD, VOCAB, VOICES, Language, LanguageError, decode,
                                  encode, encode_batch, make_example, split_words)


@pytest.fixture(scope="module")
def lang():
    return Language(seed=0)


def all_examples(lang, split, kind):
    return [make_example(kind, c) for c in lang.combinations(split, kind)]


def test_vocabulary_is_small_and_specials_come_first():
    assert VOCAB[:3] == ("<pad>", "<bos>", "<eos>") and (PAD, BOS, EOS) == (0, 1, 2)
    assert len(VOCAB) <= 300 and len(set(VOCAB)) == len(VOCAB)


def test_same_seed_same_language_other_seed_other_split():
    a, b, c = Language(seed=5), Language(seed=5), Language(seed=6)
    assert a.held_out_pairs == b.held_out_pairs
    assert a.held_out_pairs != c.held_out_pairs
    assert a.evaluation_set(20) == b.evaluation_set(20)
    assert a.sample("train", 50, np.random.default_rng(1)) == b.sample("train", 50, np.random.default_rng(1))


def test_every_kind_appears_in_both_splits_and_samples_mix_kinds(lang):
    for kind in KINDS:
        assert lang.combinations("train", kind) and lang.combinations("held-out", kind)
    kinds = Counter(e.kind for e in lang.sample("train", 50, np.random.default_rng(0)))
    assert set(kinds) == set(KINDS) and max(kinds.values()) - min(kinds.values()) <= 1


@pytest.mark.parametrize("kind", KINDS)
def test_split_is_by_combination(lang, kind):
    train, held = lang.combinations("train", kind), lang.combinations("held-out", kind)
    assert not set(train) & set(held)
    held_pairs = lang.held_out_pairs[kind]
    if kind == "recall":         # a fact is a name with its place: (name1, place1), (name2, place2)
        train_groups = [{(c[0], c[1]), (c[2], c[3])} for c in train]
        assert not any(held_pairs & facts for facts in train_groups)
        return
    if kind == "game":           # a held-out game is two names with the move played (in either order)
        assert not {tuple(sorted((c[0], c[2]))) + (c[1],) for c in train} & held_pairs
        return
    if kind == "blend":          # three things in their roles (the answer, another thing, may be one of them)
        assert not {tuple(sorted(c[1:])) for c in train} & held_pairs
        return
    train_words = [set(make_example(kind, c).words) for c in train]
    for pair in held_pairs:      # a held-out pair (or triple) never occurs together in a training sentence
        assert not any(set(pair) <= words for words in train_words), pair


def test_recall_asks_about_a_name_and_place_never_together_in_training(lang):
    train_facts = {(c[0], c[1]) for c in lang.combinations("train", "recall")}
    train_facts |= {(c[2], c[3]) for c in lang.combinations("train", "recall")}
    asked = [(e.words[-2], e.answer) for e in all_examples(lang, "held-out", "recall")]
    unseen = [fact for fact in asked if fact not in train_facts]
    assert len(unseen) > len(asked) / 2      # most held-out questions are about a new pairing
    for example in all_examples(lang, "train", "recall")[:500]:
        assert example.answer in example.context[:-3]     # the answer was stated earlier


def contexts_to_answers(examples, key):
    answers = defaultdict(set)
    for e in examples:
        answers[key(e)].add(e.answer)
    return answers


def test_topic_the_last_word_alone_cannot_decide(lang):
    examples = all_examples(lang, "train", "topic")
    by_last_word = contexts_to_answers(examples, key=lambda e: e.context[-1])
    assert len(by_last_word) == 1 and len(next(iter(by_last_word.values()))) >= 8
    by_bag = contexts_to_answers(examples, key=lambda e: frozenset(e.context))
    assert all(len(a) == 1 for a in by_bag.values())      # while the words (in any order) decide


@pytest.mark.parametrize("kind", ["order", "recall"])
def test_the_same_words_in_another_order_need_another_answer(lang, kind):
    examples = all_examples(lang, "train", kind)
    by_bag = contexts_to_answers(examples, key=lambda e: tuple(sorted(Counter(e.context).items())))
    assert sum(len(a) > 1 for a in by_bag.values()) > len(by_bag) / 4
    by_sequence = contexts_to_answers(examples, key=lambda e: e.context)
    assert all(len(a) == 1 for a in by_sequence.values())


def test_colour_no_sum_of_word_votes_can_decide(lang):
    """Two bags of things, two colours asked: bag 1 answers X for colour c and Y for c', bag 2
    the other way round. A score that adds one vote per word present (what a linear readout of
    the average computes) would need c's vote to favour X over Y and, in bag 2, Y over X."""
    examples = all_examples(lang, "train", "colour")
    answer = {}
    for e in examples:
        answer[(frozenset(e.context[:-1]), e.context[-1])] = e.answer
    bags = defaultdict(dict)
    for (bag, colour), category in answer.items():
        bags[bag][colour] = category
    found = False
    for bag1, asked1 in bags.items():
        for bag2, asked2 in bags.items():
            for c1, c2 in [("red", "yellow"), ("yellow", "green"), ("red", "green")]:
                if asked1[c1] == asked2[c2] and asked1[c2] == asked2[c1] and asked1[c1] != asked1[c2]:
                    found = True
                    break
            if found:
                break
        if found:
            break
    assert found
    by_bag = contexts_to_answers(examples, key=lambda e: frozenset(e.context))
    assert all(len(a) == 1 for a in by_bag.values())     # the words present do decide, given the cue


def test_swap_the_answer_belongs_to_the_other_animal(lang):
    for e in all_examples(lang, "train", "swap"):
        asked = e.context[-1]
        counts = Counter(e.context)
        other = next(w for w in (e.words[1], e.words[4]) if w != asked)
        assert counts[asked] == 2 and counts[other] == 1
        assert e.answer == VOICES[other] != VOICES[asked]
    by_last_word = contexts_to_answers(all_examples(lang, "train", "swap"), key=lambda e: e.context[-1])
    assert all(len(a) > 1 for a in by_last_word.values())


def test_encode_batch_shifts_targets_and_marks_the_answer(lang):
    examples = lang.sample("train", 10, np.random.default_rng(2))
    batch = encode_batch(examples)
    for b, e in enumerate(examples):
        n = len(e.words)
        assert batch.inputs[b, 0] == BOS and batch.targets[b, n] == EOS
        assert decode(batch.inputs[b]) == list(e.words)
        np.testing.assert_array_equal(batch.inputs[b, 1:n + 1], batch.targets[b, :n])
        assert batch.targets[b, batch.answer_position[b]] == VOCAB.index(e.answer)
        assert batch.loss_mask[b].sum() == n + 1 and not batch.loss_mask[b, n + 1:].any()
    answer_only = encode_batch(examples, loss_on="answer", length=24)
    assert answer_only.inputs.shape == (10, 24)
    assert (answer_only.loss_mask.sum(axis=1) == 1).all()
    assert answer_only.loss_mask[np.arange(10), answer_only.answer_position].all()


def test_bad_input_is_one_clear_line():
    with pytest.raises(LanguageError, match="'zebra' is not a word"):
        split_words("ann went to the zebra")
    with pytest.raises(LanguageError, match="unknown sentence kind"):
        Language(kinds=("topic", "poems"))
    with pytest.raises(LanguageError, match="too short"):
        encode_batch([make_example("topic", ("monday", "ann", "bakery"))], length=4)
    with pytest.raises(LanguageError, match="outside the vocabulary"):
        decode([len(VOCAB)])
    assert split_words("Ann went to the bakery, and") == ["ann", "went", "to", "the", "bakery", ",", "and"]
    assert encode(["ann"]) == [VOCAB.index("ann")]


@pytest.mark.parametrize("seed", range(5))
def test_every_kind_has_at_least_200_held_out_sentences(seed):
    language = Language(seed)
    for kind in KINDS:
        assert len(language.combinations("held-out", kind)) >= 200, (seed, kind)
    assert len(language.evaluation_set(per_kind=200)) == 200 * len(KINDS)


def test_game_every_move_loses_to_another_around_rings_of_three(lang):
    """What a move loses to is never the move and never what it beats: no symmetric "like" can
    vote for it (x_a . x_b = x_b . x_a would make rock vote for scissors as much as for paper)."""
    for move, winner in LOSES_TO.items():
        assert winner != move and LOSES_TO[winner] != move and LOSES_TO[LOSES_TO[winner]] == move
    examples = all_examples(lang, "train", "game")
    assert all(e.answer == LOSES_TO[e.context[2]] for e in examples)


def test_blend_takes_one_part_from_each_role_and_other_roles_give_other_answers(lang):
    """The colour comes from the first thing, the kind from the second, the rank from the third:
    the same three things in other roles give other answers, so a model that moves each thing the
    same way whatever its role has to tell the roles apart some other way."""
    examples = all_examples(lang, "train", "blend")
    for e in examples:
        coloured, kinded, ranked = e.context[5], e.context[10], e.context[15]
        answer = THINGS[language._category_of(kinded)][language._colour_of(coloured)][language._rank_of(ranked)]
        assert e.answer == answer and e.context[3:5] == ("colour", "of") and e.context[12:15] == ("the", "rank", "of")
    by_things = contexts_to_answers(examples, key=lambda e: frozenset((e.context[5], e.context[10], e.context[15])))
    several_orders = [a for a in by_things.values() if len(a) > 1]
    assert len(several_orders) > 100
    by_sequence = contexts_to_answers(examples, key=lambda e: e.context)
    assert all(len(a) == 1 for a in by_sequence.values())


def test_blend_roles_kept_names_what_an_answer_shares_with_each_role(lang):
    """The right answer keeps all three roles; the answer of the same things in rotated roles keeps
    the roles where a rotated thing agrees; a word that is no thing keeps none."""
    for e in all_examples(lang, "held-out", "blend")[:50]:
        assert language.blend_roles_kept(e.combination, e.answer) == (True, True, True)
        name, coloured, kinded, ranked = e.combination
        rotated = THINGS[language._category_of(coloured)][language._colour_of(ranked)][language._rank_of(kinded)]
        kept = language.blend_roles_kept(e.combination, rotated)
        assert kept == (language._colour_of(ranked) == language._colour_of(coloured),
                        language._category_of(coloured) == language._category_of(kinded),
                        language._rank_of(kinded) == language._rank_of(ranked))
        assert language.blend_roles_kept(e.combination, "ann") == (False, False, False)
