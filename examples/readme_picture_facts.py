"""Record what each committed picture in docs/images/ shows, in docs/images/facts.json.

    python examples/readme_picture_facts.py --seed 0

``python examples/make_readme_images.py`` runs it last; run it alone after re-drawing one picture
by hand (``attention-ladder --plot docs/images/attention_ladder.png``, say). For each picture it
reads the facts a reader takes from it (``viz/picture_facts.py``: texts, numbers, legends, axis
ranges, a graph's labels) from the very functions the drawing commands call, on the runs they drew
from (``runs/readme-seed-S/``, ``runs/readme-next-word-seed-S/``, the committed ladder record), and
stores them with the picture's SHA-256 and what rounded the floats of this machine.
``tests/test_committed_pictures.py`` draws each picture again with today's code and compares.
"""
import argparse
import os
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

IMAGES = os.path.join(REPO, "docs", "images")
FACTS = os.path.join(IMAGES, "facts.json")
DATE = "1845-01-05"
LADDER_RECORD = os.path.join(REPO, "docs", "ladder-run.json")
# pictures no facts can be recomputed for, and why (the test checks their list is this one)
NOT_RECOMPUTED = {
    "explorer.png": "a browser's screenshot of the dates-explore page, whose texts and numbers "
                    "tests/test_explore*.py check on the page itself",
    "speed_by_size.png": "measured timings: examples/benchmark.py --sizes --write-docs draws it with the "
                         "table of docs/benchmarks.md in one run",
}


def date_run(seed: int) -> str:
    return os.path.join(REPO, "runs", f"readme-seed-{seed}")


def next_word_run(seed: int) -> str:
    return os.path.join(REPO, "runs", f"readme-next-word-seed-{seed}")


def date_model_facts(checkpoint: str) -> dict:
    """The pictures of the trained date model: the attention step (whole, and scores -> mask ->
    softmax) and the three heatmaps, as make_readme_images.py's commands draw them."""
    from transformer.files.trained_model import load_model
    from viz.attention_graph import build_attention_graph
    from viz.heatmaps import KINDS, attention_maps, plot_attention
    from viz.picture_facts import figure_facts, graph_facts

    model = load_model(checkpoint)
    step = dict(date=DATE, kind="decoder-self", layer=0, backward=True)
    whole, _ = build_attention_graph(model, **step)
    thumbnail, _ = build_attention_graph(model, **step, max_depth=3, output_of="weights")
    facts = {"attention_step.svg": {"labels": graph_facts(whole.source)},
             "attention_step_mask.png": {"labels": graph_facts(thumbnail.source)}}
    maps = attention_maps(model, DATE)
    for kind in KINDS:
        facts[f"attention_heatmap_{kind}.png"] = {
            "figure": figure_facts(plot_attention(maps, kind)),
            # where each row of each head looks most: what the captions tell a reader to see
            "looks_most_at": maps.weights[kind].argmax(axis=-1).tolist()}
    return facts


def training_curves_facts(log: str) -> dict:
    from viz.heatmaps import plot_training_curves
    from viz.picture_facts import figure_facts
    with tempfile.TemporaryDirectory() as folder:
        return {"figure": figure_facts(plot_training_curves(log, os.path.join(folder, "curves.png")).figure)}


def backward_animation_facts() -> dict:
    """The default expression's backward pass (dates-backward-animation with no model): every frame's labels."""
    from viz.backward_animation import DEFAULT_EXPR, DEFAULT_VARS, backward_frames, expression_root, parse_var
    from viz.picture_facts import graph_facts
    root = expression_root(DEFAULT_EXPR, dict(parse_var(v) for v in DEFAULT_VARS))
    return {"frames": [graph_facts(frame.digraph.source) for frame in backward_frames(root, title=DEFAULT_EXPR)]}


def first_seeds(result, count: int):
    """``result`` (a ``LadderResult``) cut to its first ``count`` seeds: a rung's numbers on a seed
    do not depend on the other seeds of the run, so this is the table of the shorter run."""
    result.seeds = result.seeds[:count]
    for rung in result.rungs:
        for table in (rung.accuracy, rung.pull, rung.self_pull, rung.candidates):
            for key, values in table.items():
                table[key] = values[:count]
        rung.seconds = rung.seconds[:count]
    return result


def ladder_facts(record: str = LADDER_RECORD) -> dict:
    """The picture is the default run's (``make_readme_images.ladder_command``: seeds 0-4), which
    is the first half of the committed ten-seed record."""
    from transformer.ladder import LadderResult
    from viz.ladder import plot_ladder
    from viz.picture_facts import figure_facts
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from make_readme_images import LADDER_PICTURE_SEEDS
    figure = plot_ladder(first_seeds(LadderResult.load(record), len(LADDER_PICTURE_SEEDS)))
    # its last panel, the weights on one sentence, comes from the live run: the record does not keep them
    figure.delaxes(figure.axes[-1])
    return {"figure": figure_facts(figure)}


def recall_circuit_facts(checkpoint: str) -> dict:
    """What examples/recall_circuit_picture.py shows: the two steps, the probe, the focused head
    (the reader) and the heads framed as the binder."""
    from transformer.training.snapshots import load_snapshots, snapshots_beside
    from viz.recall_circuit import measure_recall_circuit
    snapshots = load_snapshots(snapshots_beside(checkpoint))
    circuit = measure_recall_circuit(snapshots)
    before, row = circuit.shortcut_shown()
    return {"steps": [int(circuit.steps[before]), circuit.recall_step], "probe": str(snapshots["probe"][row]),
            "reader head": circuit.reader_head, "binder heads": [int(h) for h in circuit.binder_heads]}


def blend_heads_facts() -> dict:
    """What examples/ladder_sources.py --picture draws: the heads rung trained on seed 0 as the
    ladder trains it (about 16 s of CPU), each head's title naming the role it reads."""
    from transformer.ladder import LadderConfig
    from viz.blend_heads import save_blend_heads
    with tempfile.TemporaryDirectory() as folder:
        return {"labels": save_blend_heads(os.path.join(folder, "heads.png"), LadderConfig(seeds=(0,)))}


def machine_independent_facts() -> dict:
    """The pictures drawn from committed data or a fixed expression: the same on every machine."""
    return {"attention_ladder.png": ladder_facts(), "backward_animation.gif": backward_animation_facts()}


def machine_facts(seed: int) -> dict:
    """The pictures of this machine's seed-``seed`` runs (their floats are rounded by its BLAS and vector width)."""
    facts = date_model_facts(os.path.join(date_run(seed), "model.npz"))
    facts["training_curves.png"] = training_curves_facts(os.path.join(date_run(seed), "train_log.jsonl"))
    facts["recall_circuit.png"] = recall_circuit_facts(os.path.join(next_word_run(seed), "model.npz"))
    facts["blend_heads.png"] = blend_heads_facts()        # always seed 0's, as docs/ladder.md shows it
    return facts


def record(seed: int) -> dict:
    from transformer.parallel.threads import arithmetic
    from viz.picture_facts import file_sha256
    pictures = {**machine_facts(seed), **machine_independent_facts()}
    pictures.update({name: {"not recomputed": why} for name, why in NOT_RECOMPUTED.items()})
    for name, facts in pictures.items():
        facts["sha256"] = file_sha256(os.path.join(IMAGES, name))
    return {"arithmetic": arithmetic(), "seed": seed, "pictures": pictures}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seed", type=int, default=0, help="the seed of the runs drawn (default: %(default)s)")
    args = parser.parse_args(argv)
    for needed in (os.path.join(date_run(args.seed), "model.npz"), os.path.join(next_word_run(args.seed), "model.npz")):
        if not os.path.exists(needed):
            print(f"error: {needed} is missing: python examples/make_readme_images.py --seed {args.seed} trains it",
                  file=sys.stderr)
            return 2
    from viz.picture_facts import write_facts
    write_facts(FACTS, record(args.seed))
    print(f"wrote {os.path.relpath(FACTS, REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
