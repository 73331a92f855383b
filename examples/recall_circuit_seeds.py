"""The recall circuit on several seeds: which heads, how strong, and when each part formed.

    for seed in 0 1 2 3 4; do
        next-word-train --snapshot-every 10 --seed $seed --out runs/next-word-seed$seed
    done
    python examples/recall_circuit_seeds.py runs/next-word-seed0 runs/next-word-seed1 ...

For each run folder (its attention_snapshots.npz) one row of a Markdown table
(``viz/recall_circuit.py`` says what is measured), then the range of each column over the runs:
a lesson told from one seed must hold on all of them.
"""
import argparse
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

COLUMNS = ("run", "last step", "shortcut: reads, steps", "recall meanwhile", "layer 0 binds: head, step, weight",
           "layer 1 reads: head, step, weight", "recall 95%: step")


def row(name, circuit) -> list:
    shortcut = circuit.shortcut
    places = sorted({circuit.reads[i][0] for i in range(len(shortcut)) if shortcut[i]})
    steps = circuit.steps[shortcut]
    recall = circuit.recall[shortcut]
    return [name, f"{circuit.steps[-1]}",
            f"{'/'.join(places)}, {steps.min()}-{steps.max()}" if len(steps) else "none",
            f"{recall.min():.0%}-{recall.max():.0%}" if len(steps) else "",
            f"{circuit.binder_head}, {circuit.binder_step}, {circuit.binding[-1]:.2f}",
            f"{circuit.reader_head}, {circuit.reader_step}, {circuit.reading[-1]:.2f}", f"{circuit.recall_step}"]


def spread(circuits) -> list:
    """One line per claim: its values on every run."""
    def values(getter):
        found = [getter(c) for c in circuits]
        return ", ".join(str(v) for v in found)
    return [f"layer 0 binds at step: {values(lambda c: c.binder_step)}",
            f"layer 1 reads the asked place at step: {values(lambda c: c.reader_step)}",
            f"recall reaches 95% at step: {values(lambda c: c.recall_step)}",
            f"recall 95% minus layer 0: {values(lambda c: _minus(c.recall_step, c.binder_step))}",
            f"recall 95% minus layer 1: {values(lambda c: _minus(c.recall_step, c.reader_step))}"]


def _minus(a, b):
    return None if a is None or b is None else a - b


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("runs", nargs="+", help="next-word run folders recorded with --snapshot-every")
    args = parser.parse_args(argv)
    from transformer.training.snapshots import SNAPSHOTS_NAME
    from viz.recall_circuit import recall_circuit

    circuits = [recall_circuit(os.path.join(run, SNAPSHOTS_NAME)) for run in args.runs]
    print("| " + " | ".join(COLUMNS) + " |")
    print("|" + "---|" * len(COLUMNS))
    for run, circuit in zip(args.runs, circuits):
        print("| " + " | ".join(row(os.path.basename(os.path.normpath(run)), circuit)) + " |")
    print()
    print("\n".join(spread(circuits)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
