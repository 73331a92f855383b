"""The recall circuit forming, as next-word-explore shows it: one picture of two training steps.

    next-word-train --snapshot-every 10 --out runs/next-word
    python examples/recall_circuit_picture.py --checkpoint runs/next-word/model.npz --out docs/images/recall_circuit.png

It writes the run's next-word-explore page (no ladder, no check) to a temporary file, opens it
in headless Chromium at 1280 x 1000, picks the recall probe asked about the second name (its
answer is the place stated second, so a "first place stated" shortcut gets it wrong), keeps
the head the page opens on (the one whose weights changed most over training) and takes the
side panel at two steps found from the run's held-out recall accuracy: the last step before it
first reaches 95% at which it was at most 65% (the shortcut), and the first step at 95% or more
(recall). The two pictures are put side by side.
"""
import argparse
import os
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)


def lesson_steps(snapshots) -> tuple:
    """(index before, index after) of the recorded steps, from the recall kind's held-out accuracy."""
    recall = list(snapshots["held_out_kinds"]).index("recall")
    accuracy = snapshots["held_out_accuracy"][:, recall]
    after = next(i for i, a in enumerate(accuracy) if a >= 0.95)
    before = max(i for i in range(after) if accuracy[i] <= 0.65)
    return before, after


def second_name_row(probe) -> int:
    """The recall probe row whose answer is not the place stated first."""
    for p, row in enumerate(probe):
        kind, text = str(row).split(": ", 1)
        words = text.split()
        if kind == "recall" and words[-1] != words[4]:
            return p
    raise ValueError("no recall probe asked about the second name in these snapshots")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--checkpoint", required=True, help="a next-word run's model.npz, with its snapshots beside it")
    parser.add_argument("--out", default=os.path.join("docs", "images", "recall_circuit.png"))
    args = parser.parse_args(argv)
    from PIL import Image

    from transformer.training.snapshots import load_snapshots, snapshots_beside
    from viz.browser import open_page
    from viz.explorer.next_word_cli import main as explore

    snapshots = load_snapshots(snapshots_beside(args.checkpoint))
    before, after = lesson_steps(snapshots)
    row = second_name_row(snapshots["probe"])
    with tempfile.TemporaryDirectory() as folder:
        page_path = os.path.join(folder, "page.html")
        if explore(["--checkpoint", args.checkpoint, "--out", page_path, "--ladder-steps", "0", "--no-check"]):
            return 2
        shots = []
        with open_page(page_path, width=1280, height=1000) as opened:
            page = opened.page
            page.select_option("#source", f"row{row}")
            for index in (before, after):
                page.evaluate("i => { const s = document.getElementById('snap-step'); s.value = i; "
                              "s.dispatchEvent(new Event('input')); }", index)
                shot = os.path.join(folder, f"{index}.png")
                page.locator("#side").screenshot(path=shot)
                shots.append(Image.open(shot).convert("RGB"))
        width = sum(s.width for s in shots) + 10
        picture = Image.new("RGB", (width, max(s.height for s in shots)), "white")
        picture.paste(shots[0], (0, 0))
        picture.paste(shots[1], (shots[0].width + 10, 0))
        picture.save(args.out + ".tmp.png")
        os.replace(args.out + ".tmp.png", args.out)
    steps = snapshots["steps"]
    print(f"wrote {args.out}: steps {steps[before]} and {steps[after]}, probe {snapshots['probe'][row]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
