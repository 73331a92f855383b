"""Processes we start end with the process that started them, however it ends.

A parent can stop its children on Ctrl-C or an error, but none of its code runs after kill -9.
On Linux the kernel can do it instead: a child that asks (``prctl(PR_SET_PDEATHSIG, SIGKILL)``)
is killed when its parent dies. The kernels' compile helper (``compile_cache.py``) asks, and so
do the ladder's worker processes and every console script that a test or a benchmark starts
with ``viz/served.py``'s ``command`` (through ``transformer/parallel/children.py``). It lives
here, with nothing but the standard library, because the engine never imports ``transformer``.
"""
import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1        # linux/prctl.h


def die_with_parent(parent: int = None):
    """Called in the child: on Linux the kernel kills it when its parent dies (elsewhere
    nothing). ``parent``: the pid of the process that started it; if that one is already gone
    (it died before the request took effect), the child ends now."""
    if not sys.platform.startswith("linux"):
        return
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        return
    if parent is not None and os.getppid() != parent:
        os._exit(1)
