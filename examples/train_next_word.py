"""Run `next-word-train` without installing: python examples/train_next_word.py --help"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from transformer.commands.next_word import train_main  # noqa: E402

if __name__ == "__main__":
    sys.exit(train_main())
