"""The training progress bar is plain tqdm: tqdm.auto looks for a notebook and, in a Jupyter kernel
without ipywidgets, prints a TqdmWarning with the machine's site-packages path into the notebook."""
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHOW_BAR = """
import sys
from transformer.training.session import ProgressBar
with ProgressBar(total_steps=3, enabled=False) as bar:
    bar.step_done(1, {"loss": 1.0, "lr": 1e-3, "tokens_per_s": 10.0})
    bar.step_done(2, {"loss": 0.5, "lr": 1e-3, "tokens_per_s": 10.0})
print(sorted(name for name in sys.modules if name.startswith(("tqdm.auto", "tqdm.notebook"))))
"""


def test_the_bar_never_goes_through_tqdm_auto():
    done = subprocess.run([sys.executable, "-c", SHOW_BAR], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]", done.stdout
