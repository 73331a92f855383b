"""Run `dates-evaluate` without installing: python examples/evaluate_dates.py --help"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from transformer.commands.dates import evaluate_main  # noqa: E402

if __name__ == "__main__":
    sys.exit(evaluate_main())
