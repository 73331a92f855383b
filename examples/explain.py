"""Print one attention head step by step (tokens, embeddings, positions, Q, QKᵀ, softmax) for one date.

Runs `dates-explain` without installing: python examples/explain.py --help
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from transformer.commands.explain import main as walkthrough_main  # noqa: E402


def main(argv=None) -> int:
    return walkthrough_main(argv)


if __name__ == "__main__":
    sys.exit(main())
