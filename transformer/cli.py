"""Command-line entry points (installed as console scripts, also run by examples/):

    dates-train       train the model; prints final held-out accuracy, steps, wall time
    dates-translate   1996-09-08 -> September 8, 1996 from a checkpoint
    dates-evaluate    exact-match and per-character accuracy on the held-out set

Bad input (not a date, 2023-02-30, a missing or corrupt checkpoint) gets a
one-line message and exit code 2, never a traceback.
"""
import argparse
import json
import sys
import time

import numpy as np

DEFAULT_CHECKPOINT = "runs/dates/model.npz"


def _fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


# ------------------------------------------------------------------- train
def train_main(argv=None) -> int:
    from .config import ModelConfig
    from .training import TrainConfig, Trainer
    from .checkpoint import CheckpointError

    p = argparse.ArgumentParser(prog="dates-train", description="Train the date-rewriting Transformer on minigrad.")
    m, t = ModelConfig(), TrainConfig()
    p.add_argument("--out", default="runs/dates", help="folder for the checkpoint and training log (default: %(default)s)")
    p.add_argument("--resume", metavar="CHECKPOINT", help="continue the run saved in this checkpoint")
    p.add_argument("--steps", type=int, default=None,
                   help=f"total optimizer steps (default: {t.steps}); with --resume a new total, and the "
                        "cosine schedule is stretched to it (keep it unchanged to finish a run exactly "
                        "as if uninterrupted)")
    p.add_argument("--batch-size", type=int, default=t.batch_size)
    p.add_argument("--lr", type=float, default=t.lr, help="peak learning rate after warm-up")
    p.add_argument("--warmup", type=int, default=t.warmup)
    p.add_argument("--schedule", choices=["cosine", "inverse_sqrt", "constant"], default=t.schedule)
    p.add_argument("--clip", type=float, default=t.clip, help="max gradient norm, 0 for none")
    p.add_argument("--label-smoothing", type=float, default=t.label_smoothing)
    p.add_argument("--seed", type=int, default=t.seed)
    p.add_argument("--eval-every", type=int, default=t.eval_every)
    p.add_argument("--d-model", type=int, default=m.d_model)
    p.add_argument("--heads", type=int, default=m.num_heads)
    p.add_argument("--layers", type=int, default=m.num_encoder_layers, help="encoder and decoder layers each")
    p.add_argument("--d-ff", type=int, default=m.d_ff)
    p.add_argument("--dropout", type=float, default=m.dropout)
    p.add_argument("--positional", choices=["sinusoidal", "learned"], default=m.positional)
    p.add_argument("--no-progress", action="store_true", help="no progress bar (logs only)")
    args = p.parse_args(argv)

    wall_start = time.perf_counter()
    try:
        if args.resume:
            trainer = Trainer.resume(args.resume, out_dir=args.out, steps=args.steps)
            print(f"resuming {args.resume} at step {trainer.step} of {trainer.config.steps}")
        else:
            model_config = ModelConfig(d_model=args.d_model, num_heads=args.heads, num_encoder_layers=args.layers,
                                       num_decoder_layers=args.layers, d_ff=args.d_ff, dropout=args.dropout,
                                       positional=args.positional)
            train_config = TrainConfig(steps=t.steps if args.steps is None else args.steps, batch_size=args.batch_size, lr=args.lr,
                                       warmup=args.warmup, schedule=args.schedule, clip=args.clip,
                                       label_smoothing=args.label_smoothing, seed=args.seed,
                                       eval_every=args.eval_every)
            trainer = Trainer(model_config, train_config, out_dir=args.out)
    except CheckpointError as error:
        return _fail(str(error))
    except ValueError as error:
        return _fail(f"bad setting: {error}")

    mc = trainer.model_config
    print(f"model: d_model {mc.d_model}, {mc.num_heads} heads, {mc.num_encoder_layers}+{mc.num_decoder_layers} "
          f"layers, d_ff {mc.d_ff}, {trainer.model.num_parameters():,} parameters")
    print("compiling kernels on the first step (cached for later runs)...")
    summary = trainer.run(progress=not args.no_progress)
    result = trainer.evaluate(show_wrong=5)
    wall = time.perf_counter() - wall_start
    print(f"\nheld-out exact match {result['exact_match']:.2%} ({result['count']} dates never seen in training), "
          f"per-character {result['char_accuracy']:.2%}")
    median = summary["median_step_ms"]
    print(f"steps {summary['steps']}, wall time {wall:.1f} s" + (f", median step {median:.1f} ms" if median else ""))
    for source, predicted, expected in result["wrong"]:
        print(f"  wrong: {source} -> {predicted!r} (expected {expected!r})")
    model = trainer.model
    from .decoding import greedy_decode
    from .dates import decode_batch, encode_batch, SRC_LEN
    examples = ["1845-01-05", "1996-09-08", "2023-02-28", "1000-01-01", "2999-12-31"]
    for source, output in zip(examples, decode_batch(greedy_decode(model, encode_batch(examples, SRC_LEN)))):
        print(f"  {source} -> {output}")
    print(f"checkpoint: {summary['checkpoint']}\ntraining log: {summary['log']}")
    return 0


# --------------------------------------------------------------- translate
def translate_main(argv=None) -> int:
    from .checkpoint import CheckpointError
    from .dates import DateError, SRC_LEN, decode_batch, encode_batch, parse_iso_date
    from .decoding import beam_search, greedy_decode, sample_decode
    from .training import load_model

    p = argparse.ArgumentParser(prog="dates-translate",
                                description="Rewrite ISO dates (YYYY-MM-DD) as 'Month D, YYYY' with a trained model.")
    p.add_argument("dates", nargs="*", help="dates to rewrite; none: read one per line from stdin")
    p.add_argument("--checkpoint", default=DEFAULT_CHECKPOINT, help="default: %(default)s")
    group = p.add_mutually_exclusive_group()
    group.add_argument("--beam", type=int, metavar="K", help="beam search with K beams")
    group.add_argument("--temperature", type=float, metavar="T", help="sample with temperature T (0 = greedy)")
    p.add_argument("--top-k", type=int, help="with --temperature: sample among the K most likely tokens")
    p.add_argument("--seed", type=int, default=None, help="random seed for sampling")
    args = p.parse_args(argv)

    texts = args.dates or [line.strip() for line in sys.stdin if line.strip()]
    if not texts:
        return _fail("no dates given: pass them as arguments or one per line on stdin")
    try:
        for text in texts:
            parse_iso_date(text)
        if args.beam is not None and args.beam < 1:
            return _fail(f"--beam must be at least 1, got {args.beam}")
        if args.temperature is not None and args.temperature < 0:
            return _fail(f"--temperature must be >= 0, got {args.temperature}")
        if args.top_k is not None and args.top_k < 1:
            return _fail(f"--top-k must be at least 1, got {args.top_k}")
        if args.top_k is not None and args.temperature is None:
            return _fail("--top-k only applies to sampling: add --temperature T")
        model = load_model(args.checkpoint)
    except (DateError, CheckpointError) as error:
        return _fail(str(error))
    src = encode_batch(texts, SRC_LEN)
    if args.beam:
        ids = beam_search(model, src, args.beam)
    elif args.temperature is not None:
        ids = sample_decode(model, src, args.temperature, args.top_k, np.random.default_rng(args.seed))
    else:
        ids = greedy_decode(model, src)
    for text, output in zip(texts, decode_batch(ids)):
        print(f"{text} -> {output}")
    return 0


# ---------------------------------------------------------------- evaluate
def evaluate_main(argv=None) -> int:
    from .checkpoint import CheckpointError
    from .dates import DateDataset
    from .evaluation import evaluate
    from .training import load_model

    p = argparse.ArgumentParser(prog="dates-evaluate", description="Accuracy on the 2,000 held-out dates.")
    p.add_argument("--checkpoint", default=DEFAULT_CHECKPOINT, help="default: %(default)s")
    p.add_argument("--beam", type=int, default=1, metavar="K", help="beam width (1 = greedy)")
    p.add_argument("--show", type=int, default=5, metavar="N", help="show up to N wrong outputs")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    args = p.parse_args(argv)
    try:
        model = load_model(args.checkpoint)
    except CheckpointError as error:
        return _fail(str(error))
    if args.beam < 1:
        return _fail(f"--beam must be at least 1, got {args.beam}")
    data = DateDataset()
    start = time.perf_counter()
    result = evaluate(model, data.test_src, data.test_tgt, beam_size=args.beam, show_wrong=args.show)
    seconds = time.perf_counter() - start
    if args.json:
        print(json.dumps({**result, "seconds": seconds}))
        return 0
    print(f"held-out dates: {result['count']}")
    print(f"exact match:    {result['exact_match']:.2%}")
    print(f"per character:  {result['char_accuracy']:.2%}")
    print(f"decoding time:  {seconds:.2f} s ({result['count'] / seconds:.0f} dates/s)")
    for source, predicted, expected in result["wrong"]:
        print(f"  wrong: {source} -> {predicted!r} (expected {expected!r})")
    if not result["wrong"]:
        print("  no wrong outputs")
    return 0
