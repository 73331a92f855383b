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
stream, in batches, and reports a bad line without stopping.
"""
import argparse
import json
import math
import os
import sys
import time
from dataclasses import dataclass

import numpy as np

from transformer.commands.console import (EXIT_INTERRUPTED, EXIT_OUTPUT_LOST, EXIT_USAGE, console_script,
                                          path_argument, sigterm_as_ctrl_c)
from transformer.commands.console import Parser as _Parser
from transformer.commands.console import fail as _fail
from transformer.commands.limits import at_most

DEFAULT_CHECKPOINT = "runs/dates/model.npz"
DEFAULT_OUT = "runs/dates"
DEFAULT_CHECKPOINT_HELP = (f"the trained model (default: the newest finished run's, {DEFAULT_CHECKPOINT} or "
                           f"{DEFAULT_OUT}-N/model.npz; one line names it when there are several)")
EXIT_BROKEN_PIPE = EXIT_OUTPUT_LOST      # the name older code and tests use
COMPILE_SECONDS = 4         # a cold cache's compile before the first step, on two cores (README, Results)


def _finite(text: str) -> float:
    """argparse type: a finite float ('nan' and 'inf' are refused with the usual usage error)."""
    value = float(text)
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {text!r}")
    return value


def _compile_if_cold(seconds: int):
    """When the training kernels' Numba cache is cold: say so in one line, then compile them
    on both cores before the first step (so the progress bar's rate counts training only)."""
    from minigrad import kernels
    if kernels.cache_is_cold(training=True):
        print(f"compiling kernels, first run only: ~{seconds} s", file=sys.stderr, flush=True)
        kernels.compile_training_kernels()


def _decoding_kernels():
    """The kernel backend for a command that only decodes: the numpy twins.

    Decoding runs on small arrays (one new position per step), where the kernels are
    no faster (README, speed table), while loading them from Numba's cache costs ~0.3 s
    of start-up and compiling them, on a cold cache, seconds.
    """
    from minigrad import kernels
    return kernels.use_backend("numpy")


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


def _blas_threads(text: str):
    """argparse type: 'auto' or a thread count >= 1."""
    from transformer.parallel.threads import blas_setting
    try:
        return blas_setting(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error).split(": ", 1)[-1]) from None


def _train_parser():
    from transformer.models.config import ModelConfig
    from transformer.training.trainer import SCHEDULES, TrainConfig

    p = _Parser(prog="dates-train", description=TRAIN_DESCRIPTION)
    t = TrainConfig()
    _run_options(p.add_argument_group("the run"), t)
    _stopping_options(p.add_argument_group("when to stop"), t)
    _optimizer_options(p.add_argument_group("optimizer and data"), t, SCHEDULES)
    _model_options(p.add_argument_group("the model (a new run; --resume keeps the checkpoint's)"), ModelConfig())
    return p


def _run_options(p, t):
    p.add_argument("--out", default=None,
                   help=f"folder for the checkpoint and training log (default: {DEFAULT_OUT}, or {DEFAULT_OUT}-2, "
                        "-3 ... when an earlier run is there; with --resume the checkpoint's folder)")
    p.add_argument("--resume", metavar="CHECKPOINT", type=path_argument,
                   help="continue the run saved in this checkpoint (default: a new run)")
    p.add_argument("--force", action="store_true", help="replace a checkpoint already in the --out folder")
    p.add_argument("--seed", type=int, default=t.seed,
                   help="seeds the initial weights, dropout and the training batches. The same seed repeats the "
                        "same run bit for bit on any machine load: the same losses, the same stopping step, the same "
                        "held-out accuracy (on the same CPU type and numpy/OpenBLAS build, and the same "
                        "--blas-threads count); the seconds vary")
    p.add_argument("--blas-threads", type=_blas_threads, default=None, metavar="N|auto",
                   help="threads of a training step. auto: BLAS on one thread, each batch cut into two fixed "
                        "halves whose forward and backward run on one or two threads, whichever is faster by "
                        "timing; the cut never changes, so neither do the numbers (N = 1 gives the same bits). "
                        "N: BLAS on N "
                        "threads for every step, repeatable for the same N (OpenBLAS's last bits depend on its "
                        "thread count) (default: $MINIGRAD_BLAS_THREADS, else auto)")
    p.add_argument("--pieces", type=int, default=None, metavar="N",
                   help="cut each batch into N fixed pieces whose gradients are added in order: part of the run's "
                        "arithmetic, so another N changes the bits. mpiexec -n P needs P to divide N (docs/mpi.md); "
                        "4 pieces cost about 15%% more a step than 2 on one machine (default: 2; with --resume: "
                        "the run's own)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar (logs only)")
    p.add_argument("--snapshot-every", type=int, default=None, metavar="N",
                   help="record the attention maps of a fixed probe input (every layer, head and kind) at step 0, "
                        "every N steps and at the last step, into attention_snapshots.npz in the run folder; "
                        "dates-explore then shows them with a training-step slider (default: 0 = none; with "
                        "--resume: the run's own setting)")
    p.add_argument("--profile", type=int, default=None, metavar="N",
                   help="run step N (counted from 1, as in the log) inside minigrad.profile() and print its "
                        "table: every op that ran, forward and backward, its calls, time, kernel or numpy "
                        "(default: no profiling)")


def _stopping_options(p, t):
    p.add_argument("--max-steps", "--steps", dest="steps", type=int, default=None,
                   help=f"at most this many optimizer steps in all (default: {t.steps}); with --resume a new "
                        "maximum (keep it unchanged to finish a run exactly as if uninterrupted)")
    p.add_argument("--target-accuracy", type=_finite, default=None,
                   help=f"stop when held-out exact match reaches this fraction at the end of the cool-down "
                        f"(default: {t.target_accuracy}); 0 = never stop early, train --max-steps steps")
    p.add_argument("--cooldown-at", type=_finite, default=t.cooldown_at,
                   help="exact match of the last 4 training batches that starts the cool-down")
    p.add_argument("--cooldown", type=int, default=t.cooldown,
                   help="steps of learning-rate decay once --cooldown-at is reached; the held-out target must "
                        "hold at their end")
    p.add_argument("--eval-every", type=int, default=None,
                   help="also evaluate on every held-out date every N steps, for the log (default: 0 = only "
                        "when the stopping rule asks, and at the end)")


def _optimizer_options(p, t, schedules):
    p.add_argument("--lr", type=_finite, default=t.lr, help="peak learning rate (Adam), reached after warm-up")
    p.add_argument("--warmup", type=int, default=t.warmup, help="steps of linear warm-up from 0 to --lr")
    p.add_argument("--schedule", choices=schedules, default=t.schedule,
                   help="after warm-up. plateau: the peak rate until --cooldown-at, then the cool-down; cosine: "
                        "to 0 at --max-steps; inverse_sqrt; constant")
    p.add_argument("--batch-size", type=at_most("--batch-size"), default=t.batch_size, help="dates per training step")
    p.add_argument("--clip", type=_finite, default=t.clip, help="max global gradient norm, 0 for none")
    p.add_argument("--label-smoothing", type=_finite, default=t.label_smoothing,
                   help="cross-entropy label smoothing, 0 for none")


def _model_options(p, m, architecture=True):
    from transformer.models.config import ARCHITECTURES
    if architecture:
        p.add_argument("--architecture", choices=ARCHITECTURES, default=m.architecture,
                       help="encoder-decoder: the encoder reads the date, the decoder writes the answer; decoder-only: "
                            "one stack of causal self-attention reads the date's characters, <sos>, the answer, and "
                            "predicts each answer token from everything before it (default: %(default)s)")
    p.add_argument("--d-model", type=at_most("--d-model"), default=m.d_model, help="width of embeddings and every layer")
    p.add_argument("--heads", type=at_most("--heads"), default=m.num_heads, help="attention heads (must divide --d-model)")
    p.add_argument("--layers", type=at_most("--layers"), default=m.num_layers if m.architecture == "decoder-only" else m.num_encoder_layers,
                   help="encoder and decoder layers each; decoder-only: its blocks")
    p.add_argument("--d-ff", type=at_most("--d-ff"), default=m.d_ff, help="hidden width of each feed-forward block")
    p.add_argument("--dropout", type=_finite, default=m.dropout,
                   help="dropout on embeddings, sublayers and attention weights (attention then runs op by op)")
    p.add_argument("--positional", choices=["sinusoidal", "learned"], default=m.positional,
                   help="fixed sine/cosine positions or a learned embedding per position")


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


def train_values(args) -> dict:
    """The TrainConfig fields the training options give (steps, target and eval cadence only when given)."""
    values = dict(batch_size=args.batch_size, lr=args.lr, warmup=args.warmup, schedule=args.schedule,
                  cooldown=args.cooldown, cooldown_at=args.cooldown_at, clip=args.clip,
                  label_smoothing=args.label_smoothing, seed=args.seed)
    for name in ("steps", "target_accuracy", "eval_every", "snapshot_every", "pieces"):
        if getattr(args, name) is not None:
            values[name] = getattr(args, name)
    return values


def _train_out_dir(args, default_out=DEFAULT_OUT) -> str:
    """--out; with --resume the checkpoint's folder; else runs/dates, or when a run is already
    there the next free runs/dates-N (said in one line). An explicit --out is never changed."""
    from transformer.files.run_dir import next_free_run_folder
    if args.resume:
        return args.out or os.path.dirname(os.path.abspath(args.resume))
    if args.out is not None:
        return args.out
    folder = next_free_run_folder(default_out)
    if folder != default_out:
        print(f"{default_out} holds an earlier run, so this one trains in {folder} (--out to choose)", flush=True)
    return folder


@dataclass
class TrainingCommand:
    """What one training command brings to ``run_training``, which runs it (dates-train here,
    next-word-train in next_word_cli.py)."""
    name: str                 # the command, for "resume with: NAME --resume ..."
    trainer_class: type       # a Trainer subclass (DateTrainer, NextWordTrainer): resumes a run
    out_dir: object           # args -> the run folder
    new_trainer: object       # (args, out_dir) -> a function that makes a new run's trainer
    print_summary: object     # (summary, trainer, wall seconds) -> prints the end of the run
    compile_seconds: int = COMPILE_SECONDS


def _claim_run_folder(args, out_dir, new_trainer=_new_trainer, writes=True, command="dates-train"):
    """Check the settings and the folder, and lock it (for ``command``, which the lock names):
    -> (lock, make_trainer or None when resuming). A process that does not write (an MPI rank but
    0) only checks the settings."""
    from transformer.files.run_dir import RunFolderError, RunLock, check_writable_folder

    if not out_dir.strip():
        raise RunFolderError("--out is empty: give a folder for the checkpoint and log")
    if args.profile is not None and args.profile < 1:
        raise ValueError(f"--profile must be a step number >= 1, got {args.profile}")
    make_trainer = None if args.resume else new_trainer(args, out_dir)
    if not writes:
        return _NoLock(), make_trainer
    check_writable_folder(out_dir)
    return RunLock(out_dir, command).acquire(), make_trainer


class _NoLock:
    def release(self):
        pass


def _open_trainer(args, out_dir, make_trainer, trainer_class=None, writes=True):
    """The trainer of a new run, or of the resumed one, once the folder may be written."""
    from transformer.files.run_dir import refuse_to_overwrite, remove_stale_temporaries
    from transformer.training.dates import DateTrainer
    trainer_class = trainer_class or DateTrainer

    checkpoint = os.path.join(out_dir, "model.npz")
    resuming_in_place = (args.resume and os.path.exists(args.resume) and os.path.exists(checkpoint)
                         and os.path.samefile(args.resume, checkpoint))
    if writes:
        remove_stale_temporaries(out_dir)
    if writes and not args.force and not resuming_in_place:
        refuse_to_overwrite(out_dir)
    if not args.resume:
        return make_trainer()
    overrides = {k: getattr(args, k) for k in ("target_accuracy", "eval_every", "snapshot_every")
                 if getattr(args, k) is not None}
    trainer = trainer_class.resume(args.resume, out_dir=out_dir, steps=args.steps, **overrides)
    _check_stored_sizes(args.resume, trainer)
    print(f"resuming {args.resume} at step {trainer.step} (at most {trainer.config.steps}), writing to {out_dir}")
    return trainer


def _check_stored_sizes(path, trainer):
    """A resumed run's stored sizes meet the command line's limits: CheckpointError before the first step."""
    from transformer.commands.limits import check_stored_sizes
    from transformer.files.checkpoint import CheckpointError
    try:
        check_stored_sizes(trainer.model_config, trainer.config)
    except ValueError as error:
        raise CheckpointError(f"checkpoint {path} {error}" if str(error).startswith("stores ") else
                              f"checkpoint {path} asks for too much: {error}") from None


def _train_stopped(error, out_dir, command="dates-train") -> int:
    """The one line and exit code of a run that could not finish."""
    from transformer.parallel.ranks import RankLost
    from transformer.training.session import TrainingInterrupted

    if isinstance(error, RankLost):
        print(f"stopped: {error}; {out_dir} keeps its last checkpoint, if any; resume with: {command} --resume "
              f"{os.path.join(out_dir, 'model.npz')}", file=sys.stderr)
        return EXIT_INTERRUPTED
    if isinstance(error, TrainingInterrupted):
        print(f"interrupted at step {error.step}; checkpoint saved to {error.checkpoint}; "
              f"resume with: {command} --resume {error.checkpoint}", file=sys.stderr)
        return EXIT_INTERRUPTED
    if isinstance(error, KeyboardInterrupt):
        print(f"interrupted before a step was saved; {out_dir} keeps its previous checkpoint, if any",
              file=sys.stderr)
        return EXIT_INTERRUPTED
    if isinstance(error, OSError):
        return _fail(f"could not write to {out_dir}: {error.strerror or error}; "
                     "the previous checkpoint there, if any, is intact")
    return _fail(str(error))                      # CheckpointError, RunFolderError


@console_script
def train_main(argv=None) -> int:
    from transformer.parallel.ranks import silence_other_ranks
    from transformer.training.dates import DateTrainer

    silence_other_ranks()                         # in an MPI job rank 0 speaks for all
    args = _train_parser().parse_args(argv)
    return run_training(args, TrainingCommand("dates-train", DateTrainer, _train_out_dir, _new_trainer,
                                              lambda *summary: _print_summary(*summary)))


def run_training(args, command: TrainingCommand) -> int:
    """A training command from its parsed options: claim the run folder, train, print the summary.
    SIGTERM is Ctrl-C throughout (inside the loop too: ``interrupt.GracefulInterrupt``), so it
    is one line and 130 at any moment, never a silent kill."""
    with sigterm_as_ctrl_c():
        return _run_training(args, command)


def _run_training(args, command: TrainingCommand) -> int:
    from transformer.files.checkpoint import CheckpointError
    from transformer.files.run_dir import RunFolderError
    from transformer.parallel.ranks import JobError
    from transformer.training.session import profiler_available

    if args.profile is not None and not profiler_available():
        return _fail("--profile needs minigrad.profile(), which this version of minigrad does not have")
    wall_start = time.perf_counter()
    try:
        job = _mpi_job()
    except JobError as error:
        return _fail(str(error))
    different = job and job.first_difference(_settings_of_the_run(args))
    if different:
        return _fail(f"the processes of this MPI job were started differently: {different}; start every "
                     "rank with the same options and environment")
    writes = job is None or job.writer
    out_dir = command.out_dir(args) if writes else None
    out_dir = out_dir if job is None else job.shared_text(out_dir)     # the folder rank 0 chose
    failed, lock = None, _NoLock()
    try:
        lock, make_trainer = _claim_run_folder(args, out_dir, command.new_trainer, writes, command.name)
    except ValueError as error:
        failed = _fail(f"bad setting: {error}")
    except RunFolderError as error:
        failed = _fail(str(error))
    if not _all_ranks_ready(job, failed is None):   # every rank takes part, the one that failed too
        return failed or EXIT_USAGE               # a rank but 0 ends as rank 0 does, silently
    try:
        trainer = _opened_everywhere(job, lambda: _open_trainer(args, out_dir, make_trainer, command.trainer_class,
                                                                writes))
        if trainer is None:
            return EXIT_USAGE
        if args.profile is not None and not trainer.step < args.profile <= trainer.config.steps:
            return _fail(f"--profile {args.profile} is not a step this run trains (steps {trainer.step + 1} "
                         f"to {trainer.config.steps})")
        _print_model(trainer)
        _compile_if_cold(command.compile_seconds)
        summary = trainer.run(progress=not args.no_progress, profile_step=args.profile,
                              blas_threads=args.blas_threads)
    except BrokenPipeError:
        raise                  # stdout's reader left (`| head`): console_script ends quietly
    except JobError as error:
        return _fail(str(error))
    except (CheckpointError, RunFolderError, KeyboardInterrupt, OSError) as error:
        return _train_stopped(error, out_dir, command.name)
    finally:
        lock.release()
    try:
        command.print_summary(summary, trainer, time.perf_counter() - wall_start)
    except KeyboardInterrupt:
        print(f"interrupted during the summary; the run had finished and is saved in {summary['checkpoint']}",
              file=sys.stderr)
        return EXIT_INTERRUPTED
    return 0


def _mpi_job():
    """The MPI job this process belongs to (``transformer/parallel/ranks.py``), None in a plain run."""
    from transformer.parallel import ranks
    return ranks.job() if ranks.job_size() > 1 else None


def _settings_of_the_run(args) -> dict:
    """What must be the same on every rank of an MPI job for its ranks to train one model: every
    option (by its flag), the BLAS threads it resolves to, the kernel backend and what rounds the floats."""
    from minigrad.accelerated import get_backend
    from transformer.parallel.threads import arithmetic, blas_setting
    settings = {"--" + name.replace("_", "-"): value for name, value in vars(args).items()}
    settings["--blas-threads"] = blas_setting(args.blas_threads)    # $MINIGRAD_BLAS_THREADS when not given
    settings["the kernel backend ($MINIGRAD_KERNELS)"] = get_backend()
    settings["the arithmetic (BLAS build, vector width)"] = arithmetic()
    return settings


def _all_ranks_ready(job, ready: bool = True) -> bool:
    """Whether every process of the job is ``ready`` (this one's word, in a plain run): all go on or all stop."""
    return ready if job is None else job.all_agree(ready)


def _opened_everywhere(job, open_trainer):
    """``open_trainer()`` on every rank; None on every rank if it failed on some rank (which said why:
    a checkpoint that one machine cannot read, a folder rank 0 will not overwrite)."""
    if job is None:
        return open_trainer()
    try:
        trainer, error = open_trainer(), None
    except Exception as failure:           # every rank learns of it before any raises (no rank waits)
        trainer, error = None, failure
    if not job.all_agree(error is None):
        if error is not None:
            raise error
        return None
    return trainer


def _print_model(trainer):
    mc = trainer.model_config
    layers = (f"{mc.num_layers} causal layers" if mc.architecture == "decoder-only"
              else f"{mc.num_encoder_layers}+{mc.num_decoder_layers} layers")
    print(f"model: {mc.architecture}, d_model {mc.d_model}, {mc.num_heads} heads, {layers}, d_ff {mc.d_ff}, "
          f"{trainer.model.num_parameters():,} parameters", flush=True)


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
STDIN_BATCH = 256           # dates decoded together when reading stdin (memory stays bounded)
MAX_LINE = 100              # longest stdin line looked at (a date is 10 characters)


def _check_beam(beam):
    from transformer.decoding import MAX_BEAM
    if beam is not None and beam < 1:
        return _fail(f"--beam must be at least 1, got {beam}")
    if beam is not None and beam > MAX_BEAM:
        return _fail(f"--beam must be at most {MAX_BEAM}, got {beam} (each beam costs as much memory "
                     "and time as decoding every date once more)")
    return None


def _stdin_lines(stream, max_line: int = MAX_LINE, too_long: str = f"longer than {MAX_LINE} characters, not a date"):
    """(line number, text or None, problem or None) for each line of ``stream``, read a line at
    a time whatever its size: a line longer than ``max_line`` (binary garbage, /dev/zero) is
    skipped in chunks and reported as ``too_long``, a line that is not UTF-8 is reported."""
    binary = getattr(stream, "buffer", stream)
    number = 0
    while True:
        line = binary.readline(max_line + 1)
        if not line:
            return
        number += 1
        newline = b"\n" if isinstance(line, bytes) else "\n"
        if len(line) > max_line and not line.endswith(newline):
            while line and not line.endswith(newline):      # skip the rest of the line
                line = binary.readline(1 << 16)
            yield number, None, too_long
            continue
        if isinstance(line, bytes):
            try:
                line = line.decode("utf-8")
            except UnicodeDecodeError:
                yield number, None, "not UTF-8 text, not a date"
                continue
        yield number, line.strip(), None


@console_script
def translate_main(argv=None) -> int:
    from transformer.files.checkpoint import CheckpointError
    from transformer.tasks.dates import DateError, parse_iso_date
    from transformer.files.run_dir import default_checkpoint
    from transformer.files.trained_model import load_model

    args = _translate_parser().parse_args(argv)
    if not args.dates and sys.stdin is None:
        return _fail("stdin is closed and no dates were given: pass them as arguments or one per line on stdin")
    try:
        for text in args.dates:
            parse_iso_date(text)
        bad_option = _check_decoding_options(args)
        if bad_option is not None:
            return bad_option
        model = load_model(args.checkpoint or default_checkpoint())
    except (DateError, CheckpointError) as error:
        return _fail(str(error))
    translate = _translator(model, args)
    if args.dates:
        translate(args.dates)
        return 0
    return _translate_stdin(translate)


def _translate_parser():
    p = _Parser(prog="dates-translate",
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
    group.add_argument("--temperature", type=_finite, metavar="T",
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
        return _fail(f"--temperature must be >= 0, got {args.temperature}")
    if args.top_k is not None and args.top_k < 1:
        return _fail(f"--top-k must be at least 1, got {args.top_k}")
    if args.top_k is not None and args.temperature is None:
        return _fail("--top-k only applies to sampling: add --temperature T")
    if args.seed is not None and args.seed < 0:
        return _fail(f"--seed must be >= 0, got {args.seed}")
    return None


def _translate_stdin(translate) -> int:
    from transformer.tasks.dates import DateError, parse_iso_date
    return read_stdin(translate, parse_iso_date, DateError, "dates")


def read_stdin(handle, check, error_type, what: str, batch_size: int = STDIN_BATCH, max_line: int = MAX_LINE,
               too_long: str = f"longer than {MAX_LINE} characters, not a date") -> int:
    """Read stdin's lines and pass them to ``handle`` in batches as they come (one at a time on a
    terminal); a line ``check`` refuses (raising ``error_type``), or longer than ``max_line``
    (``too_long`` says so), gets one error line on stderr and makes the exit status 2, the others
    are still handled."""
    batch, bad, seen = [], 0, 0
    interactive = sys.stdin.isatty()
    for number, text, problem in _stdin_lines(sys.stdin, max_line, too_long):
        if problem is None and not text:
            continue
        seen += 1
        if problem is None:
            try:
                check(text)
            except error_type as error:
                problem = str(error)
        if problem is not None:
            bad += 1
            print(f"error: stdin line {number}: {problem}", file=sys.stderr, flush=True)
            continue
        batch.append(text)
        if len(batch) == batch_size or interactive:
            handle(batch)
            batch = []
    if batch:
        handle(batch)
    if not seen:
        return _fail(f"no {what} given: pass them as arguments or one per line on stdin")
    return 2 if bad else 0


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
            with _decoding_kernels():
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

    p = _Parser(prog="dates-evaluate", description="Accuracy on the 2,000 held-out dates.")
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
        return _fail(f"--show must be >= 0, got {args.show}")
    try:
        model = load_model(args.checkpoint or default_checkpoint())
    except CheckpointError as error:
        return _fail(str(error))
    data = DateDataset()
    start = time.perf_counter()
    with _decoding_kernels():
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
