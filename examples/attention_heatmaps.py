"""Attention heatmaps of every layer and head for one date (PNG).

Runs `dates-heatmaps` without installing: python examples/attention_heatmaps.py --help
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from transformer.commands.heatmaps import main as heatmaps_main  # noqa: E402


def main(argv=None) -> int:
    return heatmaps_main(argv)


if __name__ == "__main__":
    sys.exit(main())
