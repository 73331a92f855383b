"""Ctrl-C during the first kernel call (Numba importing, the kernel files registering, the first
compile) interrupts that call only: the same process then runs the op again and gets the right
answer. Each case is a fresh process that sends itself a real SIGINT at that moment, catches the
KeyboardInterrupt as a notebook does, and calls again. (Before the fix, an import interrupted
half-way left half a Numba in sys.modules: every later call failed with "partially initialized
module 'numba.core.types'" or "module 'numba' has no attribute 'core'".)"""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

PROGRAM = r"""
import importlib.abc, json, signal, sys
import numpy as np

moment, where = sys.argv[1], sys.argv[2]


def interrupt():
    signal.raise_signal(signal.SIGINT)      # Ctrl-C: KeyboardInterrupt at the next bytecode


class InterruptAtImport(importlib.abc.MetaPathFinder):
    fired = False

    def find_spec(self, name, path, target=None):
        if name == where and not InterruptAtImport.fired:
            InterruptAtImport.fired = True
            interrupt()
        return None


if moment == "import":
    sys.meta_path.insert(0, InterruptAtImport())
else:                                       # the first compile of a kernel
    import numba.core.compiler as compiler
    real = compiler.compile_extra

    def compile_extra(*args, **kwargs):
        compiler.compile_extra = real
        interrupt()
        return real(*args, **kwargs)
    compiler.compile_extra = compile_extra

import minigrad
x = minigrad.Tensor(np.array([[-1.0, 2.0, 0.5]], np.float32), requires_grad=True)
try:
    x.softmax()
    first = "finished"
except KeyboardInterrupt:
    first = "interrupted"
y = (x.softmax() * x.relu()).sum()
y.backward()
from minigrad.ops.softmax import softmax
print(json.dumps({"first": first, "value": float(y.item()), "grad": x.grad.tolist(),
                  "kernel": softmax.runs_kernel((x.data,))}))
"""


def run(moment, where, cache):
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache), "MINIGRAD_KERNELS": "numba"}
    # subprocess.run kills the child if it outlives the timeout
    result = subprocess.run([sys.executable, "-c", PROGRAM, moment, where], cwd=REPO, env=env,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("moment, where", [("import", "numba.core.typing.templates"),
                                           ("import", "llvmlite.binding"),
                                           ("import", "minigrad.kernels.softmax_kernels"),
                                           ("compile", "")],
                         ids=["numba importing", "llvmlite importing", "a kernel file registering",
                              "the first compile"])
def test_the_engine_survives_ctrl_c_during_the_first_kernel_call(moment, where, tmp_path):
    got = run(moment, where, tmp_path)
    assert got["first"] == "interrupted"
    assert got["kernel"]        # the kernels loaded on the second call, not left off
    x = np.array([-1.0, 2.0, 0.5])
    p = np.exp(x) / np.exp(x).sum()
    r = np.maximum(x, 0)
    np.testing.assert_allclose(got["value"], (p * r).sum(), rtol=1e-6)
    # d/dx sum(p * r) = p * (r - sum(p * r)) + p * (x > 0)
    np.testing.assert_allclose(got["grad"], [p * (r - (p * r).sum()) + p * (x > 0)], rtol=1e-5)
