"""Run `dates-translate` without installing: python examples/translate_dates.py --help"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from transformer.commands.dates import translate_main  # noqa: E402

if __name__ == "__main__":
    sys.exit(translate_main())
