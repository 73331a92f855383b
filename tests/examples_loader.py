"""Shared by the tests of the scripts in examples/: load one as a module, as ``python
examples/NAME.py`` would run it (with examples/ on the path, for the sibling scripts it imports),
but without running its ``main``."""
import importlib.util
import os
import sys

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")


def load_example(name: str):
    """The module of ``examples/<name>.py``, executed afresh."""
    if EXAMPLES not in sys.path:
        sys.path.insert(0, EXAMPLES)
    spec = importlib.util.spec_from_file_location(name, os.path.join(EXAMPLES, f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
