"""The recall circuit's measurement (viz/recall_circuit.py): it finds a circuit planted in a real
snapshots file's weights (which heads, which steps, a binding split over two heads, a weight that
passes the line by chance), refuses files without one in a line, and (slow) finds the circuit a
default next-word run actually forms, both parts before recall is learned, after a shortcut that
reads one fixed place, with the numbers of docs/recall-circuit-seeds.json (the docs' claim over ten
seeds: tests/test_recall_circuit_record.py)."""
import json
import os
import sys

import numpy as np
import pytest

from explore_runs import dates_run, next_word_run
from transformer.tasks.language import NAMES, PLACES
from transformer.training.next_word import NextWordTrainer, default_model_config, default_train_config
from transformer.training.snapshots import SNAPSHOTS_NAME, load_snapshots
from transformer.parallel.threads import arithmetic
from viz.recall_circuit import measure_recall_circuit, recall_circuit

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "examples"))
from recall_circuit_seeds import run_record  # noqa: E402


def recall_positions(snapshots):
    """Per recall probe row: (row, place positions, the name before each, last input position, asked place),
    read from the file's own key tokens."""
    found = []
    for p, text in enumerate(snapshots["probe"]):
        if not str(text).startswith("recall: "):
            continue
        tokens = list(snapshots["keys"][0][p])
        last = tokens.index("<pad>") - 2 if "<pad>" in tokens else len(tokens) - 2     # the answer is the last token
        places = [t for t in range(last + 1) if tokens[t] in PLACES]
        names = [max(n for n in range(t) if tokens[n] in NAMES) for t in places]
        answer = next(t for t in places if tokens[t] == tokens[last + 1])
        found.append((p, places, names, last, answer))
    return found


@pytest.fixture(scope="module")
def snapshots(tmp_path_factory):
    checkpoint = next_word_run(tmp_path_factory.mktemp("run"), steps=20, every=4)
    return load_snapshots(checkpoint.replace("model.npz", SNAPSHOTS_NAME))


def test_it_finds_the_heads_and_steps_planted_in_a_run(snapshots):
    data = dict(snapshots, weights=[w.copy() for w in snapshots["weights"]],
                held_out_accuracy=snapshots["held_out_accuracy"].copy())
    first, second = data["weights"]                                  # layer 0, layer 1: (S, P, heads, Tq, Tk)
    steps = list(data["steps"])                                      # 0 4 8 12 16 20
    binder, reader, bound, read, recalled = 1, 0, 2, 3, 4            # heads, and the indices of their steps
    for p, places, names, last, answer in recall_positions(data):
        for place, name in zip(places, names):
            first[bound:, p, binder, place, :] = 0
            first[bound:, p, binder, place, name] = 0.9
        second[:, p, reader, last, :] = 0
        second[:read, p, reader, last, places[0]] = 0.8              # the "first place" shortcut, both orders
        second[read:, p, reader, last, answer] = 0.8
    data["held_out_accuracy"][:, list(data["held_out_kinds"]).index("recall")] = \
        [0.5, 0.45, 0.5, 0.6, 0.95, 1.0]
    circuit = measure_recall_circuit(data)
    assert (circuit.binder_heads, circuit.binder_head, circuit.reader_head) == ((binder,), binder, reader)
    assert circuit.binder_step == steps[bound] and circuit.reader_step == steps[read]
    assert circuit.place_steps == (steps[bound], steps[bound])
    assert circuit.recall_step == steps[recalled]
    assert circuit.binding[-1] == pytest.approx(0.9, abs=1e-3) and circuit.reading[-1] == pytest.approx(0.8, abs=1e-3)
    assert list(circuit.shortcut) == [True, True, True, False, False, False]
    assert {r for i, r in enumerate(circuit.reads) if i >= read} == {circuit.right_places}
    assert circuit.right_places[0] != circuit.right_places[1]       # the two orders ask different places


def test_a_binding_split_over_two_heads_is_found_place_by_place(snapshots):
    """The shape seen on a seed the docs were not measured on: each place bound by a head of its
    own, the second place first, and a place also read by a second head. Measured place by place
    across the heads, the binder has formed once both places are bound, whichever head binds each."""
    data = dict(snapshots, weights=[w.copy() for w in snapshots["weights"]])
    first = data["weights"][0]
    steps = list(data["steps"])                                      # 0 4 8 12 16 20
    second_place_head, first_place_head, helper = 0, 1, 1            # helper: also reads the second place
    for p, places, names, _, _ in recall_positions(data):
        first[:, p, :, places[0], :] = first[:, p, :, places[1], :] = 0
        first[2:, p, second_place_head, places[1], names[1]] = 0.7   # the second place is bound first
        first[5:, p, helper, places[1], names[1]] = 0.6             # ...and, at the end, by a second head
        first[4:, p, first_place_head, places[0], names[0]] = 0.8   # the first place later, by another head
        first[4:, p, second_place_head, places[0], names[0]] = 0.3   # which its head reads a little
    circuit = measure_recall_circuit(data)
    assert circuit.binder_step == steps[4]                          # one head for both places: only at step 20
    assert circuit.place_steps == (steps[4], steps[2])
    assert circuit.binder_heads == (0, 1)
    assert circuit.binding[-1] == pytest.approx(0.7, abs=1e-3)      # the less bound place, by its best head
    assert "heads 0 and 1" in circuit.summary() and f"from step {steps[4]};" in circuit.summary()


def test_a_part_forms_when_it_stays_not_when_a_weight_passes_by_chance(snapshots):
    """An untrained head can give the first place (six words to weigh) half its weight on its
    name; the binder has formed only from the step it stays bound, and the reader likewise."""
    data = dict(snapshots, weights=[w.copy() for w in snapshots["weights"]])
    first, second = data["weights"]
    steps = list(data["steps"])                                      # 0 4 8 12 16 20
    for p, places, names, last, answer in recall_positions(data):
        first[:, p, :, places[0], :] = first[:, p, :, places[1], :] = 0
        first[:2, p, 0, places[0], names[0]] = 0.6                   # by chance, at steps 0 and 4
        first[3:, p, 0, places[0], names[0]] = 0.8
        first[1:, p, 1, places[1], names[1]] = 0.9
        second[:, p, 0, last, :] = 0
        second[2, p, 0, last, answer] = second[4:, p, 0, last, answer] = 0.8   # right at 8, lost at 12
    circuit = measure_recall_circuit(data)
    assert circuit.place_steps == (steps[3], steps[1])
    assert circuit.binder_step == steps[3] and circuit.reader_step == steps[4]


def test_without_the_circuit_no_step_is_claimed(snapshots):
    data = dict(snapshots, weights=[np.zeros_like(w) for w in snapshots["weights"]],
                held_out_accuracy=np.zeros_like(snapshots["held_out_accuracy"]))
    circuit = measure_recall_circuit(data)
    assert circuit.binder_step is None and circuit.reader_step is None and circuit.recall_step is None
    assert not circuit.shortcut.any()                             # all-zero weights: it "reads" <bos>
    assert "step None" in circuit.summary()


def test_a_date_run_has_no_recall_circuit_to_measure(tmp_path):
    checkpoint = dates_run(tmp_path)
    with pytest.raises(ValueError, match="no recall probe"):
        recall_circuit(checkpoint.replace("model.npz", SNAPSHOTS_NAME))


@pytest.mark.slow
def test_a_default_run_gives_the_records_numbers(tmp_path):
    """Seed 1 of docs/recall-circuit-seeds.json (tests/test_recall_circuit_record.py checks the docs'
    claim on every seed of it), trained again: the same heads and steps where this machine rounds
    as one the record was made on, and the claim itself everywhere."""
    seed = 1
    trainer = NextWordTrainer(default_model_config(), default_train_config(snapshot_every=10, seed=seed),
                              out_dir=str(tmp_path))
    trainer.run(progress=False)
    circuit = recall_circuit(tmp_path / SNAPSHOTS_NAME)
    assert None not in (circuit.binder_step, circuit.reader_step, circuit.recall_step), circuit.summary()
    assert circuit.binder_step < circuit.recall_step and circuit.reader_step < circuit.recall_step, circuit.summary()
    assert circuit.reads[-1] == circuit.right_places
    assert circuit.shortcut.any(), "the reader never read one fixed place before it recalled"
    assert circuit.recall[circuit.shortcut].max() < 0.95
    with open(os.path.join(REPO, "docs", "recall-circuit-seeds.json"), encoding="utf-8") as f:
        recorded = json.load(f)["machines"].get(arithmetic())
    if recorded is None:
        pytest.skip(f"the record has no run made with {arithmetic()}: the claim held, the numbers cannot be compared")
    assert run_record(seed, circuit) == recorded[seed]
