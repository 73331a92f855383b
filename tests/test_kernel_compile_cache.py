"""kernels.cache_is_cold(): true exactly when the model's kernels would compile on their next
first call; and a cache written with another vector width is not used (issue 11)."""
import os
import subprocess
import sys
import tempfile
import textwrap

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

FORWARD_CALLS = """
import numpy as np
from minigrad import kernels
f = lambda *shape: np.random.default_rng(0).standard_normal(shape).astype(np.float32)
print("cold before:", kernels.cache_is_cold(training=False), "lanes:", kernels.lanes(f(1)))
kernels.attention(f(2, 3, 8), f(2, 4, 8), f(2, 4, 8), np.ones((1,), bool), 2)
kernels.layer_norm(f(3, 8), f(8), f(8), 1e-5)
kernels.relu(f(3, 8))
print("cold after:", kernels.cache_is_cold(training=False), "training:", kernels.cache_is_cold())
"""


def run(cache_dir, **env):
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(FORWARD_CALLS)], cwd=REPO, capture_output=True,
                            text=True, timeout=600, env={**os.environ, "NUMBA_CACHE_DIR": cache_dir, **env})
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.mark.slow
def test_cache_is_cold_follows_the_disk_cache_and_the_vector_width():
    with tempfile.TemporaryDirectory() as cache_dir:
        env = {"MINIGRAD_VECTOR_BYTES": "32"}
        out = run(cache_dir, **env)
        assert "cold before: True lanes: 8" in out
        assert "cold after: False training: True" in out  # the backward kernels were never called
        assert "cold before: False" in run(cache_dir, **env)  # a new process finds the compiled code
        out = run(cache_dir, MINIGRAD_VECTOR_BYTES="16")  # another width: the old code is not used
        assert "cold before: True lanes: 4" in out and "cold after: False" in out
        assert "cold before: True lanes: 8" in run(cache_dir, **env)

