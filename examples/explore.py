"""One attention step, forward and backward, in one self-contained HTML page.

Runs `dates-explore` without installing: python examples/explore.py --help
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from transformer.commands.explore import dates_main as explore_main  # noqa: E402


def main(argv=None) -> int:
    return explore_main(argv)


if __name__ == "__main__":
    sys.exit(main())
