"""Re-draw every image in docs/images/ from one seed's trained model: one command.

    python examples/make_readme_images.py --seed 0

It trains the model of ``dates-train --seed S`` into ``runs/readme-seed-S/`` (or uses the model
already there: ``--retrain`` trains it again), then runs the commands that
``commands(seed)`` lists, in order, as the README's *See it* section quotes them: the attention
step of the decoder's masked self-attention with its gradients (the whole graph as SVG and the
scores -> mask -> softmax thumbnail as PNG), the three heatmaps, the backward animation and the
training curves. The ``.dot`` files the graph commands write beside their pictures are removed.
Rendering needs Graphviz's ``dot``; without it this stops with the install hint.

Runs without installing (each command is called in this process, as its console script would be).
"""
import argparse
import os
import shlex
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

IMAGES = os.path.join("docs", "images")
DATE = "1845-01-05"


# what the commands below draw: every file docs/images/ holds
IMAGE_FILES = ("attention_step.svg", "attention_step_mask.png", "attention_heatmap_encoder-self.png",
               "attention_heatmap_decoder-self.png", "attention_heatmap_cross.png", "backward_animation.gif",
               "training_curves.png")


def run_folder(seed: int) -> str:
    return os.path.join("runs", f"readme-seed-{seed}")


def training_command(seed: int) -> str:
    """The training run whose model the pictures show (every 25 steps a held-out point for the curve)."""
    return f"dates-train --seed {seed} --eval-every 25 --no-progress --out {run_folder(seed)}"


def commands(seed: int) -> list:
    """The drawing commands, exactly as the README quotes them."""
    checkpoint = os.path.join(run_folder(seed), "model.npz")
    step = f"dates-attention-graph --checkpoint {checkpoint} --date {DATE} --kind decoder-self --backward"
    return [
        f"{step} --out {IMAGES}/attention_step",
        f"{step} --output-of weights --max-depth 3 --format png --out {IMAGES}/attention_step_mask",
        f"dates-heatmaps --checkpoint {checkpoint} --date {DATE} --out-dir {IMAGES} --prefix attention_heatmap",
        f"dates-backward-animation --out {IMAGES}/backward_animation --format gif",
        f"dates-plot-training {run_folder(seed)}/train_log.jsonl --out {IMAGES}/training_curves.png",
    ]


def console_scripts() -> dict:
    from transformer.cli import train_main
    from viz.attention_graph import main as attention_graph
    from viz.backward_animation import main as backward_animation
    from viz.heatmaps import curves_main, main as heatmaps
    return {"dates-train": train_main, "dates-attention-graph": attention_graph, "dates-heatmaps": heatmaps,
            "dates-backward-animation": backward_animation, "dates-plot-training": curves_main}


def run(command: str, scripts: dict) -> None:
    name, *argv = shlex.split(command)
    print(f"$ {command}", flush=True)
    code = scripts[name](argv)
    if code:
        sys.exit(f"error: `{command}` exited with status {code} (see above); no further image was drawn")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seed", type=int, default=0, help="the training seed (default: %(default)s)")
    parser.add_argument("--retrain", action="store_true", help="train again even if the run folder holds a model")
    args = parser.parse_args(argv)
    os.chdir(REPO)                          # the commands' paths are the repository's
    scripts = console_scripts()
    checkpoint = os.path.join(run_folder(args.seed), "model.npz")
    if args.retrain or not os.path.exists(checkpoint):
        run(training_command(args.seed) + (" --force" if os.path.exists(checkpoint) else ""), scripts)
    else:
        print(f"using the model already trained in {checkpoint} (--retrain trains it again)")
    for command in commands(args.seed):
        run(command, scripts)
    for name in os.listdir(IMAGES):
        if name.endswith(".dot"):
            os.remove(os.path.join(IMAGES, name))
    print(f"the images in {IMAGES}/ are now those of seed {args.seed}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
