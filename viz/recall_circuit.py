"""The recall circuit, measured from a next-word run's attention snapshots.

A recall sentence states two facts and asks one: *gus is at the lake and hal is at the farm .
where is hal* -> farm. With two layers of causal attention the answer can only be read at the
last word (the name asked) from a position that already knows which name goes with it, and the
one that can is the place itself, once layer 0 has copied the name stated before it into it.
So the circuit has two parts, measured on the snapshots' two recall rows (the same facts, each
name asked once), every head at every recorded step:

- the **binder**: layer 0 making each place read its own name. Each place is measured on its
  own, across the heads: its binding at a step is the largest weight any layer-0 head gives from
  the place to the name stated just before it, and it is *bound* once that reaches ``BOUND``.
  Runs differ in how they split this: one head may bind both places, or each place have a head
  of its own, or a place be read by two heads together, and either place may bind first. The
  binder's heads are every layer-0 head that binds a place at the last step (the strongest of
  each place when none does yet), and the binder has formed once every place stays bound.
- the **reader**: the layer-1 head that best reads, from the last word, the place of the name
  asked (its weight there; the smaller of the two orders counts), chosen at the last step; it
  has formed once it keeps reading the right place most in both orders.

A part's step is the first recorded step from which its condition holds to the last one (it has
formed for good), so none depends on which heads a seed uses; then the step where held-out recall
(the snapshots' own score, 40 sentences) first reaches 95%.
Before the reader forms it typically reads one fixed place whichever name is asked: the shortcut,
right on half of the sentences.
"""
from dataclasses import dataclass

import numpy as np

from transformer.tasks.language import NAMES, PLACES
from transformer.training.snapshots import load_snapshots

BOUND = 0.5            # a place holds its name once a head puts at least this weight on it
RECALLED = 0.95        # held-out recall accuracy that counts as learned
EPS = 1e-6             # the file's float32 holds 38/40 as 0.94999999: that is 95%


@dataclass
class RecallRow:
    """One recall probe row, as token positions (``<bos>`` is position 0)."""
    words: list           # the row's tokens up to the answer, ``<bos>`` first
    places: list          # positions of the two places stated
    names: list           # position of the name stated just before each place
    last: int             # the last word's position (the name asked), whose output predicts the answer
    answer: int           # position of the asked name's place among ``places``


@dataclass
class RecallCircuit:
    """The circuit's heads and when each part formed; steps are None where it never happened."""
    steps: np.ndarray           # (S,) the recorded steps
    recall: np.ndarray          # (S,) held-out recall accuracy
    place_names: tuple          # the two places, in the order stated, e.g. ("lake", "farm")
    head_binding: np.ndarray    # (S, places, heads) each layer-0 head's weight from each place to its own name
    binder_heads: tuple         # the layer-0 heads that bind a place at the last step
    reader_head: int            # in layer 1
    reading: np.ndarray         # (S,) its weight from the last word on the asked place, the smaller order's
    reads: list                 # per step, the word it reads most in each order, e.g. ("farm", "farm")
    right_places: tuple         # the right answer in each order, e.g. ("farm", "lake")
    probe_rows: list            # the snapshots' probe rows of the two orders
    rows: list                  # and their positions (``RecallRow``), in the same order

    @property
    def place_binding(self) -> np.ndarray:
        """(S, places): each place's binding, the largest weight any layer-0 head gives it on its own name."""
        return self.head_binding.max(axis=2)

    @property
    def binding(self) -> np.ndarray:
        """(S,) the binder's curve: the less bound place's binding (whichever heads bind each)."""
        return self.place_binding.min(axis=1)

    @property
    def binder_head(self) -> int:
        """The binder's strongest head at the last step (of the less bound place)."""
        weaker = int(self.place_binding[-1].argmin())
        return int(self.head_binding[-1, weaker].argmax())

    @property
    def place_steps(self) -> tuple:
        """The step from which each place stays bound, in the order stated: either may come first."""
        return tuple(_for_good(self.steps, column >= BOUND) for column in self.place_binding.T)

    @property
    def recall_step(self):
        return _first(self.steps, self.recall >= RECALLED - EPS)

    @property
    def binder_step(self):
        return _for_good(self.steps, self.binding >= BOUND)

    @property
    def reader_step(self):
        return _for_good(self.steps, [tuple(r) == self.right_places for r in self.reads])

    @property
    def shortcut(self) -> np.ndarray:
        """(S,) bool: the steps before ``reader_step`` at which the reader reads one and the same
        place whichever name is asked (the "first place" or "second place" rule)."""
        before = self.steps < (self.reader_step if self.reader_step is not None else np.inf)
        return before & np.array([r[0] == r[1] and r[0] in PLACES for r in self.reads])

    def shortcut_shown(self) -> tuple:
        """(index of the last shortcut step, the probe row it gets wrong): the moment just before
        the circuit, on the order where the shortcut shows. None when there was no shortcut."""
        if not self.shortcut.any():
            return None
        index = int(np.flatnonzero(self.shortcut)[-1])
        order = next(o for o, right in enumerate(self.right_places) if right != self.reads[index][o])
        return index, self.probe_rows[order]

    def opening_row(self) -> int:
        """The recall probe row to show the circuit on: the one the shortcut gets wrong, else the
        one asked about the second name (a 'first place' rule gets it wrong)."""
        shown = self.shortcut_shown()
        return shown[1] if shown else self.probe_rows[[row.answer for row in self.rows].index(1)]

    def binder_text(self) -> str:
        return f"layer 0 {heads_text(self.binder_heads)}"

    def summary(self) -> str:
        last = -1
        places = ", ".join(f"{name} from step {step}" for name, step in zip(self.place_names, self.place_steps))
        return (f"the binder, {self.binder_text()}, binds (each place on its own name {self.binding[last]:.2f}) "
                f"from step {self.binder_step}; layer 1 head {self.reader_head} reads the asked place "
                f"({self.reading[last]:.2f}) from step {self.reader_step}; recall at 95% from step {self.recall_step}; "
                f"places bound: {places}")


def heads_text(heads) -> str:
    """'head 3', 'heads 1 and 3', 'heads 1, 2 and 3'."""
    names = [str(h) for h in heads]
    listed = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
    return f"head{'s' if len(names) > 1 else ''} {listed}"


def _for_good(steps, holds):
    """The first step from which ``holds`` is true at every later recorded step (None if not at
    the last): a part has formed once it stays, not when a weight passes a line by chance, as an
    untrained head's may on the first place, which has only six words to weigh."""
    holds = np.asarray(holds, dtype=bool)
    if not len(holds) or not holds[-1]:
        return None
    failing = np.flatnonzero(~holds)
    return int(steps[failing[-1] + 1]) if len(failing) else int(steps[0])


def _first(steps, holds):
    hits = np.flatnonzero(np.asarray(holds, dtype=bool))
    return int(steps[hits[0]]) if len(hits) else None


def recall_rows(probe) -> list:
    """The recall rows of a snapshots file's ``probe`` as ``RecallRow``s, found by their words
    (names and places)."""
    rows = []
    for text in probe:
        kind, _, sentence = str(text).partition(": ")
        if kind != "recall":
            continue
        words = ["<bos>"] + sentence.split()[:-1]          # the answer itself is never an input here
        places = [p for p, w in enumerate(words) if w in PLACES]
        names = [max(n for n in range(p) if words[n] in NAMES) for p in places]
        answer = sentence.split()[-1]
        rows.append(RecallRow(words, places, names, len(words) - 1, [words[p] for p in places].index(answer)))
    if not rows:
        raise ValueError("these snapshots hold no recall probe: they are not of a next-word run")
    return rows


def binder_heads(head_binding) -> tuple:
    """The layer-0 heads that bind a place at the last step (``head_binding[-1]``: places x heads),
    every one that does; for a place none binds yet, its strongest head."""
    last = head_binding[-1]
    heads = set()
    for place in last:
        binding = set(np.flatnonzero(place >= BOUND).tolist())
        heads |= binding or {int(place.argmax())}
    return tuple(sorted(heads))


def measure_recall_circuit(snapshots) -> RecallCircuit:
    """The circuit in ``snapshots`` (``load_snapshots``'s dict of a next-word run)."""
    rows = recall_rows(snapshots["probe"])
    probe_rows = [p for p, text in enumerate(snapshots["probe"]) if str(text).startswith("recall: ")]
    layers = [int(layer) for layer in snapshots["layers"]]
    if 0 not in layers or 1 not in layers:
        raise ValueError("the recall circuit needs two layers of attention; these snapshots have "
                         f"layers {sorted(set(layers))}")
    first, second = (snapshots["weights"][layers.index(layer)] for layer in (0, 1))   # (S, P, heads, Tq, Tk)
    # binding: (S, places, heads), each place's weight on its own name; the rows state the same facts
    # and differ only after them, so causal attention gives the two rows the same weights there (the
    # smaller is taken all the same)
    head_binding = np.stack([np.min([first[:, p, :, place, name] for p in probe_rows], axis=0)
                             for place, name in zip(rows[0].places, rows[0].names)], axis=1)
    # reader: (S, heads), the smaller over the orders of the last word's weight on the asked place
    reading = np.min([second[:, p, :, row.last, row.places[row.answer]] for p, row in zip(probe_rows, rows)], axis=0)
    reader = int(reading[-1].argmax())
    reads = [tuple(row.words[int(second[s, p, reader, row.last, :row.last + 1].argmax())]
                   for p, row in zip(probe_rows, rows)) for s in range(len(snapshots["steps"]))]
    recall = snapshots["held_out_accuracy"][:, list(snapshots["held_out_kinds"]).index("recall")]
    return RecallCircuit(np.asarray(snapshots["steps"]), np.asarray(recall, dtype=np.float64),
                         tuple(rows[0].words[p] for p in rows[0].places), head_binding.astype(np.float64),
                         binder_heads(head_binding), reader, reading[:, reader].astype(np.float64),
                         reads, tuple(row.words[row.places[row.answer]] for row in rows), probe_rows, rows)


def recall_circuit(path) -> RecallCircuit:
    """``measure_recall_circuit`` of the snapshots file at ``path`` (``attention_snapshots.npz``)."""
    return measure_recall_circuit(load_snapshots(path))
