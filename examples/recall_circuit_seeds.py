"""The recall circuit on several seeds: which heads, how strong, and when each part formed.

    for seed in 0 1 2 3 4 5 6 7 8 9; do
        nice -n 10 next-word-train --snapshot-every 10 --seed $seed --no-progress --out runs/next-word-seed$seed
    done
    python examples/recall_circuit_seeds.py runs/next-word-seed?
    python examples/recall_circuit_seeds.py runs/next-word-seed? --json docs/recall-circuit-seeds.json

For each run folder (its attention_snapshots.npz and model.npz) one row of a Markdown table
(``viz/recall_circuit.py`` says what is measured), then the range of each claim over the runs:
a lesson told from one seed must hold on all of them. ``--json`` keeps the numbers in a record,
under this machine's arithmetic (its BLAS kernels and vector width: the same seed stops at other
steps with AVX2 than with AVX-512), beside the other machines' runs already in the file.
"""
import argparse
import json
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

COLUMNS = ("seed", "last step", "shortcut: reads, steps", "recall meanwhile", "binder: layer-0 heads",
           "places bound at", "binder formed", "binder weight", "reader: layer-1 head, step, weight",
           "recall 95%: step")


def run_record(seed, circuit) -> dict:
    """The numbers of one run that the docs' claims are about."""
    shortcut = circuit.shortcut
    meanwhile = circuit.recall[shortcut]
    return {"seed": seed, "last_step": int(circuit.steps[-1]),
            "binder_heads": list(circuit.binder_heads), "places": list(circuit.place_names),
            "place_steps": list(circuit.place_steps), "binder_step": circuit.binder_step,
            "binding": round(float(circuit.binding[-1]), 3),
            "reader_head": circuit.reader_head, "reader_step": circuit.reader_step,
            "reading": round(float(circuit.reading[-1]), 3), "recall_step": circuit.recall_step,
            "shortcut_places": sorted({circuit.reads[i][0] for i in range(len(shortcut)) if shortcut[i]}),
            "shortcut_steps": [int(s) for s in circuit.steps[shortcut]],
            "shortcut_recall": [round(float(meanwhile.min()), 3), round(float(meanwhile.max()), 3)]
            if shortcut.any() else None}


def table_row(run) -> list:
    steps = run["shortcut_steps"]
    return [str(run["seed"]), str(run["last_step"]),
            f"{'/'.join(run['shortcut_places'])}, {steps[0]}-{steps[-1]}" if steps else "none",
            f"{run['shortcut_recall'][0]:.0%}-{run['shortcut_recall'][1]:.0%}" if steps else "",
            ", ".join(str(h) for h in run["binder_heads"]),
            ", ".join(f"{place} {step}" for place, step in zip(run["places"], run["place_steps"])),
            str(run["binder_step"]), f"{run['binding']:.2f}",
            f"{run['reader_head']}, {run['reader_step']}, {run['reading']:.2f}", str(run["recall_step"])]


def spread(runs) -> list:
    """One line per claim: its values on every run."""
    def values(getter):
        return ", ".join(str(getter(r)) for r in runs)
    return [f"binder formed at step: {values(lambda r: r['binder_step'])}",
            f"reader formed at step: {values(lambda r: r['reader_step'])}",
            f"recall reaches 95% at step: {values(lambda r: r['recall_step'])}",
            f"recall 95% minus binder: {values(lambda r: _minus(r['recall_step'], r['binder_step']))}",
            f"recall 95% minus reader: {values(lambda r: _minus(r['recall_step'], r['reader_step']))}"]


def _minus(a, b):
    return None if a is None or b is None else a - b


def _vectors(arithmetic) -> str:
    """'AVX-512' for a record made with 64-byte vectors, 'AVX2' for 32 (``threads.arithmetic``)."""
    return {"64-byte": "AVX-512", "32-byte": "AVX2"}.get(arithmetic.split(", ")[-1].split()[0], arithmetic)


def _span(values) -> str:
    low, high = min(values), max(values)
    return f"{low}" if low == high else f"{low}-{high}"


def claims(record) -> list:
    """The docs' sentences about the circuit, made from the record's runs on every machine in it
    (docs/explorer.md quotes them; tests/test_recall_circuit_record.py checks they are these)."""
    runs = [run for machine in record["machines"].values() for run in machine]
    seeds = sorted({run["seed"] for run in runs})
    unformed = [run["seed"] for run in runs if None in (run["binder_step"], run["reader_step"], run["recall_step"])]
    if unformed:
        return [f"The circuit did not form (or recall did not reach 95%) on seeds {unformed}: no claim holds."]
    machines = " and ".join(_vectors(name) for name in record["machines"])
    gaps = [(run["recall_step"] - max(run["binder_step"], run["reader_step"]), run["seed"]) for run in runs]
    gap, gap_seed = min(gaps)
    heads = [len(run["binder_heads"]) for run in runs]
    first_place = sum(a < b for a, b in (run["place_steps"] for run in runs))
    second_place = sum(a > b for a, b in (run["place_steps"] for run in runs))
    shortcut = [run for run in runs if run["shortcut_steps"]]
    return [
        f"On all {len(runs)} runs (seeds {seeds[0]}-{seeds[-1]}, with {machines}) both parts "
        f"of the circuit form before held-out recall reaches 95%: the binder at step "
        f"{_span([r['binder_step'] for r in runs])}, the reader at step {_span([r['reader_step'] for r in runs])}, "
        f"recall at step {_span([r['recall_step'] for r in runs])}.",
        f"The later of the two parts forms {_span([g for g, _ in gaps])} steps before recall reaches 95% "
        f"(the least, {gap} steps, on seed {gap_seed}).",
        f"The binder is {_span(heads)} layer-0 heads; the first place stated is bound first on {first_place} "
        f"runs, the second on {second_place}, both at the same recorded step on {len(runs) - first_place - second_place}.",
        f"At the last step the less bound place puts {min(r['binding'] for r in runs):.2f}-"
        f"{max(r['binding'] for r in runs):.2f} of its best head's weight on its own name, and the reader "
        f"{min(r['reading'] for r in runs):.2f}-{max(r['reading'] for r in runs):.2f} on the asked place.",
        f"Before the reader formed, it read one fixed place whichever name was asked on {len(shortcut)} of the "
        f"{len(runs)} runs, and held-out recall at those steps was at most "
        f"{max(r['shortcut_recall'][1] for r in shortcut):.0%}.",
    ]


def markdown_table(runs) -> str:
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    return "\n".join(lines + ["| " + " | ".join(table_row(run)) + " |" for run in runs])


def write_record(path, runs, command):
    """Keep ``runs`` in the record at ``path`` under this machine's arithmetic, atomically."""
    from transformer.files.output_file import atomic_output
    from transformer.parallel.threads import arithmetic
    record = {"command": command, "machines": {}}
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            record = json.load(f)
    record["command"] = command
    record["machines"][arithmetic()] = runs
    with atomic_output(path) as tmp:
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(record, f, indent=1)
            f.write("\n")
    return record


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("runs", nargs="+", help="next-word run folders recorded with --snapshot-every")
    parser.add_argument("--json", metavar="PATH", help="also keep the numbers in this record (JSON)")
    args = parser.parse_args(argv)
    from transformer.files.checkpoint import CheckpointError, load_checkpoint
    from transformer.training.snapshots import SNAPSHOTS_NAME, SnapshotError
    from viz.recall_circuit import recall_circuit

    try:
        runs = [run_record(load_checkpoint(os.path.join(run, "model.npz"))[2]["train_config"]["seed"],
                           recall_circuit(os.path.join(run, SNAPSHOTS_NAME))) for run in args.runs]
    except (OSError, ValueError, CheckpointError, SnapshotError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    runs.sort(key=lambda r: r["seed"])
    print(markdown_table(runs))
    print()
    print("\n".join(spread(runs)))
    if args.json:
        record = write_record(args.json, runs, "python examples/recall_circuit_seeds.py runs/next-word-seed? --json "
                              + args.json)
        print(f"kept in {args.json}; over every machine's runs in it:")
        print("\n".join(claims(record)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
