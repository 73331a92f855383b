"""Animate the backward pass, one frame per op (writes a GIF and an HTML page with a slider).

Runs `dates-backward-animation` without installing: python examples/backward_animation.py --help
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from transformer.commands.backward_animation import main as backward_animation_main  # noqa: E402


def main(argv=None) -> int:
    return backward_animation_main(argv)


if __name__ == "__main__":
    sys.exit(main())
