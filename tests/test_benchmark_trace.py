"""examples/benchmark_trace.py: its "ops alone" column times the ops of a pure replay, and only them."""
from minigrad.trace import trace

from examples_loader import load_example

bench = load_example("benchmark_trace")


def test_measure_gives_every_kind_and_leaves_the_tape_as_it_was():
    model, piece, args = bench.date_piece(dict(d_model=8, num_heads=2, d_ff=32), 2)
    ms = bench.measure(model, piece, args, reps=2)
    assert set(ms) == {"eager", "checked", "pure", "ops"} and all(v > 0 for v in ms.values())


def test_ops_alone_counts_the_ops_time_and_not_the_replays(monkeypatch):
    model, piece, args = bench.ladder_piece(bench.RUNGS[0])
    traced = trace(piece)
    for _ in range(3):
        model.zero_grad()
        traced(*args)
    assert traced.last == "replayed purely"
    steps = traced.last_tape.pure.steps
    clock = iter(range(10 ** 6))
    monkeypatch.setattr(bench.time, "process_time", lambda: next(clock))   # each reading one tick later
    seconds = bench.ops_alone(traced, args)
    calls = sum(2 if recorded else 1 for _, _, recorded, _, _ in steps)    # a forward each, a backward each recorded
    assert seconds == calls                    # one tick per timed call: the replay's own work is not counted
    assert traced.last_tape.pure.steps is steps and traced.last == "replayed purely"


def test_the_ladder_pieces_are_what_train_rung_traces():
    model, piece, args = bench.ladder_piece(bench.RUNGS[7])
    inputs, at, answers = args
    assert inputs.shape == (64, bench.MAX_LEN) and answers.tolist() == inputs[range(64), at + 1].tolist()
    loss = piece(*args)
    assert loss.data.shape == () and model.embedding.weight.grad is not None
