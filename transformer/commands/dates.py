"""Command-line entry points (installed as console scripts, also run by examples/):

    dates-train       train the model; prints final held-out accuracy, steps, wall time
    dates-translate   1996-09-08 -> September 8, 1996 from a checkpoint
    dates-evaluate    exact-match and per-character accuracy on the held-out set

Bad input (not a date, 2023-02-30, a missing or corrupt checkpoint, a number that makes
no sense or is too large to honour, an unwritable --out) gets a one-line message and exit
code 2, never a traceback. Ctrl-C in dates-train saves the last completed step and exits
with 130. Every command goes through ``console.console_script``: a closed stdout (`| head -1`)
ends quietly with 141 (dates-train saves its last step first), a full one (`>/dev/full`) with
141 and one line, Ctrl-C anywhere with 130 and one line. dates-translate reads stdin as a
stream, in batches, and reports a bad line without stopping. What dates-train shares with
next-word-train (its options, run folder, lock, MPI job, profile) is ``training_command.py``;
what dates-translate shares with next-word-complete, ``decoding_command.py``.
"""
import json
import sys
import time

import numpy as np

from transformer.commands.console import EXIT_OUTPUT_LOST, Parser, console_script, fail, path_argument
from transformer.commands.decoding_command import STDIN_BATCH, decoding_kernels, read_stdin
from transformer.commands.training_command import (TrainingCommand, add_model_options, add_optimizer_options,
                                                   add_run_options, add_stopping_options, finite, new_run_folder,
                                                   run_training, train_values)

DEFAULT_CHECKPOINT = "runs/dates/model.npz"
DEFAULT_OUT = "runs/dates"
DEFAULT_CHECKPOINT_HELP = (f"the trained model (default: the newest finished run's, {DEFAULT_CHECKPOINT} or "
                           f"{DEFAULT_OUT}-N/model.npz; one line names it when there are several)")
EXIT_BROKEN_PIPE = EXIT_OUTPUT_LOST      # the name older code and tests use


# ------------------------------------------------------------------- train
TRAIN_DESCRIPTION = """\
Train the date-rewriting Transformer on minigrad, until it is done.

When to stop: every training batch's teacher-forced exact match is free to compute
(the logits exist already). When the last 4 batches together reach --cooldown-at
(98%), the learning rate cools down over --cooldown steps (50) from its peak (--lr,
2e-3, reached after --warmup steps) to a tenth of it; at the end of that cool-down the
2,000 held-out dates are decoded, and if their exact match reaches --target-accuracy
(99.9%) the run stops there. No single evaluation at the peak rate can end a run; if
the settled model falls short, training goes on at the low rate and the next hit needs
the batches at the target itself. --max-steps bounds the run; --target-accuracy 0
trains every step. How the rule was chosen: docs/early_stopping.md.

Ctrl-C saves the last completed step; --resume continues it exactly."""


def _train_parser():
    from transformer.models.config import ModelConfig
    from transformer.training.trainer import TrainConfig

    p = Parser(prog="dates-train", description=TRAIN_DESCRIPTION)
    t = TrainConfig()
    add_run_options(p.add_argument_group("the run"), t, DEFAULT_OUT)
    add_stopping_options(p.add_argument_group("when to stop"), t)
    add_optimizer_options(p.add_argument_group("optimizer and data"), t)
    add_model_options(p.add_argument_group("the model (a new run; --resume keeps the checkpoint's)"), ModelConfig())
    return p

def _new_model_config(args):
    from transformer.models.config import DecoderOnlyConfig, ModelConfig

    shape = dict(d_model=args.d_model, num_heads=args.heads, d_ff=args.d_ff, dropout=args.dropout,
                 positional=args.positional)
    if args.architecture == "decoder-only":
        return DecoderOnlyConfig(num_layers=args.layers, **shape)
    return ModelConfig(num_encoder_layers=args.layers, num_decoder_layers=args.layers, **shape)


def _new_trainer(args, out_dir):
    from transformer.commands.limits import check_model_size
    from transformer.training.trainer import TrainConfig
    from transformer.training.dates import DateTrainer

    model_config = _new_model_config(args)
    train_config = TrainConfig(**train_values(args))   # every number checked before any work
    check_model_size(model_config, train_config.batch_size)
    return lambda: DateTrainer(model_config, train_config, out_dir=out_dir)


def _train_out_dir(args) -> str:
    return new_run_folder(args, DEFAULT_OUT)


@console_script
def train_main(argv=None) -> int:
    from transformer.parallel.ranks import silence_other_ranks
    from transformer.training.dates import DateTrainer

    silence_other_ranks()                         # in an MPI job rank 0 speaks for all
    args = _train_parser().parse_args(argv)
    return run_training(args, TrainingCommand("dates-train", DateTrainer, _train_out_dir, _new_trainer,
                                              lambda *summary: _print_summary(*summary)))


def _print_summary(summary, trainer, wall):
    print(f"\nheld-out exact match {summary['exact_match']:.2%} ({summary['count']} dates never seen in "
          f"training), per-character {summary['char_accuracy']:.2%}")
    target = summary["target"]
    if target is not None and summary["reached_step"] is not None:
        state = "confirmed" if summary["target_confirmed"] else "not yet confirmed"
        print(f"target {target:.2%} reached at step {summary['reached_step']} after "
              f"{summary['reached_seconds']:.1f} s of training ({state}; learning-rate cool-down from "
              f"step {summary['cooldown_step']})")
    elif target is not None:
        print(f"target {target:.2%} not reached in {summary['steps']} steps (raise --max-steps, or resume)")
    median = summary["median_step_ms"]
    print(f"steps {summary['steps']}, wall time {wall:.1f} s" + (f", median step {median:.1f} ms" if median else ""))
    for source, predicted, expected in summary["wrong"]:
        print(f"  wrong: {source} -> {predicted!r} (expected {expected!r})")
    from transformer.tasks.dates import SRC_LEN, decode_batch, encode_batch
    from transformer.decoding import greedy_decode
    examples = ["1845-01-05", "1996-09-08", "2023-02-28", "1000-01-01", "2999-12-31"]
    for source, output in zip(examples, decode_batch(greedy_decode(trainer.model, encode_batch(examples, SRC_LEN)))):
        print(f"  {source} -> {output}")
    print(f"checkpoint: {summary['checkpoint']}\ntraining log: {summary['log']}")


# --------------------------------------------------------------- translate
def _check_beam(beam):
    from transformer.decoding import MAX_BEAM
    if beam is not None and beam < 1:
        return fail(f"--beam must be at least 1, got {beam}")
    if beam is not None and beam > MAX_BEAM:
        return fail(f"--beam must be at most {MAX_BEAM}, got {beam} (each beam costs as much memory "
                    "and time as decoding every date once more)")
    return None



@console_script
def translate_main(argv=None) -> int:
    from transformer.files.checkpoint import CheckpointError
    from transformer.tasks.dates import DateError, parse_iso_date
    from transformer.files.run_dir import default_checkpoint
    from transformer.files.trained_model import load_model

    args = _translate_parser().parse_args(argv)
    if not args.dates and sys.stdin is None:
        return fail("stdin is closed and no dates were given: pass them as arguments or one per line on stdin")
    try:
        for text in args.dates:
            parse_iso_date(text)
        bad_option = _check_decoding_options(args)
        if bad_option is not None:
            return bad_option
        model = load_model(args.checkpoint or default_checkpoint())
    except (DateError, CheckpointError) as error:
        return fail(str(error))
    translate = _translator(model, args)
    if args.dates:
        translate(args.dates)
        return 0
    return _translate_stdin(translate)


def _translate_parser():
    p = Parser(prog="dates-translate",
                description="Rewrite ISO dates (YYYY-MM-DD) as 'Month D, YYYY' with a trained model.",
                epilog="Dates given as arguments are all checked before any is translated. Dates on stdin are "
                       f"read and translated in batches of {STDIN_BATCH} as they come: a bad line gets one "
                       "'error: stdin line N: ...' line on stderr and the others are still translated. Exit "
                       "codes: 0 all translated, 2 a bad argument, checkpoint or input line (the good lines "
                       "were still translated), 130 Ctrl-C, 141 stdout closed or full.")
    p.add_argument("dates", nargs="*", help="dates to rewrite; none: read one per line from stdin")
    p.add_argument("--checkpoint", default=None, type=path_argument,
                   help=DEFAULT_CHECKPOINT_HELP)
    group = p.add_mutually_exclusive_group()
    group.add_argument("--beam", type=int, metavar="K", help="beam search with K beams (default: greedy)")
    group.add_argument("--temperature", type=finite, metavar="T",
                       help="sample with temperature T, 0 = greedy (default: greedy)")
    p.add_argument("--top-k", type=int, help="with --temperature: sample among the K most likely tokens "
                                             "(default: all)")
    p.add_argument("--seed", type=int, default=None,
                   help="random seed for sampling (default: a fresh one every run)")
    return p


def _check_decoding_options(args):
    """The exit status of the first bad --beam/--temperature/--top-k/--seed, or None if all are fine."""
    bad_beam = _check_beam(args.beam)
    if bad_beam is not None:
        return bad_beam
    if args.temperature is not None and args.temperature < 0:
        return fail(f"--temperature must be >= 0, got {args.temperature}")
    if args.top_k is not None and args.top_k < 1:
        return fail(f"--top-k must be at least 1, got {args.top_k}")
    if args.top_k is not None and args.temperature is None:
        return fail("--top-k only applies to sampling: add --temperature T")
    if args.seed is not None and args.seed < 0:
        return fail(f"--seed must be >= 0, got {args.seed}")
    return None


def _translate_stdin(translate) -> int:
    from transformer.tasks.dates import DateError, parse_iso_date
    return read_stdin(translate, parse_iso_date, DateError, "dates")


def _translator(model, args):
    """texts -> their translations printed, with the decoding the options ask for."""
    from transformer.tasks.dates import SRC_LEN, decode_batch, encode_batch
    from transformer.decoding import beam_search, greedy_decode, sample_decode
    rng = np.random.default_rng(args.seed)

    rows = max(1, STDIN_BATCH // (args.beam or 1))    # a beam search decodes --beam copies of each row

    def translate(texts):
        for start in range(0, len(texts), rows):
            chunk = texts[start:start + rows]
            src = encode_batch(chunk, SRC_LEN)
            with decoding_kernels():
                if args.beam:
                    ids = beam_search(model, src, args.beam)
                elif args.temperature is not None:
                    ids = sample_decode(model, src, args.temperature, args.top_k, rng)
                else:
                    ids = greedy_decode(model, src)
            for text, output in zip(chunk, decode_batch(ids)):
                print(f"{text} -> {output}")
            sys.stdout.flush()
    return translate


# ---------------------------------------------------------------- evaluate
@console_script
def evaluate_main(argv=None) -> int:
    from transformer.files.checkpoint import CheckpointError
    from transformer.tasks.dates import DateDataset
    from transformer.training.evaluation import evaluate
    from transformer.files.run_dir import default_checkpoint
    from transformer.files.trained_model import load_model

    p = Parser(prog="dates-evaluate", description="Accuracy on the 2,000 held-out dates.")
    p.add_argument("--checkpoint", default=None, type=path_argument,
                   help=DEFAULT_CHECKPOINT_HELP)
    p.add_argument("--beam", type=int, default=1, metavar="K", help="beam width (1 = greedy)")
    p.add_argument("--show", type=int, default=5, metavar="N", help="show up to N wrong outputs")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    args = p.parse_args(argv)
    bad_beam = _check_beam(args.beam)
    if bad_beam is not None:
        return bad_beam
    if args.show < 0:
        return fail(f"--show must be >= 0, got {args.show}")
    try:
        model = load_model(args.checkpoint or default_checkpoint())
    except CheckpointError as error:
        return fail(str(error))
    data = DateDataset()
    start = time.perf_counter()
    with decoding_kernels():
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
