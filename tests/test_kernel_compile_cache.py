"""kernels.cache_is_cold(): true exactly when the model's kernels would compile on their next
first call; a forced vector width never uses the cache; and compile_training_kernels()
compiles exactly what a training step runs (the registered kernels of its stages)."""
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
from minigrad.ops import attention, elementwise, nn_ops
attention.attention(f(2, 3, 8), f(2, 4, 8), f(2, 4, 8), np.ones((1,), bool), 2, 8, (0, 0, 0))
nn_ops.layer_norm(f(3, 8), f(8), f(8), 1e-5)
elementwise.relu(f(3, 8))
print("cold after:", kernels.cache_is_cold(training=False), "training:", kernels.cache_is_cold())
"""

# compile_training_kernels(), then a real training step of a small model: every kernel the
# step runs must already have its code (one signature each, and no compile after the first).
TRAINING_AFTER_PRECOMPILE = """
from minigrad import kernels
from minigrad.kernels.compile_cache import compiled_functions
from transformer.models.encoder_decoder import ModelConfig
from transformer.training.trainer import TrainConfig
from transformer.training.dates import DateTrainer
print("cold before:", kernels.cache_is_cold())
kernels.compile_training_kernels()
print("cold after:", kernels.cache_is_cold())
trainer = DateTrainer(model_config=ModelConfig(d_model=16, num_heads=2, num_encoder_layers=1, num_decoder_layers=1,
                                           d_ff=32), train_config=TrainConfig(steps=2, batch_size=8, eval_every=0,
                                                                              checkpoint_every=0))
trainer.train_step()
for kernel in compiled_functions():
    misses = sum(kernel.stats.cache_misses.values())
    print(kernel.__name__, "signatures", len(kernel.signatures), "compiled here", misses)
"""


def run(script, cache_dir, **env):
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], cwd=REPO, capture_output=True,
                            text=True, timeout=600, env={**os.environ, "NUMBA_CACHE_DIR": cache_dir, **env})
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.mark.slow
def test_cache_is_cold_follows_the_disk_cache():
    with tempfile.TemporaryDirectory() as cache_dir:
        out = run(FORWARD_CALLS, cache_dir)
        assert "cold before: True" in out
        assert "cold after: False training: True" in out  # the backward kernels were never called
        assert "cold before: False" in run(FORWARD_CALLS, cache_dir)  # a new process finds the compiled code


@pytest.mark.slow
def test_a_forced_vector_width_compiles_in_memory_and_leaves_the_cache_alone():
    with tempfile.TemporaryDirectory() as cache_dir:
        out = run(FORWARD_CALLS, cache_dir, MINIGRAD_VECTOR_BYTES="16")
        assert "cold before: True lanes: 4" in out and "cold after: False" in out  # compiled in this process ...
        assert os.listdir(cache_dir) == []                                        # ... and nothing written
        assert "cold before: True lanes: 4" in run(FORWARD_CALLS, cache_dir, MINIGRAD_VECTOR_BYTES="16")


@pytest.mark.slow
def test_compile_training_kernels_compiles_what_a_training_step_runs():
    with tempfile.TemporaryDirectory() as cache_dir:
        out = run(TRAINING_AFTER_PRECOMPILE, cache_dir)
        assert "cold before: True" in out and "cold after: False" in out
        lines = [line.split() for line in out.splitlines() if "signatures" in line]
        assert len(lines) == 9
        for name, _, signatures, _, _, compiled in lines:
            assert signatures == "1", out
            # the forward kernels compile in this process; the child compiled the others
            forward = name in ("_attention_kernel", "_layer_norm_kernel", "relu_loop")
            assert compiled == ("1" if forward else "0"), out


SOFTMAX_CALL = """
import numpy as np
from minigrad.kernels import softmax_kernels
softmax_kernels.softmax(np.ones((2, 3), np.float32))
print("compiled here:", sum(softmax_kernels._softmax_kernel.stats.cache_misses.values()))
"""


@pytest.mark.slow
def test_a_cache_written_for_other_kernel_sources_is_not_used():
    """Numba checks only a kernel's own file: a cache from another version of simd.py (whose
    helpers every kernel inlines) must not be loaded, so the package's sources are recorded."""
    with tempfile.TemporaryDirectory() as cache_dir:
        assert "compiled here: 1" in run(SOFTMAX_CALL, cache_dir)
        assert "compiled here: 0" in run(SOFTMAX_CALL, cache_dir)      # same sources: loaded
        (record,) = [os.path.join(root, name) for root, _, names in os.walk(cache_dir)
                     for name in names if name == "minigrad-kernel-sources"]
        with open(record, "w") as file:
            file.write("the hash of other sources\n")
        assert "compiled here: 1" in run(SOFTMAX_CALL, cache_dir)      # other sources: compiled again
        assert "compiled here: 0" in run(SOFTMAX_CALL, cache_dir)
