"""Run `next-word-complete` without installing: python examples/complete_next_word.py --help"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from transformer.commands.next_word import complete_main  # noqa: E402

if __name__ == "__main__":
    sys.exit(complete_main())
