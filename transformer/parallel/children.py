"""Processes we start end with the process that started them, however it ends.

The helper lives in the engine (``minigrad/kernels/children.py``: the kernels' compile helper
needs it, and the engine never imports ``transformer``); the ladder's workers and the console
scripts that ``viz/served.py`` starts import it from here.
"""
from minigrad.kernels.children import PR_SET_PDEATHSIG, die_with_parent  # noqa: F401
