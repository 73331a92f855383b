"""Print one traced attention step of a tiny decoder-only date model as straight-line Python
(docs/tracing.md).

    python examples/print_trace.py

The batch is prepared outside the traced piece, as a trainer prepares it: the joined
sequences and which tokens are scored are the piece's arguments (``inputs[0]``, ``inputs[1]``).
"""
import numpy as np

import minigrad
from minigrad.trace import trace
from transformer.models import build_model
from transformer.models.config import DecoderOnlyConfig
from transformer.tasks.dates import PAD, PROMPT_LEN, DateDataset, join_for_decoder_only


def traced_step_code() -> str:
    minigrad.manual_seed(0)
    model = build_model(DecoderOnlyConfig(d_model=8, num_heads=2, d_ff=16, num_layers=1))

    def piece(sequences, answer):
        loss, _, _ = model.next_token_loss(sequences, answer)
        loss.backward()
        return loss
    traced = trace(piece, names=model.named_parameters())
    sequences = join_for_decoder_only(*DateDataset().sample_batch(np.random.default_rng(0), 2))
    traced(sequences, (np.arange(sequences.shape[1]) >= PROMPT_LEN) & (sequences != PAD))
    return traced.code


if __name__ == "__main__":
    print(traced_step_code())
