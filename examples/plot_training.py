"""Plot the training loss and held-out exact match from a training log (PNG).

Runs `dates-plot-training` without installing: python examples/plot_training.py --help
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from transformer.commands.heatmaps import curves_main  # noqa: E402


def main(argv=None) -> int:
    return curves_main(argv)


if __name__ == "__main__":
    sys.exit(main())
