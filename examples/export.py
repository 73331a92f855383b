"""Run `dates-export` without installing: python examples/export.py --help"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from transformer.commands.export import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
