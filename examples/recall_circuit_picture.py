"""The recall circuit forming, as next-word-explore shows it: one picture of two training steps.

    next-word-train --snapshot-every 10 --out runs/next-word
    python examples/recall_circuit_picture.py --checkpoint runs/next-word/model.npz --out docs/images/recall_circuit.png

It measures the run's recall circuit from its snapshots (``viz/recall_circuit.py``), writes the
run's next-word-explore page (no ladder, no check) to a temporary file, opens it in headless
Chromium at 1280 x 1000, focuses the layer-1 head that comes to read the answer (the reader), and
takes the side panel, every layer and head, at two steps: the last one at which that head read one
fixed place whichever name was asked (the shortcut), on the recall probe the shortcut gets wrong,
and the first at which held-out recall reached 95%. The two pictures are put side by side, and
the heads the page framed as the binder's and the reader's at each step are written into the PNG
(``picture_marks`` reads them: tests/test_committed_pictures.py checks them against the measure).
"""
import argparse
import json
import os
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

MARKS_KEY = "Marks"         # PNG text: per step shown, the heads framed as the circuit's parts
PARTS = ("binder", "reader")


def page_marks(page) -> dict:
    """The heads the open page frames as the circuit's: {"binder": [[module, head], ...], "reader": [...]}."""
    return page.evaluate("""parts => Object.fromEntries(parts.map(part => [part,
        Array.from(document.querySelectorAll("canvas.cell." + part), c => [c.dataset.module, Number(c.dataset.head)])]))""",
                         list(PARTS))


def picture_marks(path) -> list:
    """The marks a picture written here carries, one ``page_marks`` per step shown ([] when it has none)."""
    from PIL import Image, PngImagePlugin

    from transformer.files.output_file import atomic_output
    with Image.open(path) as image:
        return json.loads(image.text[MARKS_KEY]) if MARKS_KEY in image.text else []


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--checkpoint", required=True, help="a next-word run's model.npz, with its snapshots beside it")
    parser.add_argument("--out", default=os.path.join("docs", "images", "recall_circuit.png"))
    args = parser.parse_args(argv)
    from PIL import Image, PngImagePlugin

    from transformer.files.output_file import atomic_output

    from transformer.training.snapshots import load_snapshots, snapshots_beside
    from viz.browser import open_page
    from transformer.commands.explore import next_word_main as explore
    from viz.recall_circuit import measure_recall_circuit

    snapshots = load_snapshots(snapshots_beside(args.checkpoint))
    circuit = measure_recall_circuit(snapshots)
    if circuit.shortcut_shown() is None or circuit.recall_step is None:
        print(f"error: no shortcut, or recall never reached 95%, in this run: {circuit.summary()}", file=sys.stderr)
        return 2
    before, row = circuit.shortcut_shown()
    after = list(circuit.steps).index(circuit.recall_step)
    reader = f'canvas.cell[data-module="decoder.layers.1.self_attn"][data-head="{circuit.reader_head}"]'
    with tempfile.TemporaryDirectory() as folder:
        page_path = os.path.join(folder, "page.html")
        if explore(["--checkpoint", args.checkpoint, "--out", page_path, "--ladder-steps", "0", "--no-check"]):
            return 2
        shots, marks = [], []
        with open_page(page_path, width=1280, height=1000) as opened:
            page = opened.page
            page.select_option("#source", f"row{row}")
            for index in (before, after):
                page.evaluate("i => { const s = document.getElementById('snap-step'); s.value = i; "
                              "s.dispatchEvent(new Event('input')); }", index)
                page.click(reader)
                shot = os.path.join(folder, f"{index}.png")
                page.locator("#side").screenshot(path=shot)
                marks.append(page_marks(page))
                shots.append(Image.open(shot).convert("RGB"))
        width = sum(s.width for s in shots) + 10
        picture = Image.new("RGB", (width, max(s.height for s in shots)), "white")
        picture.paste(shots[0], (0, 0))
        picture.paste(shots[1], (shots[0].width + 10, 0))
        info = PngImagePlugin.PngInfo()
        info.add_text(MARKS_KEY, json.dumps(marks))
        with atomic_output(args.out) as tmp:
            picture.save(tmp, format="PNG", pnginfo=info)
    steps = circuit.steps
    print(f"wrote {args.out}: steps {steps[before]} and {steps[after]}, probe {snapshots['probe'][row]}, "
          f"layer 1 head {circuit.reader_head} focused; framed: {marks[-1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
