"""A small generated language for next-word prediction, written by this project.

Every sentence ends in one word that some idea of attention can predict and the idea before
it cannot. The sentence kinds, each with an example (the scored word in brackets):

    topic    on monday ann went to the bakery and bought a [bun]
             The last word alone cannot decide: every sentence ends in "a", and the shop said
             earlier decides the good (bakery -> bun, florist -> rose, ...).
    colour   i see a lemon , a ruby and a parrot . i point at the yellow [fruit]
             The average cannot decide, even in principle: the answer is the category
             (fruit, gem, bird) of the thing whose colour is the last word, and every colour
             occurs in every category, so no sum of "this word is present" votes works.
             A word pulling the word most like it (yellow pulls lemon) does.
    game     ann plays rock and bob beats it with [paper]
             What the move loses to, around two rings of three (rock, paper, scissors; fire,
             water, grass). A word that votes with its own vector votes for the words like it,
             and "like" is symmetric, so no embedding makes every move vote for its winner:
             what is moved must be a learned map of the word (values).
    swap     the hen and the dog swap voices . now the hen [barks]
             Pull must be asymmetric: the last word must be pulled by the OTHER animal, not
             by itself. A symmetric pull (one shared map for queries and keys) pulls a word
             towards itself at least as much as towards the other for one of the two orders.
    order    ann gave the cup to bob . now the cup is held by [bob]
             The same words in another order ("bob gave the cup to ann") need another
             answer: anything blind to order (the average, attention without positions)
             is right half the time at best.
    blend    ann mixes the colour of lemon , the kind of ruby and the rank of parrot and gets [topaz]
             The thing of the first thing's colour, the second thing's kind and the third
             thing's rank (first, second or third listed of its colour and kind: parrot is the
             first green bird, so the answer is the first yellow gem). The same things in other
             roles need another answer, so each thing must send one part in one role and another
             in the next: one head moves every word with the same W_v and can only weigh the
             three against each other; several heads each take one role and move its part.
    recall   ann is at the lake and bob is at the mill . where is bob [mill]
             The answer is a word stated earlier in the same sentence: which place goes with
             the name asked about. Held-out sentences pair names and places never seen
             together in training, so the facts cannot be memorised into the weights.

Word facts (which shop sells what, the colour of each thing, each animal's voice, which move
beats which) are fixed parts of the language; which names, places, things and animals
appear together is what the seed decides.

Vocabulary
----------
``VOCAB`` lists every word; ids are positions in it. The three specials come first:

    0  <pad>   padding (never predicted, never attended to)
    1  <bos>   start of a sequence
    2  <eos>   end of a sentence

then the words of all kinds, sorted (``len(VOCAB)`` is 194). ``encode(words)`` and
``decode(ids)`` map between words and ids; ``split_words("ann went to")`` checks a typed
prompt and names the first unknown word.

Examples and the split
----------------------
``Language(seed)`` builds every kind's combinations (the content words a sentence is made
of) and splits them **by combination**: a combination is held out if it contains a
held-out pair (a name with a place, a name with a name, two animals, a name with a shop,
three things, two names with a move), and the pairs to hold out are drawn from
the seed. No held-out combination,
and for the pair-based kinds no held-out pair, ever appears in training.

    lang = Language(seed=0)
    examples = lang.sample("train", 64, rng)          # Example objects, kinds mixed evenly
    examples = lang.sample("train", 64, rng, mix=("topic", "recall", "recall"))   # or in a chosen mix
    held_out = lang.evaluation_set(per_kind=200)     # a fixed held-out set, same for a seed

An ``Example`` has ``words`` (the whole sentence, no specials), ``kind``, ``answer_index``
(the index in ``words`` of the scored word), ``combination`` and ``answer``/``context``.

Encoding a batch
----------------
``encode_batch(examples, loss_on="sentence")`` returns a ``Batch`` of numpy arrays:

    inputs    (B, T) int64   <bos> w0 w1 ... w_{n-1}, then <pad>
    targets   (B, T) int64   w0 w1 ... w_{n-1} <eos>, then <pad>   (inputs shifted by one)
    loss_mask (B, T) bool    where the loss is taken: every real target (``loss_on="sentence"``)
                             or only the scored word (``loss_on="answer"``)
    answer_position (B,)     the position t whose prediction targets[t] is the scored word
                             (``inputs[b, t]`` is the word just before it)
    kinds      list of B kind names

So the scored word of example b is ``targets[b, answer_position[b]]``, and a model's
accuracy on a kind is how often its argmax at that position equals it.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

__all__ = ["SPECIALS", "PAD", "BOS", "EOS", "VOCAB", "WORD_TO_ID", "KINDS", "Example", "Batch",
           "Language", "encode", "decode", "split_words", "prompt_ids", "encode_batch", "LanguageError"]

SPECIALS = ("<pad>", "<bos>", "<eos>")
PAD, BOS, EOS = 0, 1, 2

NAMES = ("ann", "bob", "cal", "dan", "eve", "fay", "gus", "hal", "ida", "jon", "kim", "lea",
         "max", "ned", "pam", "roy")
PLACES = ("lake", "mill", "farm", "park", "port", "camp", "beach", "cave", "barn", "dock", "hill", "fort")
THINGS_GIVEN = ("cup", "key", "book", "hat", "coin", "map", "pen", "bag", "lamp", "drum")
SHOP_GOODS = {"bakery": "bun", "florist": "rose", "butcher": "steak", "toyshop": "doll",
              "bookshop": "novel", "chemist": "pill", "grocer": "melon", "fishmonger": "crab",
              "dairy": "cheese", "tailor": "coat", "cobbler": "boot", "jeweller": "ring"}
DAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
COLOURS = ("red", "yellow", "green")
# category -> colour -> three things of that colour (every colour in every category)
THINGS = {
    "fruit": {"red": ("cherry", "strawberry", "raspberry"), "yellow": ("lemon", "banana", "pineapple"),
              "green": ("lime", "pear", "kiwi")},
    "gem": {"red": ("ruby", "garnet", "jasper"), "yellow": ("topaz", "citrine", "amber"),
            "green": ("emerald", "jade", "peridot")},
    "bird": {"red": ("cardinal", "robin", "tanager"), "yellow": ("canary", "goldfinch", "oriole"),
             "green": ("parrot", "parakeet", "lovebird")},
}
VOICES = {"dog": "barks", "cat": "mews", "cow": "moos", "hen": "clucks", "duck": "quacks", "owl": "hoots",
          "sheep": "bleats", "pig": "grunts", "horse": "neighs", "frog": "croaks", "lion": "roars",
          "snake": "hisses", "bee": "buzzes", "mouse": "squeaks", "wolf": "howls", "crow": "caws",
          "donkey": "brays", "goose": "honks", "dove": "coos", "bear": "growls", "elephant": "trumpets",
          "monkey": "chatters", "cricket": "chirps", "turkey": "gobbles", "hyena": "laughs", "rooster": "crows"}
# what each move of a game loses to: two rings of three, so no word's own vector can vote for its winner
LOSES_TO = {"rock": "paper", "paper": "scissors", "scissors": "rock",
            "fire": "water", "water": "grass", "grass": "fire"}

KINDS = ("topic", "colour", "game", "swap", "order", "blend", "recall")
TEMPLATE_WORDS = ("on", "went", "to", "the", "and", "bought", "a", "i", "see", ",", ".", "point", "at",
                  "swap", "voices", "now", "gave", "is", "with", "plays", "beats", "it", "mixes",
                  "colour", "of", "kind", "gets", "held", "by", "where", "rank")


class LanguageError(ValueError):
    """A word outside the vocabulary, an unknown kind or split (one clear line)."""


def _all_words():
    words = set(TEMPLATE_WORDS) | set(NAMES) | set(PLACES) | set(THINGS_GIVEN) | set(COLOURS)
    words |= set(SHOP_GOODS) | set(SHOP_GOODS.values()) | set(DAYS) | set(LOSES_TO) | set(THINGS) | set(VOICES) | set(VOICES.values())
    words |= {thing for by_colour in THINGS.values() for group in by_colour.values() for thing in group}
    return sorted(words)


VOCAB = SPECIALS + tuple(_all_words())
WORD_TO_ID = {word: i for i, word in enumerate(VOCAB)}
assert len(WORD_TO_ID) == len(VOCAB), "a word is listed twice"


@dataclass(frozen=True)
class Example:
    words: tuple            # the sentence, e.g. ("ann", "went", ..., "a", "bun")
    kind: str
    answer_index: int       # words[answer_index] is the scored word
    combination: tuple      # the content words the split is decided on

    @property
    def answer(self) -> str:
        return self.words[self.answer_index]

    @property
    def context(self) -> tuple:
        return self.words[:self.answer_index]

    def text(self) -> str:
        return " ".join(self.words)


@dataclass
class Batch:
    inputs: np.ndarray           # (B, T) <bos> + words, <pad> after
    targets: np.ndarray          # (B, T) words + <eos>, <pad> after
    loss_mask: np.ndarray        # (B, T) bool
    answer_position: np.ndarray  # (B,) the position whose prediction is scored
    kinds: list


# --- the sentence kinds: combination -> words, and which pairs of a combination decide the split ---

def _topic(day, name, shop):
    return ("on", day, name, "went", "to", "the", shop, "and", "bought", "a", SHOP_GOODS[shop])


def _colour_of(thing):
    return next(colour for by_colour in THINGS.values() for colour, group in by_colour.items() if thing in group)


def _category_of(thing):
    return next(category for category, by_colour in THINGS.items()
                for group in by_colour.values() if thing in group)


def _colour(first, second, third, asked):
    things = (first, second, third)
    return ("i", "see", "a", first, ",", "a", second, "and", "a", third, ".",
            "i", "point", "at", "the", _colour_of(things[asked]), _category_of(things[asked]))


def _game(name1, move, name2):
    return (name1, "plays", move, "and", name2, "beats", "it", "with", LOSES_TO[move])


def _rank_of(thing):
    """0, 1 or 2: where ``thing`` is listed among the three things of its colour and category."""
    return next(group.index(thing) for by_colour in THINGS.values() for group in by_colour.values()
                if thing in group)


def _blend(name, coloured, kinded, ranked):
    answer = THINGS[_category_of(kinded)][_colour_of(coloured)][_rank_of(ranked)]
    return (name, "mixes", "the", "colour", "of", coloured, ",", "the", "kind", "of", kinded,
            "and", "the", "rank", "of", ranked, "and", "gets", answer)


BLEND_ROLES = ("colour", "kind", "rank")


def blend_roles_kept(combination, word) -> tuple:
    """For a blend sentence (its ``combination``) and an answer ``word``: whether the word has the
    first thing's colour, the second thing's kind and the third thing's rank (``BLEND_ROLES``);
    the right answer has all three, a word that is no thing none."""
    if not any(word in group for by_colour in THINGS.values() for group in by_colour.values()):
        return (False, False, False)
    _, coloured, kinded, ranked = combination
    return (_colour_of(word) == _colour_of(coloured), _category_of(word) == _category_of(kinded),
            _rank_of(word) == _rank_of(ranked))


def _swap(first, second, asked):
    animal, other = (first, second) if asked == 0 else (second, first)
    return ("the", first, "and", "the", second, "swap", "voices", ".", "now", "the", animal, VOICES[other])


def _order(giver, receiver, thing):
    return (giver, "gave", "the", thing, "to", receiver, ".", "now", "the", thing, "is", "held", "by", receiver)


def _recall(name1, place1, name2, place2, asked):
    name, place = (name1, place1) if asked == 0 else (name2, place2)
    return (name1, "is", "at", "the", place1, "and", name2, "is", "at", "the", place2, ".",
            "where", "is", name, place)


def _combinations(kind):
    """Every combination of a kind and the pairs that decide its split."""
    if kind == "topic":
        for day, name, shop in itertools.product(DAYS, NAMES, SHOP_GOODS):
            yield (day, name, shop), [(name, shop)]
    elif kind == "colour":
        by_category = [[t for group in THINGS[c].values() for t in group] for c in THINGS]
        for things in itertools.product(*by_category):
            if len({_colour_of(t) for t in things}) < 3:
                continue            # one thing of each colour, so the asked colour names one thing
            for order in itertools.permutations(things):
                for asked in range(3):
                    yield order + (asked,), [tuple(sorted(things))]
    elif kind == "game":
        for name1, name2 in itertools.permutations(NAMES, 2):
            for move in LOSES_TO:
                yield (name1, move, name2), [tuple(sorted((name1, name2))) + (move,)]
    elif kind == "blend":
        things = [t for by_colour in THINGS.values() for group in by_colour.values() for t in group]
        count = itertools.count()
        for coloured, kinded in itertools.permutations(things, 2):
            if _colour_of(coloured) == _colour_of(kinded) or _category_of(coloured) == _category_of(kinded):
                continue        # two colours and two categories: the roles decide between answers
            for ranked in things:
                if ranked not in (coloured, kinded):
                    name = NAMES[next(count) % len(NAMES)]      # any name: it only varies the sentence
                    yield (name, coloured, kinded, ranked), [tuple(sorted((coloured, kinded, ranked)))]
    elif kind == "swap":
        for first, second in itertools.permutations(VOICES, 2):
            for asked in range(2):
                yield (first, second, asked), [tuple(sorted((first, second)))]
    elif kind == "order":
        for giver, receiver in itertools.permutations(NAMES, 2):
            for thing in THINGS_GIVEN:
                yield (giver, receiver, thing), [tuple(sorted((giver, receiver)))]
    elif kind == "recall":
        for name1, name2 in itertools.permutations(NAMES, 2):
            for place1, place2 in itertools.permutations(PLACES, 2):
                for asked in range(2):
                    yield (name1, place1, name2, place2, asked), [(name1, place1), (name2, place2)]
    else:
        raise LanguageError(f"unknown sentence kind {kind!r}; the kinds are {', '.join(KINDS)}")


_BUILD = {"topic": _topic, "colour": _colour, "game": _game, "swap": _swap, "order": _order, "blend": _blend,
          "recall": _recall}
_ANSWER_INDEX = {"topic": 10, "colour": 16, "game": 8, "swap": 11, "order": 13, "blend": 18, "recall": 15}


def make_example(kind: str, combination: tuple) -> Example:
    words = _BUILD[kind](*combination)
    return Example(words=words, kind=kind, answer_index=_ANSWER_INDEX[kind], combination=combination)


class Language:
    """All sentences of every kind, split by combination from ``seed``.

    ``held_out_fraction`` of each kind's pairs is held out (at least one pair per kind).
    """

    def __init__(self, seed: int = 0, held_out_fraction: float = 0.2, kinds=KINDS):
        if not 0.0 < held_out_fraction < 1.0:
            raise LanguageError(f"held_out_fraction must be between 0 and 1, got {held_out_fraction}")
        unknown = [kind for kind in kinds if kind not in KINDS]
        if unknown or not kinds:
            raise LanguageError(f"unknown sentence kind {unknown[0] if unknown else None!r}; "
                                f"the kinds are {', '.join(KINDS)}")
        self.seed, self.kinds = seed, tuple(kinds)
        rng = np.random.default_rng(seed)
        self.held_out_pairs = {}
        self._split = {"train": {}, "held-out": {}}
        for kind in self.kinds:
            combos = list(_combinations(kind))
            pairs = sorted({pair for _, decisive in combos for pair in decisive})
            count = max(1, round(held_out_fraction * len(pairs)))
            chosen = rng.choice(len(pairs), size=count, replace=False)
            held = {pairs[i] for i in chosen}
            self.held_out_pairs[kind] = held
            self._split["held-out"][kind] = [c for c, decisive in combos if any(p in held for p in decisive)]
            self._split["train"][kind] = [c for c, decisive in combos if not any(p in held for p in decisive)]

    def combinations(self, split: str, kind: str) -> list:
        if split not in self._split:
            raise LanguageError(f"unknown split {split!r}; use 'train' or 'held-out'")
        if kind not in self.kinds:
            raise LanguageError(f"unknown sentence kind {kind!r}; this language has {', '.join(self.kinds)}")
        return self._split[split][kind]

    def sample(self, split: str, count: int, rng: np.random.Generator, kind: str = None, mix=None) -> list:
        """``count`` examples drawn with replacement, the kinds in turn (or only ``kind``).

        ``mix`` is a sequence of kinds to take in turn instead, e.g. ``("topic", "recall",
        "recall")`` for two recall sentences per topic sentence.
        """
        kinds = [kind] if kind is not None else list(mix) if mix else self.kinds
        examples = []
        for i in range(count):
            kind_i = kinds[i % len(kinds)]
            combos = self.combinations(split, kind_i)
            examples.append(make_example(kind_i, combos[rng.integers(len(combos))]))
        return examples

    def evaluation_set(self, per_kind: int = 200, split: str = "held-out") -> list:
        """A fixed set: ``per_kind`` examples of each kind (all of them if fewer), same for a seed."""
        rng = np.random.default_rng([self.seed, 1])
        examples = []
        for kind in self.kinds:
            combos = self.combinations(split, kind)
            picked = rng.permutation(len(combos))[:per_kind]
            examples += [make_example(kind, combos[i]) for i in sorted(picked)]
        return examples


def encode(words) -> list:
    """Words -> ids (no specials added)."""
    ids = []
    for word in words:
        if word not in WORD_TO_ID:
            raise LanguageError(f"{word!r} is not a word of the language ({len(VOCAB)} words; "
                                "names like ann, bob; places like lake, mill; see transformer.tasks.language.VOCAB)")
        ids.append(WORD_TO_ID[word])
    return ids


def decode(ids, keep_specials: bool = False) -> list:
    """Ids -> words; <pad>/<bos>/<eos> dropped unless ``keep_specials``."""
    ids = [int(i) for i in np.asarray(ids).ravel()]
    bad = [i for i in ids if not 0 <= i < len(VOCAB)]
    if bad:
        raise LanguageError(f"id {bad[0]} is outside the vocabulary 0..{len(VOCAB) - 1}")
    return [VOCAB[i] for i in ids if keep_specials or i >= len(SPECIALS)]


def split_words(text: str) -> list:
    """A typed prompt -> its words, checked against the vocabulary (lower-cased, ',' and '.' split off)."""
    words = text.lower().replace(",", " , ").replace(".", " . ").split()
    prompt_ids(words)
    return words


def prompt_ids(words) -> list:
    """A prompt's words -> ids, as ``encode``; the markers ``<pad>``, ``<bos>``, ``<eos>`` are
    refused: they are the model's, never words of a sentence."""
    for word in words:
        if word in SPECIALS:
            raise LanguageError(f"{word!r} is a marker the model uses around sentences, not a word a prompt "
                                "may hold (the prompt is the start of a sentence, e.g. 'ann went to the bakery')")
    return encode(words)


def encode_batch(examples, loss_on: str = "sentence", length: int = None) -> Batch:
    """Examples -> a ``Batch`` (see the module docstring). ``length`` pads to a fixed T."""
    if loss_on not in ("sentence", "answer"):
        raise LanguageError(f"loss_on must be 'sentence' or 'answer', got {loss_on!r}")
    if not examples:
        raise LanguageError("encode_batch needs at least one example")
    longest = max(len(e.words) for e in examples) + 1
    length = longest if length is None else length
    if length < longest:
        raise LanguageError(f"length {length} is too short: the longest sentence needs {longest} "
                            "positions (its words + <bos>)")
    batch = len(examples)
    inputs = np.full((batch, length), PAD, dtype=np.int64)
    targets = np.full((batch, length), PAD, dtype=np.int64)
    loss_mask = np.zeros((batch, length), dtype=bool)
    answer_position = np.empty(batch, dtype=np.int64)
    for b, example in enumerate(examples):
        ids = encode(example.words)
        n = len(ids)
        inputs[b, :n + 1] = [BOS] + ids
        targets[b, :n + 1] = ids + [EOS]
        answer_position[b] = example.answer_index
        if loss_on == "sentence":
            loss_mask[b, :n + 1] = True
        else:
            loss_mask[b, example.answer_index] = True
    return Batch(inputs, targets, loss_mask, answer_position, [e.kind for e in examples])
