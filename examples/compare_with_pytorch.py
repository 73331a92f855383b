"""minigrad side by side with PyTorch: the same Transformer, the same weights, the same batches.

    pip install torch --index-url https://download.pytorch.org/whl/cpu && pip install -e ".[compare]"
    python examples/compare_with_pytorch.py                      # check, then train both, quiet and busy
    python examples/compare_with_pytorch.py --checkpoint runs/dates/model.npz --check-only
    python examples/compare_with_pytorch.py --step-summary --steps 60 --timing-skip 20
    python examples/compare_with_pytorch.py --exported runs/dates/model.safetensors   # dates-export's file

1. **Check.** The date model is built from PyTorch's own layers (``TorchDates``: nn.Embedding,
   nn.TransformerEncoder/Decoder of post-norm ReLU layers, nn.Linear; the parameter names that
   ``dates-export`` writes) and loaded with a minigrad model's weights (a checkpoint's, or a fresh
   model's). Both run one training batch; the script prints, layer by layer, the largest
   difference of the outputs and of the loss's gradients with respect to them, then of every
   parameter's gradient. In float32 they agree to 1e-5 of the values' size
   (``float32_agreement.py``: 1e-5 x max(1, largest |value|) for each stage and gradient).
2. **Train.** From the same initial weights, both train on the same batches with the same
   schedule and stopping rule as ``dates-train`` (Adam 0.9/0.98, warm-up to 2e-3, clip 1.0;
   cool-down when four training batches are 98% right, stop when the held-out dates are 99.9%
   right at its end), alternating step by step so both see the same machine. Held-out exact
   match is measured every ``--eval-every`` steps on the product's own 2,000 held-out dates
   (``transformer.tasks.dates.held_out_ordinals()``: never trained on). Printed per framework: step
   times (median, p10..p90), loss, the first step and training seconds at which held-out exact
   match reached 99.9%, and where the rule stopped. ``--load 0,1`` repeats the race with that many
   busy processes (pure-Python spinners this script starts and stops, as ``benchmark_load.py``).
3. **Step summary** (``--step-summary``, neither 1 nor 2): the PyTorch model alone trains
   ``--steps`` steps at ``dates-train``'s config from a fresh minigrad model's weights, then
   greedy-decodes the 2,000 held-out dates three times; one line ``SUMMARY {json}`` gives the
   step median, p10 and p90 (the first ``--timing-skip`` steps left out) and the decode rate.
   ``examples/benchmark_load.py`` runs this as its PyTorch row (``benchmark.py --torch-python``).

4. **Load an export** (``--exported FILE``): ``load_exported`` builds ``TorchDates`` from the
   config in ``dates-export``'s file and loads the weights with ``safetensors.torch.load_file``
   and ``load_state_dict``, as a PyTorch user would, then translates a few dates with PyTorch
   alone (with ``--checkpoint``, also with minigrad, and the two must agree).

PyTorch is only needed here (``[compare]`` extra); minigrad never imports it. Dropout is refused
(the two frameworks draw different masks), so the comparison is of deterministic models.
"""
import argparse
import math
import os
import statistics
import sys
import time

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
sys.path.insert(0, os.path.join(REPO, "examples"))

try:
    import torch
except ImportError:
    sys.exit("error: this example needs PyTorch; a CPU build: pip install torch --index-url "
             "https://download.pytorch.org/whl/cpu && pip install -e '.[compare]'")

import minigrad  # noqa: E402
from minigrad import optim  # noqa: E402
from minigrad import functional as F  # noqa: E402
from transformer.parallel.threads import TrainingThreads  # noqa: E402
from transformer.models.attention import causal_mask, padding_mask  # noqa: E402
from transformer.models.config import ModelConfig  # noqa: E402
from transformer.tasks.dates import EOS, PAD, SOS, SRC_LEN, DateDataset, decode_batch, encode_batch  # noqa: E402
from transformer.decoding import MAX_OUTPUT, greedy_decode  # noqa: E402
from transformer.training.evaluation import evaluate  # noqa: E402
from transformer.commands.export import torch_names  # noqa: E402
from transformer.models.encoder_decoder import Transformer  # noqa: E402
from transformer.models.decoder_only import sinusoidal_encoding  # noqa: E402
from transformer.training.stopping import TargetStop  # noqa: E402
from transformer.training.trainer import TrainConfig  # noqa: E402
from transformer.files.trained_model import load_model
from transformer.training.dates import teacher_forced_exact_match

from float32_agreement import TOLERANCE, Difference, verdict  # noqa: E402


# --------------------------------------------------------------- the PyTorch model
class TorchDates(torch.nn.Module):
    """minigrad's date Transformer (transformer/models/encoder_decoder.py) from PyTorch's layers.

    post-norm layers (norm_first=False), ReLU, no final norm after the stacks, embeddings times
    sqrt(d_model) plus sinusoidal (a buffer) or learned positions. PyTorch's boolean attention
    masks mean True = masked out, the opposite of minigrad's True = may attend.
    """

    def __init__(self, config: ModelConfig):
        super().__init__()
        d, nn = config.d_model, torch.nn
        self.config = config
        self.src_embed = nn.Embedding(config.vocab_size, d)
        self.tgt_embed = nn.Embedding(config.vocab_size, d)
        if config.positional == "learned":
            self.src_positions = nn.Embedding(config.max_len, d)
            self.tgt_positions = nn.Embedding(config.max_len, d)
        else:
            table = torch.from_numpy(sinusoidal_encoding(config.max_len, d).astype(np.float32))
            self.register_buffer("table", table, persistent=False)
        layer = dict(d_model=d, nhead=config.num_heads, dim_feedforward=config.d_ff, dropout=config.dropout,
                     activation="relu", batch_first=True, norm_first=False, layer_norm_eps=1e-5)
        self.encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(**layer), config.num_encoder_layers,
                                             enable_nested_tensor=False)
        self.decoder = nn.TransformerDecoder(nn.TransformerDecoderLayer(**layer), config.num_decoder_layers)
        self.output = nn.Linear(d, config.vocab_size)

    def embed(self, ids, side):
        x = getattr(self, f"{side}_embed")(ids) * math.sqrt(self.config.d_model)
        if self.config.positional == "learned":
            return x + getattr(self, f"{side}_positions").weight[:ids.shape[1]]
        return x + self.table[:ids.shape[1]]

    def layer_outputs(self, src, tgt_in):
        """{name: tensor} for every stage (as ``minigrad_layer_outputs``), logits last."""
        src_pad, tgt_pad = src == PAD, tgt_in == PAD                     # True = ignore this key
        future = ~torch.tril(torch.ones(tgt_in.shape[1], tgt_in.shape[1], dtype=torch.bool))
        outs = {"source embedding + positions": self.embed(src, "src")}
        x = outs["source embedding + positions"]
        for i, layer in enumerate(self.encoder.layers):
            x = outs[f"encoder layer {i}"] = layer(x, src_key_padding_mask=src_pad)
        memory = x
        y = outs["target embedding + positions"] = self.embed(tgt_in, "tgt")
        for i, layer in enumerate(self.decoder.layers):
            y = outs[f"decoder layer {i}"] = layer(y, memory, tgt_mask=future, tgt_key_padding_mask=tgt_pad,
                                                   memory_key_padding_mask=src_pad)
        outs["logits"] = self.output(y)
        return outs

    def forward(self, src, tgt_in):
        return self.layer_outputs(src, tgt_in)["logits"]

    @torch.no_grad()
    def greedy(self, src):
        """Greedy decoding as transformer/decoding.py does it (ids after <eos> are <pad>),
        re-running the decoder on the whole prefix (PyTorch's layers keep no key/value cache)."""
        src_pad = src == PAD
        memory = self.encoder(self.embed(src, "src"), src_key_padding_mask=src_pad)
        out = torch.full((len(src), MAX_OUTPUT), PAD, dtype=torch.long)
        done = torch.zeros(len(src), dtype=torch.bool)
        for t in range(MAX_OUTPUT):
            prefix = torch.cat([torch.full((len(src), 1), SOS, dtype=torch.long), out[:, :t]], dim=1)
            future = ~torch.tril(torch.ones(t + 1, t + 1, dtype=torch.bool))
            y = self.decoder(self.embed(prefix, "tgt"), memory, tgt_mask=future,
                             memory_key_padding_mask=src_pad)
            logits = self.output(y[:, -1])
            logits[:, [SOS, PAD]] = -math.inf
            tokens = torch.where(done, torch.full_like(done, PAD, dtype=torch.long), logits.argmax(-1))
            out[:, t] = tokens
            done |= tokens == EOS
            if bool(done.all()):
                break
        return out.numpy()


def torch_copy(model) -> TorchDates:
    """A TorchDates holding exactly ``model``'s weights (``dates-export``'s names and layout)."""
    twin = TorchDates(model.config)
    state = {name: torch.from_numpy(array) for name, array in torch_names(model.state_dict(), model.config).items()}
    twin.load_state_dict(state, strict=True)        # every name, every shape, or an error
    return twin


def load_exported(path) -> TorchDates:
    """``dates-export``'s safetensors file -> the PyTorch model, ready to run."""
    import json
    from safetensors import safe_open
    from safetensors.torch import load_file
    with safe_open(path, framework="pt") as f:
        config = ModelConfig.from_dict(json.loads(f.metadata()["model_config"]))
    model = TorchDates(config)
    model.load_state_dict(load_file(path))       # every name and shape, or an error
    return model.eval()


EXAMPLE_DATES = ["1845-01-05", "1996-09-08", "2023-02-28", "1000-01-01", "2999-12-31"]


def translate_exported(path, checkpoint=None) -> int:
    """--exported: translate a few dates with the exported model in PyTorch (and with minigrad's
    checkpoint, when given: the outputs must be equal)."""
    twin = load_exported(path)
    src = encode_batch(EXAMPLE_DATES, SRC_LEN)
    theirs = decode_batch(twin.greedy(torch.from_numpy(src)))
    ours = decode_batch(greedy_decode(load_model(checkpoint), src)) if checkpoint else theirs
    print(f"PyTorch, with the weights of {path}:")
    for date, output, mine in zip(EXAMPLE_DATES, theirs, ours):
        print(f"  {date} -> {output}" + ("" if output == mine else f"   (minigrad: {mine})"))
    return 0 if theirs == ours else 1


def exact_match(predicted, tgt):
    """Held-out exact match as transformer/training/evaluation.py counts it (up to and including <eos>)."""
    expected = tgt[:, 1:]
    width = min(predicted.shape[1], expected.shape[1])
    counted = expected[:, :width] != PAD
    return float(((predicted[:, :width] == expected[:, :width]) | ~counted).all(axis=1).mean())


# ------------------------------------------------------------------------ 1. check
def minigrad_layer_outputs(model, src, tgt_in):
    """The forward pass of Transformer.forward, stage by stage, every stage keeping its gradient."""
    outs = {}
    src_mask = padding_mask(src, PAD)
    x = outs["source embedding + positions"] = model.embed(src, model.src_embed, model.src_positions)
    for i, layer in enumerate(model.encoder.layers):
        x = outs[f"encoder layer {i}"] = layer(x, src_mask)
    memory = x
    self_mask = causal_mask(tgt_in.shape[1])[None, None] & padding_mask(tgt_in, PAD)
    y = outs["target embedding + positions"] = model.embed(tgt_in, model.tgt_embed, model.tgt_positions)
    for i, layer in enumerate(model.decoder.layers):
        y = outs[f"decoder layer {i}"] = layer(y, memory, self_mask, src_mask)
    outs["logits"] = model.output(y)
    for tensor in outs.values():
        tensor.retain_grad()
    return outs


def check(model, src, tgt, label_smoothing):
    """Print the layer-by-layer table; returns whether every difference is within its float32 target."""
    twin = torch_copy(model).train()
    model.train()
    model.zero_grad()
    tgt_in, targets = tgt[:, :-1], tgt[:, 1:]
    ours = minigrad_layer_outputs(model, src, tgt_in)
    loss = F.cross_entropy(ours["logits"], targets, ignore_index=PAD, label_smoothing=label_smoothing)
    loss.backward()
    theirs = twin.layer_outputs(torch.from_numpy(src), torch.from_numpy(tgt_in))
    for tensor in theirs.values():
        tensor.retain_grad()
    torch_loss = torch.nn.functional.cross_entropy(
        theirs["logits"].reshape(-1, model.config.vocab_size), torch.from_numpy(targets).reshape(-1),
        ignore_index=PAD, label_smoothing=label_smoothing)
    torch_loss.backward()
    whole = model(src, tgt_in).data                         # the model's own forward, for the record
    rows = [("loss", abs(loss.item() - torch_loss.item()), None, abs(loss.item()))]
    differences = [Difference("loss", rows[0][1], rows[0][3])]
    for name, tensor in ours.items():
        theirs_value, theirs_grad = theirs[name].detach().numpy(), theirs[name].grad.numpy()
        rows.append((name, np.abs(tensor.data - theirs_value).max(),
                     np.abs(tensor.grad - theirs_grad).max(), np.abs(theirs_value).max()))
        differences += [Difference(name, float(rows[-1][1]), float(rows[-1][3])),
                        Difference(f"d loss / d {name}", float(rows[-1][2]), float(np.abs(theirs_grad).max()))]
    print(f"\n1. one batch of {len(src)} through both (float32, label smoothing {label_smoothing:g}); "
          f"loss minigrad {loss.item():.6f}, PyTorch {torch_loss.item():.6f}")
    print(f"   (Transformer.forward's logits equal the stage-by-stage ones: "
          f"max |diff| {np.abs(whole - ours['logits'].data).max():.1e})")
    print(f"   {'stage':32} {'max |output diff|':>18} {'max |grad diff|':>16} {'max |output|':>13}")
    for name, out_diff, grad_diff, scale in rows:
        grad_text = "" if grad_diff is None else f"{grad_diff:.2e}"
        print(f"   {name:32} {out_diff:18.2e} {grad_text:>16} {scale:13.3g}")
    ours_grads = torch_names({name: p.grad for name, p in model.named_parameters()}, model.config)
    print(f"\n   parameter gradients ({len(ours_grads)} PyTorch tensors; minigrad's mapped as dates-export maps "
          "the weights):")
    print(f"   {'parameter':52} {'shape':>12} {'max |grad diff|':>16} {'max |grad|':>11}")
    for name, torch_param in twin.named_parameters():
        diff = float(np.abs(ours_grads[name] - torch_param.grad.numpy()).max())
        differences.append(Difference(f"the gradient of {name}", diff, float(torch_param.grad.abs().max())))
        print(f"   {name:52} {str(tuple(torch_param.shape)):>12} {diff:16.2e} {differences[-1].scale:11.3g}")
    within, line = verdict(differences)
    print(f"   largest difference anywhere: {max(d.difference for d in differences):.2e}; {line}")
    model.zero_grad()
    return within


# ------------------------------------------------------------------------ 2. train
class Side:
    """One framework's training run: optimizer, schedule, stopping rule and records."""

    def __init__(self, name, config, step_fn, decode_fn, set_lr):
        self.name, self.config = name, config
        self.step_fn, self.decode_fn, self.set_lr = step_fn, decode_fn, set_lr
        self.lr_holder = type("LR", (), {"lr": 0.0})()       # what the schedule sets; copied to the optimizer
        self.schedule = optim.WarmupPlateauCooldown(self.lr_holder, config.lr, config.warmup, config.cooldown,
                                                    config.steps, min_lr=config.final_lr_fraction * config.lr)
        self.stopper = TargetStop(config.target_accuracy, config.cooldown, config.cooldown_at)
        self.step, self.seconds, self.times, self.losses = 0, 0.0, [], []
        self.evals, self.reached, self.done, self.cooldown_step = [], None, False, None

    def train_one(self, src, tgt, eval_every):
        self.set_lr(self.lr_holder.lr)
        start = time.perf_counter()
        loss, logits = self.step_fn(src, tgt)
        took = time.perf_counter() - start
        self.schedule.step()
        self.step += 1
        self.seconds += took
        self.times.append(took)
        self.losses.append(loss)
        if self.stopper.record_batch(self.step, teacher_forced_exact_match(logits, tgt[:, 1:])):
            self.schedule.start_cooldown()
            self.cooldown_step = self.step
        if eval_every and self.step % eval_every == 0 or self.stopper.evaluation_due(self.step) \
                or self.step == self.config.steps:
            match = self.decode_fn()
            self.evals.append((self.step, match))
            if match >= self.config.target_accuracy and self.reached is None:
                self.reached = (self.step, self.seconds)
            self.done = self.stopper.record_evaluation(self.step, match, self.seconds) == "confirmed"
        self.done = self.done or self.step >= self.config.steps

    def summary(self):
        ms = np.array(self.times[5:] or self.times) * 1e3         # the first steps warm caches up
        p10, p90 = np.percentile(ms, [10, 90])
        reached = (f"step {self.reached[0]}, {self.reached[1]:.1f} s" if self.reached else "not reached")
        return (f"{statistics.median(ms):.1f} ms ({p10:.1f}..{p90:.1f})", f"{self.losses[0]:.3f} -> "
                f"{np.mean(self.losses[-10:]):.4f}", reached,
                f"{self.cooldown_step or '-'} / {self.step} ({self.seconds:.1f} s)",
                f"{self.evals[-1][1]:.2%}" if self.evals else "-")


def minigrad_side(model, config, data):
    adam = optim.Adam(model.parameters(), lr=config.lr, betas=config.betas, eps=config.eps)
    blas_threads = TrainingThreads()          # dates-train's BLAS thread policy (transformer/parallel/threads.py)

    def step(src, tgt):
        model.train()
        with blas_threads.step():
            return _minigrad_step(src, tgt)

    def _minigrad_step(src, tgt):
        logits = model(src, tgt[:, :-1])
        loss = F.cross_entropy(logits, tgt[:, 1:], ignore_index=PAD, label_smoothing=config.label_smoothing)
        adam.zero_grad()
        loss.backward()
        optim.clip_grad_norm(adam.params, config.clip)
        adam.step()
        return loss.item(), logits.data

    def decode():
        return evaluate(model.eval(), data.test_src, data.test_tgt, show_wrong=0)["exact_match"]

    def set_lr(lr):
        adam.lr = lr

    return Side("minigrad", config, step, decode, set_lr)


def torch_side(twin, config, data):
    adam = torch.optim.Adam(twin.parameters(), lr=config.lr, betas=config.betas, eps=config.eps)
    test_src = torch.from_numpy(data.test_src)

    def step(src, tgt):
        twin.train()
        src, tgt = torch.from_numpy(src), torch.from_numpy(tgt)
        logits = twin(src, tgt[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt[:, 1:].reshape(-1),
                                                 ignore_index=PAD, label_smoothing=config.label_smoothing)
        adam.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(twin.parameters(), config.clip)
        adam.step()
        return loss.item(), logits.detach().numpy()

    def decode():
        twin.eval()
        predicted = np.concatenate([twin.greedy(test_src[i:i + 1000]) for i in range(0, len(test_src), 1000)])
        return exact_match(predicted, data.test_tgt)

    def set_lr(lr):
        for group in adam.param_groups:
            group["lr"] = lr

    return Side("PyTorch", config, step, decode, set_lr)


def race(model_config, config, data, seed, eval_every, busy, time_limit):
    """Train both from the same weights on the same batches, alternating steps; print the table."""
    from benchmark_load import BusyProcesses

    minigrad.manual_seed(seed)
    model = Transformer(model_config)
    twin = torch_copy(model)
    sides = [minigrad_side(model, config, data), torch_side(twin, config, data)]
    batches = np.random.default_rng(seed)
    with BusyProcesses(busy):
        wall = time.perf_counter()
        step = 0
        while not all(side.done for side in sides):
            src, tgt = data.sample_batch(batches, config.batch_size)
            order = sides if step % 2 == 0 else sides[::-1]          # neither always goes first
            for side in order:
                if not side.done:
                    side.train_one(src, tgt, eval_every)
                    if side.seconds > time_limit:
                        side.done = True
            step += 1
        wall = time.perf_counter() - wall
    print(f"\n2. training from the same weights on the same batches, {busy} busy process(es), "
          f"torch threads {torch.get_num_threads()}, MINIGRAD_BLAS_THREADS "
          f"{os.environ.get('MINIGRAD_BLAS_THREADS', 'auto')} ({wall:.0f} s wall)")
    print(f"   {'':9} {'step median (p10..p90)':>24} {'loss first -> last 10':>22} "
          f"{'held-out >= 99.9% at':>22} {'cool-down / stop (training s)':>30} {'last held-out':>14}")
    for side in sides:
        cells = side.summary()
        print(f"   {side.name:9} {cells[0]:>24} {cells[1]:>22} {cells[2]:>22} {cells[3]:>30} {cells[4]:>14}")
        if side.seconds > time_limit:
            print(f"   ({side.name} stopped at the --time-limit of {time_limit:g} s of training)")
    for side in sides:
        print(f"   {side.name} held-out exact match by step: "
              + ", ".join(f"{s}: {m:.2%}" for s, m in side.evals))


# ------------------------------------------------------------------ 3. step summary
def step_summary(model, config, data, steps, timing_skip, decode_repeats=3):
    """The PyTorch twin of ``model`` trained alone for ``steps`` steps; its timings as a dict.

    A step is forward, backward, clip and Adam on one batch (``torch_side``), as minigrad's
    step in the benchmarks; sampling the batch is not timed. Decoding is timed after training,
    ``decode_repeats`` times over the held-out dates, and its median counts (a model this early
    in training rarely writes <eos> early, so each decode runs about all 19 positions)."""
    side = torch_side(torch_copy(model), config, data)
    batches = np.random.default_rng(config.seed)
    while side.step < steps and not side.done:
        src, tgt = data.sample_batch(batches, config.batch_size)
        side.train_one(src, tgt, eval_every=0)
    timed = np.array(side.times[timing_skip:] or side.times) * 1e3
    decode_seconds, match = [], None
    for _ in range(decode_repeats):
        start = time.perf_counter()
        match = side.decode_fn()
        decode_seconds.append(time.perf_counter() - start)
    decode_s = statistics.median(decode_seconds)
    return {"median_step_ms": round(float(np.median(timed)), 3),
            "p10_step_ms": round(float(np.percentile(timed, 10)), 3),
            "p90_step_ms": round(float(np.percentile(timed, 90)), 3),
            "steps_run": side.step, "timed_steps": len(timed), "train_s": round(side.seconds, 2),
            "loss_first": round(side.losses[0], 4), "loss_last": round(side.losses[-1], 4),
            "held_out_exact_match": match, "decode_2000_s": round(decode_s, 4),
            "decode_dates_per_s": round(len(data.test_src) / decode_s, 1),
            "threads": torch.get_num_threads(), "torch": torch.__version__,
            "config": {"batch_size": config.batch_size, "lr": config.lr, "warmup": config.warmup,
                       "schedule": config.schedule, "betas": list(config.betas), "eps": config.eps,
                       "clip": config.clip, "label_smoothing": config.label_smoothing, "seed": config.seed}}


def _parser():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                     epilog=f"exit status 1 when a difference in the check exceeds {TOLERANCE:g} x "
                                            "max(1, the largest |value| compared)")
    parser.add_argument("--checkpoint", help="check this dates-train checkpoint's weights (default: a fresh "
                                             "model of --seed); training always starts from a fresh model")
    parser.add_argument("--seed", type=int, default=0, help="initial weights and batches (default: %(default)s)")
    parser.add_argument("--check-only", action="store_true", help="only the layer-by-layer check")
    parser.add_argument("--exported", metavar="FILE",
                        help="load dates-export's .safetensors into the PyTorch model and translate a few dates "
                             "(with --checkpoint: minigrad's outputs must be the same); nothing else")
    parser.add_argument("--check-batch", type=int, default=32, help="batch size of the check (default: %(default)s)")
    parser.add_argument("--label-smoothing", type=float, default=0.0, help="in the check and in training (default: %(default)s)")
    parser.add_argument("--eval-every", type=int, default=25, help="held-out evaluation every N steps (default: %(default)s)")
    parser.add_argument("--max-steps", type=int, default=600, help="at most this many steps per framework (default: %(default)s)")
    parser.add_argument("--load", default="0,1", help="busy background processes, one race per value (default: %(default)s)")
    parser.add_argument("--time-limit", type=float, default=300.0,
                        help="stop a framework after this many seconds of training (default: %(default)s)")
    parser.add_argument("--torch-threads", type=int, default=None,
                        help="torch.set_num_threads (default: PyTorch's own, one per core)")
    summary = parser.add_argument_group("--step-summary: time the PyTorch model alone (no check, no race)")
    summary.add_argument("--step-summary", action="store_true",
                         help="train PyTorch's model --steps steps, decode the held-out dates, print SUMMARY {json}")
    summary.add_argument("--steps", type=int, default=60, help="steps to train (default: %(default)s)")
    summary.add_argument("--timing-skip", type=int, default=20,
                         help="first steps left out of the step times (default: %(default)s)")
    return parser


def main(argv=None):
    parser = _parser()
    args = parser.parse_args(argv)
    if args.step_summary and not 0 <= args.timing_skip < args.steps:
        parser.error(f"--step-summary needs 0 <= --timing-skip < --steps, got {args.timing_skip} and {args.steps}")
    if args.torch_threads:
        torch.set_num_threads(args.torch_threads)
    if args.exported:
        return translate_exported(args.exported, args.checkpoint)
    data = DateDataset()
    if args.step_summary:
        return _print_step_summary(args, data)
    print(f"minigrad from {os.path.dirname(minigrad.__file__)}; torch {torch.__version__}, "
          f"numpy {np.__version__}; {os.cpu_count()} CPUs; held-out: {len(data.test_src)} dates of "
          "transformer.tasks.dates.held_out_ordinals()")
    if args.checkpoint:
        model = load_model(args.checkpoint)
        print(f"weights: {args.checkpoint}")
    else:
        minigrad.manual_seed(args.seed)
        model = Transformer(ModelConfig())
        print(f"weights: a fresh minigrad model (seed {args.seed})")
    if model.config.dropout:
        sys.exit("error: the model has dropout; the frameworks draw different masks, so compare a model "
                 "without dropout")
    src, tgt = data.sample_batch(np.random.default_rng(args.seed), args.check_batch)
    within = check(model, src, tgt, args.label_smoothing)
    if args.check_only:
        return 0 if within else 1
    config = TrainConfig(seed=args.seed, steps=args.max_steps, label_smoothing=args.label_smoothing)
    print(f"\ntraining: batch {config.batch_size}, Adam {config.betas}, eps {config.eps:g}, warm-up "
          f"{config.warmup} to {config.lr:g}, clip {config.clip:g}, cool-down {config.cooldown} steps when 4 "
          f"batches are {config.cooldown_at:.0%} right, stop at {config.target_accuracy:.1%} held-out "
          f"(dates-train's defaults)")
    for busy in [int(n) for n in args.load.split(",") if n.strip()]:
        race(model.config, config, data, args.seed, args.eval_every, busy, args.time_limit)
    return 0 if within else 1


def _print_step_summary(args, data):
    """--step-summary: one header line, then the SUMMARY line benchmark_load.py parses."""
    import json
    minigrad.manual_seed(args.seed)
    config = TrainConfig(seed=args.seed, steps=max(args.max_steps, args.steps + 1),
                         label_smoothing=args.label_smoothing)
    print(f"PyTorch {torch.__version__}, {torch.get_num_threads()} threads: {args.steps} steps at dates-train's "
          f"config from a fresh model of seed {args.seed}, then greedy decoding of {len(data.test_src)} dates",
          flush=True)
    print("SUMMARY " + json.dumps(step_summary(Transformer(ModelConfig()), config, data, args.steps,
                                               args.timing_skip)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
