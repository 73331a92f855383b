"""Re-draw every image in docs/images/ from one seed's trained model: one command.

    python examples/make_readme_images.py --seed 0

It trains the model of ``dates-train --seed S`` into ``runs/readme-seed-S/`` (or uses the model
already there: ``--retrain`` trains it again), then runs the commands that
``commands(seed)`` lists, in order, as the README's *See it* section quotes them: the attention
step of the decoder's masked self-attention with its gradients (the whole graph as SVG and the
scores -> mask -> softmax thumbnail as PNG), the three heatmaps, the backward animation, the
training curves and the dates-explore page, of which headless Chromium then takes the screenshot
``explorer.png`` (backward step 6, ``weights`` clicked, the pointer on a cell of head 0; it needs
Playwright and ``apt-get install chromium``, else that one image is left as it is, with a note);
last ``ladder_command(seed)`` trains the attention ladder on seeds 0-4 and draws its table (about 3 minutes).
The ``.dot`` files the graph commands write beside their pictures are removed, and
``examples/readme_picture_facts.py`` records what each picture shows in ``docs/images/facts.json``
(``tests/test_committed_pictures.py`` compares it with what today's code draws).
Rendering needs Graphviz's ``dot``; without it this says so in one line and exits with status 3
before it trains or writes anything.

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
               "training_curves.png", "explorer.png", "attention_ladder.png", "recall_circuit.png")


def run_folder(seed: int) -> str:
    return os.path.join("runs", f"readme-seed-{seed}")


def training_command(seed: int) -> str:
    """The training run whose model the pictures show (every 25 steps a held-out point for the curve)."""
    return f"dates-train --seed {seed} --eval-every 25 --no-progress --out {run_folder(seed)}"


def commands(seed: int) -> list:
    """The drawing commands, exactly as the README quotes them."""
    checkpoint = os.path.join(run_folder(seed), "model.npz")
    step = f"dates-attention-graph --checkpoint {checkpoint} --date {DATE} --kind decoder-self --backward"
    return [command + " --force" for command in (       # --force: they replace the images drawn before
        f"{step} --out {IMAGES}/attention_step",
        f"{step} --output-of weights --max-depth 3 --format png --out {IMAGES}/attention_step_mask",
        f"dates-heatmaps --checkpoint {checkpoint} --date {DATE} --out-dir {IMAGES} --prefix attention_heatmap",
        f"dates-backward-animation --out {IMAGES}/backward_animation --format gif",
        f"dates-plot-training {run_folder(seed)}/train_log.jsonl --out {IMAGES}/training_curves.png",
        f"dates-explore --checkpoint {checkpoint} --date {DATE} --kind decoder-self --out {explorer_page(seed)}",
    )]


# the ladder's picture: the default run, the first half of the committed record docs/ladder-run.json
LADDER_PICTURE_SEEDS = range(5)


def ladder_command(seed: int) -> str:
    """The attention ladder (its own models, no date model), as the README's section on it quotes it."""
    seeds = f"{LADDER_PICTURE_SEEDS[0]}-{LADDER_PICTURE_SEEDS[-1]}"
    return (f"attention-ladder --seeds {seeds} --plot {IMAGES}/attention_ladder.png "
            f"--json {run_folder(seed)}/ladder.json --force")


def lesson_commands(seed: int) -> list:
    """The recall circuit forming (docs/explorer.md): a next-word run recording its attention, and
    the two training steps next-word-explore shows of it (under a minute on the 2-vCPU VM)."""
    folder = f"runs/readme-next-word-seed-{seed}"
    return [f"next-word-train --seed {seed} --snapshot-every 10 --no-progress --out {folder} --force",
            f"python examples/recall_circuit_picture.py --checkpoint {folder}/model.npz "
            f"--out {IMAGES}/recall_circuit.png"]


def explorer_page(seed: int) -> str:
    return os.path.join(run_folder(seed), "explorer.html")


def screenshot_explorer(page_path: str, png_path: str) -> bool:
    """The README's picture of the explorer: backward step 6, ``weights`` clicked, the pointer on
    a cell of head 0. False (and a note) when no browser can be driven here."""
    from viz.browser import SKIP_REASON, open_page
    if SKIP_REASON is not None:
        print(f"note: {png_path} not redrawn: {SKIP_REASON}")
        return False
    with open_page(page_path) as opened:
        page = opened.page
        page.evaluate("n => { const s = document.getElementById('step'); s.value = n; "
                      "s.dispatchEvent(new Event('input')); }", 6)
        page.click('g.node.tensor[data-name="weights"]')
        box = page.locator("#att-canvas").bounding_box()
        page.mouse.move(box["x"] + box["width"] * 0.3, box["y"] + box["height"] * 0.6)
        page.screenshot(path=png_path)
    print(f"$ (headless Chromium) screenshot of {page_path} -> {png_path}")
    return True


def console_scripts() -> dict:
    from transformer.commands.dates import train_main
    from transformer.commands.attention_graph import main as attention_graph
    from transformer.commands.backward_animation import main as backward_animation
    from transformer.commands.explore import dates_main as explore
    from transformer.commands.heatmaps import curves_main, main as heatmaps
    from transformer.commands.ladder import main as attention_ladder
    return {"attention-ladder": attention_ladder, "dates-explore": explore, "dates-train": train_main, "dates-attention-graph": attention_graph, "dates-heatmaps": heatmaps,
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
    from viz.render import EXIT_DOT_MISSING, INSTALL_HINT, have_dot
    if not have_dot():                      # before anything is trained or written
        print(f"error: the README's images are drawn with Graphviz's `dot`, which is not on PATH; {INSTALL_HINT}",
              file=sys.stderr)
        return EXIT_DOT_MISSING
    os.chdir(REPO)                          # the commands' paths are the repository's
    scripts = console_scripts()
    checkpoint = os.path.join(run_folder(args.seed), "model.npz")
    if args.retrain or not os.path.exists(checkpoint):
        run(training_command(args.seed) + (" --force" if os.path.exists(checkpoint) else ""), scripts)
    else:
        print(f"using the model already trained in {checkpoint} (--retrain trains it again)")
    for command in commands(args.seed):
        run(command, scripts)
    screenshot_explorer(explorer_page(args.seed), os.path.join(IMAGES, "explorer.png"))
    run(ladder_command(args.seed), scripts)
    from transformer.commands.next_word import train_main as next_word_train
    sys.path.insert(0, os.path.join(REPO, "examples"))
    from recall_circuit_picture import main as recall_picture
    for command in lesson_commands(args.seed):
        run(command.replace("python examples/recall_circuit_picture.py", "recall-circuit-picture"),
            {**scripts, "next-word-train": next_word_train, "recall-circuit-picture": recall_picture})
    for name in os.listdir(IMAGES):
        if name.endswith(".dot"):
            os.remove(os.path.join(IMAGES, name))
    from readme_picture_facts import main as record_facts       # what each picture shows, for the tests
    if record_facts(["--seed", str(args.seed)]):
        return 2
    print(f"the images in {IMAGES}/ are now those of seed {args.seed}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
