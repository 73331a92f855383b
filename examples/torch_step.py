"""PyTorch eager's training step on the date model, at any size: the reference of the size benchmark.

    python examples/torch_step.py --d-model 256 --heads 8 --layers 4 --d-ff 1024 --steps 12 --skip 4
    python examples/torch_step.py --compile          # the same step through torch.compile (inductor)

The same model and step as ``dates-train`` (post-norm encoder-decoder, sinusoidal positions,
ReLU feed-forward, 68 tokens, 12 source and 19 target positions, batch 128, cross-entropy
ignoring ``<pad>``, gradient-norm clip 1.0, Adam), written the way a PyTorch user writes it
by hand: one ``nn.Linear`` for the queries, one for keys and values, ``matmul`` / ``softmax`` /
``matmul`` for the attention core. Batches are random days of years 1000-2999, as in training.
Self-contained (torch and numpy only): ``examples/benchmark.py --sizes`` runs it in the Python
given by ``--torch-python``, alternating with minigrad, and reads its last line::

    SUMMARY {"first_step_ms": ..., "median_step_ms": ..., "p10_step_ms": ..., "p90_step_ms": ...,
             "median_step_cpu_ms": ...}   (CPU time of the process: both threads' work, and their waits)

With ``--compile`` the forward pass and the loss go through ``torch.compile`` (the default
inductor backend; AOTAutograd compiles their backward as one joint graph), as a PyTorch user
compiles a model; clipping and Adam stay eager. The first step then holds the compilation
(tens of seconds on two cores with an empty inductor cache, a few with a warm one), so it is
reported apart as ``first_step_ms`` and never enters the steady median. If compiling fails
(no C++ compiler, an unsupported platform), the SUMMARY line is ``{"error": "<why, one line>"}``.
"""
import argparse
import datetime
import json
import math
import statistics
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

SOS, EOS, PAD, VOCAB, SRC_LEN, TGT_LEN = 65, 66, 67, 68, 12, 20
CHARS = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz-, "
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September",
          "October", "November", "December"]
FIRST, LAST = datetime.date(1000, 1, 1).toordinal(), datetime.date(2999, 12, 31).toordinal()


def tokens(text, length):
    ids = [SOS] + [CHARS.index(c) for c in text] + [EOS]
    return ids + [PAD] * (length - len(ids))


def batch(rng, size):
    """(src (size, 12), tgt (size, 20)) of random days: '1845-01-05' -> 'January 5, 1845'."""
    days = [datetime.date.fromordinal(int(o)) for o in rng.integers(FIRST, LAST + 1, size)]
    src = [tokens(d.isoformat(), SRC_LEN) for d in days]
    tgt = [tokens(f"{MONTHS[d.month - 1]} {d.day}, {d.year}", TGT_LEN) for d in days]
    return torch.tensor(src), torch.tensor(tgt)


class Attention(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads, self.dk = heads, d // heads
        self.q, self.kv, self.o = nn.Linear(d, d), nn.Linear(d, 2 * d), nn.Linear(d, d)

    def forward(self, x, memory, mask):
        B, Tq, d = x.shape
        q = self.q(x).view(B, Tq, self.heads, self.dk).transpose(1, 2)                 # (B, h, Tq, dk)
        k, v = self.kv(memory).view(B, -1, 2, self.heads, self.dk).permute(2, 0, 3, 1, 4)
        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(self.dk) + mask     # (B, h, Tq, Tk)
        out = torch.matmul(torch.softmax(scores, dim=-1), v)                          # (B, h, Tq, dk)
        return self.o(out.transpose(1, 2).reshape(B, Tq, d))


class Layer(nn.Module):
    """Post-norm: self-attention, then (decoder) cross-attention, then the feed-forward."""

    def __init__(self, d, heads, d_ff, cross):
        super().__init__()
        self.attentions = nn.ModuleList(Attention(d, heads) for _ in range(2 if cross else 1))
        self.norms = nn.ModuleList(nn.LayerNorm(d) for _ in range(3 if cross else 2))
        self.ff1, self.ff2 = nn.Linear(d, d_ff), nn.Linear(d_ff, d)

    def forward(self, x, self_mask, memory=None, memory_mask=None):
        x = self.norms[0](x + self.attentions[0](x, x, self_mask))
        if memory is not None:
            x = self.norms[1](x + self.attentions[1](x, memory, memory_mask))
        return self.norms[-1](x + self.ff2(F.relu(self.ff1(x))))


class Seq2Seq(nn.Module):
    def __init__(self, d, heads, layers, d_ff):
        super().__init__()
        self.d = d
        self.src_embed, self.tgt_embed = nn.Embedding(VOCAB, d), nn.Embedding(VOCAB, d)
        position = torch.arange(64.0)[:, None] * torch.exp(torch.arange(0, d, 2) * (-math.log(10000.0) / d))
        self.register_buffer("pe", torch.stack([position.sin(), position.cos()], -1).reshape(64, d))
        self.encoder = nn.ModuleList(Layer(d, heads, d_ff, False) for _ in range(layers))
        self.decoder = nn.ModuleList(Layer(d, heads, d_ff, True) for _ in range(layers))
        self.out = nn.Linear(d, VOCAB)

    def forward(self, src, tgt_in):
        pad = torch.zeros(src.shape).masked_fill(src == PAD, float("-inf"))[:, None, None, :]
        T = tgt_in.shape[1]
        causal = torch.zeros(T, T).masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
        x = self.src_embed(src) * math.sqrt(self.d) + self.pe[:src.shape[1]]
        for layer in self.encoder:
            x = layer(x, pad)
        y = self.tgt_embed(tgt_in) * math.sqrt(self.d) + self.pe[:T]
        for layer in self.decoder:
            y = layer(y, causal, x, pad)
        return self.out(y)


def cross_entropy_loss(model, src, tgt):
    """The step's forward: logits of the shifted target, cross-entropy ignoring ``<pad>``."""
    logits = model(src, tgt[:, :-1])
    return F.cross_entropy(logits.reshape(-1, VOCAB), tgt[:, 1:].reshape(-1), ignore_index=PAD)


def one_line(error):
    """An exception as one line: its type and the first line of its message."""
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0] if lines else ''}"[:300]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--d-model", type=int, default=64)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--layers", type=int, default=2, help="encoder layers, and as many decoder layers")
    parser.add_argument("--d-ff", type=int, default=256)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--skip", type=int, default=10, help="first steps left out of the median")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--compile", action="store_true",
                        help="run the forward and the loss through torch.compile (inductor; its backward is "
                             "compiled too); the first step holds the compilation, tens of seconds on two cores "
                             "with an empty cache, and is reported apart from the steady median")
    args = parser.parse_args(argv)
    if args.d_model % args.heads or min(args.d_model, args.heads, args.layers, args.d_ff, args.batch) < 1 \
            or not 0 <= args.skip < args.steps:
        print("error: need positive sizes, d-model divisible by heads and 0 <= skip < steps", file=sys.stderr)
        return 2
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    model = Seq2Seq(args.d_model, args.heads, args.layers, args.d_ff)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9)
    forward = torch.compile(cross_entropy_loss) if args.compile else cross_entropy_loss
    times, cpu_times = [], []
    for step in range(args.steps):
        src, tgt = batch(rng, args.batch)                  # outside the timed step, as in dates-train
        start, cpu_start = time.perf_counter(), time.process_time()
        try:
            loss = forward(model, src, tgt)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
        except Exception as error:                         # only compiling can fail here: say why, in one line
            if not (args.compile and step == 0):
                raise
            print("SUMMARY " + json.dumps({"error": f"torch.compile failed: {one_line(error)}"}), flush=True)
            return 1
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        loss.item()
        times.append(time.perf_counter() - start)
        cpu_times.append(time.process_time() - cpu_start)
    warm = times[args.skip:]
    print("SUMMARY " + json.dumps({
        "first_step_ms": round(1e3 * times[0], 3), "median_step_ms": round(1e3 * statistics.median(warm), 3),
        "p10_step_ms": round(1e3 * float(np.percentile(warm, 10)), 3),
        "p90_step_ms": round(1e3 * float(np.percentile(warm, 90)), 3),
        "median_step_cpu_ms": round(1e3 * statistics.median(cpu_times[args.skip:]), 3), "steps": args.steps,
        "threads": torch.get_num_threads(), "torch": torch.__version__, "compiled": args.compile}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
