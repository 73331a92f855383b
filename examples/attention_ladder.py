"""Run `attention-ladder` without installing: python examples/attention_ladder.py --json ladder.json"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from transformer.commands.ladder import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
