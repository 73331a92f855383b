"""Print one traced attention step of a tiny date model as straight-line Python (docs/tracing.md).

    python examples/print_trace.py
"""
import numpy as np

import minigrad
from minigrad.trace import trace
from transformer.models import build_model
from transformer.models.config import DecoderOnlyConfig
from transformer.tasks.dates import DateDataset
from transformer.training.dates import teacher_forced


def traced_step_code() -> str:
    minigrad.manual_seed(0)
    model = build_model(DecoderOnlyConfig(d_model=8, num_heads=2, d_ff=16, num_layers=1))

    def piece(src, tgt):
        loss, _, _ = teacher_forced(model, src, tgt)
        loss.backward()
        return loss
    traced = trace(piece, names=model.named_parameters())
    traced(*DateDataset().sample_batch(np.random.default_rng(0), 2))
    return traced.code


if __name__ == "__main__":
    print(traced_step_code())
