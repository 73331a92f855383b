"""What every training command shares (dates-train, next-word-train): its options, its run
folder and lock, the MPI job, the profile, and ``run_training``, which runs it.

A command brings a ``TrainingCommand`` (its name, its ``Trainer`` subclass, where a new run
trains, how to make a new run's trainer, how to print the end of a run); ``run_training``
then reads as the life of a run:

    check the options -> join the MPI job, if any -> choose and lock the run folder ->
    open the trainer (new or resumed) -> compile the kernels if cold -> train -> print the summary

Each step is a short function below. Bad input is one line and exit 2, Ctrl-C (or SIGTERM)
saves the last completed step and exits 130 with the line that says how to resume. In an MPI
job every rank takes every step together: the ranks agree before going on, and only rank 0
writes the folder and prints (``transformer/parallel/ranks.py``).
"""
import argparse
import math
import os
import sys
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from transformer.commands.console import EXIT_INTERRUPTED, EXIT_USAGE, fail, path_argument, sigterm_as_ctrl_c
from transformer.commands.limits import at_most

if TYPE_CHECKING:                 # for the annotations only: importing the trainer takes half a second
    from transformer.training.trainer import Trainer

COMPILE_SECONDS = 4         # a cold cache's compile before the first step, on two cores (README, Results)
# what --eager costs, measured (docs/tracing.md, "The trainers trace their step")
EAGER_COST = ("Traced, the default date step took 0.98x the eager one's time (43.5 against 46.1 ms, median of "
              "10 alternating pairs on a quiet 2-vCPU Intel Xeon, 0.85-1.38 by pair).")


# ---------------------------------------------------------------- options
def finite(text: str) -> float:
    """argparse type: a finite float ('nan' and 'inf' are refused with the usual usage error)."""
    value = float(text)
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {text!r}")
    return value


def blas_threads_option(text: str):
    """argparse type: 'auto' or a thread count >= 1."""
    from transformer.parallel.threads import blas_setting
    try:
        return blas_setting(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error).split(": ", 1)[-1]) from None


def add_run_options(p, t, default_out: str):
    """The run's options (folder, resume, seed, threads, pieces, progress, snapshots, profile);
    ``t`` the command's default ``TrainConfig``."""
    p.add_argument("--out", default=None,
                   help=f"folder for the checkpoint and training log (default: {default_out}, or {default_out}-2, "
                        "-3 ... when an earlier run is there; with --resume the checkpoint's folder)")
    p.add_argument("--resume", metavar="CHECKPOINT", type=path_argument,
                   help="continue the run saved in this checkpoint (default: a new run)")
    p.add_argument("--force", action="store_true", help="replace a checkpoint already in the --out folder")
    p.add_argument("--seed", type=int, default=t.seed,
                   help="seeds the initial weights, dropout and the training batches. The same seed repeats the "
                        "same run bit for bit on any machine load: the same losses, the same stopping step, the same "
                        "held-out accuracy (on the same CPU type and numpy/OpenBLAS build, and the same "
                        "--blas-threads count); the seconds vary")
    p.add_argument("--blas-threads", type=blas_threads_option, default=None, metavar="N|auto",
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
    p.add_argument("--eager", action="store_true",
                   help="run each piece of a step through the eager engine (Trainer.piece_backward) instead of "
                        "replaying its recorded program (minigrad.trace, docs/tracing.md); the numbers are the same, "
                        f"bit for bit. {EAGER_COST}")
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


def add_stopping_options(p, t):
    p.add_argument("--max-steps", "--steps", dest="steps", type=int, default=None,
                   help=f"at most this many optimizer steps in all (default: {t.steps}); with --resume a new "
                        "maximum (keep it unchanged to finish a run exactly as if uninterrupted)")
    p.add_argument("--target-accuracy", type=finite, default=None,
                   help=f"stop when held-out exact match reaches this fraction at the end of the cool-down "
                        f"(default: {t.target_accuracy}); 0 = never stop early, train --max-steps steps")
    p.add_argument("--cooldown-at", type=finite, default=t.cooldown_at,
                   help="exact match of the last 4 training batches that starts the cool-down")
    p.add_argument("--cooldown", type=int, default=t.cooldown,
                   help="steps of learning-rate decay once --cooldown-at is reached; the held-out target must "
                        "hold at their end")
    p.add_argument("--eval-every", type=int, default=None,
                   help="also evaluate on every held-out date every N steps, for the log (default: 0 = only "
                        "when the stopping rule asks, and at the end)")


def add_optimizer_options(p, t):
    from transformer.training.trainer import SCHEDULES
    p.add_argument("--lr", type=finite, default=t.lr, help="peak learning rate (Adam), reached after warm-up")
    p.add_argument("--warmup", type=int, default=t.warmup, help="steps of linear warm-up from 0 to --lr")
    p.add_argument("--schedule", choices=SCHEDULES, default=t.schedule,
                   help="after warm-up. plateau: the peak rate until --cooldown-at, then the cool-down; cosine: "
                        "to 0 at --max-steps; inverse_sqrt; constant")
    p.add_argument("--batch-size", type=at_most("--batch-size"), default=t.batch_size, help="dates per training step")
    p.add_argument("--clip", type=finite, default=t.clip, help="max global gradient norm, 0 for none")
    p.add_argument("--label-smoothing", type=finite, default=t.label_smoothing,
                   help="cross-entropy label smoothing, 0 for none")


def add_model_options(p, m, architecture: bool = True):
    """The model's shape; ``m`` the command's default model config, ``architecture``: offer --architecture."""
    from transformer.models.config import ARCHITECTURES
    if architecture:
        p.add_argument("--architecture", choices=ARCHITECTURES, default=m.architecture,
                       help="encoder-decoder: the encoder reads the date, the decoder writes the answer; decoder-only: "
                            "one stack of causal self-attention reads the date's characters, <sos>, the answer, and "
                            "predicts each answer token from everything before it (default: %(default)s)")
    p.add_argument("--d-model", type=at_most("--d-model"), default=m.d_model, help="width of embeddings and every layer")
    p.add_argument("--heads", type=at_most("--heads"), default=m.num_heads, help="attention heads (must divide --d-model)")
    p.add_argument("--layers", type=at_most("--layers"),
                   default=m.num_layers if m.architecture == "decoder-only" else m.num_encoder_layers,
                   help="encoder and decoder layers each; decoder-only: its blocks")
    p.add_argument("--d-ff", type=at_most("--d-ff"), default=m.d_ff, help="hidden width of each feed-forward block")
    p.add_argument("--dropout", type=finite, default=m.dropout,
                   help="dropout on embeddings, sublayers and attention weights (attention then runs op by op)")
    p.add_argument("--positional", choices=["sinusoidal", "learned"], default=m.positional,
                   help="fixed sine/cosine positions or a learned embedding per position")


def reword_help(parser, dest: str, text: str):
    """Reword one shared option's help for a command (the options above are written for dates-train)."""
    next(action for action in parser._actions if action.dest == dest).help = text


def train_values(args) -> dict:
    """The TrainConfig fields the training options give (steps, target and eval cadence only when given)."""
    values = dict(batch_size=args.batch_size, lr=args.lr, warmup=args.warmup, schedule=args.schedule,
                  cooldown=args.cooldown, cooldown_at=args.cooldown_at, clip=args.clip,
                  label_smoothing=args.label_smoothing, seed=args.seed)
    for name in ("steps", "target_accuracy", "eval_every", "snapshot_every", "pieces"):
        if getattr(args, name) is not None:
            values[name] = getattr(args, name)
    return values


# ------------------------------------------------------------- the command
@dataclass
class TrainingCommand:
    """What one training command brings to ``run_training`` (dates-train, next-word-train)."""
    name: str                                             # for "resume with: NAME --resume ..."
    trainer_class: "type[Trainer]"                        # DateTrainer, NextWordTrainer: resumes a run
    out_dir: Callable[[argparse.Namespace], str]          # args -> the run's folder (``new_run_folder``)
    new_trainer: Callable[[argparse.Namespace, str], Callable[[], "Trainer"]]   # (args, folder) -> makes a new run
    print_summary: Callable[[dict, "Trainer", float], None]   # (summary, trainer, wall seconds) -> the end
    compile_seconds: int = COMPILE_SECONDS


class Refused(Exception):
    """A setting, folder or checkpoint the run cannot use: one line and exit 2 (no line when the
    message is empty: another rank of the MPI job refused and said why)."""


def run_training(args, command: TrainingCommand) -> int:
    """A training command from its parsed options: claim the run folder, train, print the summary.
    SIGTERM is Ctrl-C throughout (inside the loop too: ``interrupt.GracefulInterrupt``), so it
    is one line and 130 at any moment, never a silent kill."""
    with sigterm_as_ctrl_c():
        return _run(args, command)


def _run(args, command: TrainingCommand) -> int:
    from transformer.files.checkpoint import CheckpointError
    from transformer.files.run_dir import RunFolderError
    from transformer.parallel.ranks import JobError

    wall_start = time.perf_counter()
    try:
        check_profiler(args)
        job = joined_job(args)
        out_dir = run_folder(job, command, args)
        lock, make_trainer = claimed_everywhere(job, args, out_dir, command)
    except Refused as error:
        return fail(str(error)) if str(error) else EXIT_USAGE
    try:
        trainer = opened_everywhere(job, lambda: open_trainer(args, out_dir, make_trainer, command.trainer_class,
                                                              writes=writes(job)))
        if trainer is None:
            return EXIT_USAGE
        check_profile_step(args, trainer)
        trainer.trace_pieces(not args.eager)
        print_model(trainer)
        compile_if_cold(command.compile_seconds)
        summary = trainer.run(progress=not args.no_progress, profile_step=args.profile,
                              blas_threads=args.blas_threads)
    except BrokenPipeError:
        raise                  # stdout's reader left (`| head`): console_script ends quietly
    except (JobError, Refused) as error:
        return fail(str(error))
    except (CheckpointError, RunFolderError, KeyboardInterrupt, OSError) as error:
        return train_stopped(error, out_dir, command.name)
    finally:
        lock.release()
    return print_the_end(command, summary, trainer, time.perf_counter() - wall_start)


# --------------------------------------------------------------- profile
def check_profiler(args):
    from transformer.training.session import profiler_available
    if args.profile is not None and not profiler_available():
        raise Refused("--profile needs minigrad.profile(), which this version of minigrad does not have")


def check_profile_step(args, trainer: "Trainer"):
    """--profile names a step this run trains (a resumed run starts after its saved step)."""
    if args.profile is not None and not trainer.step < args.profile <= trainer.config.steps:
        raise Refused(f"--profile {args.profile} is not a step this run trains (steps {trainer.step + 1} "
                      f"to {trainer.config.steps})")


# --------------------------------------------------------------- the MPI job
def joined_job(args):
    """The MPI job this process belongs to (``transformer/parallel/ranks.py``), None in a plain run;
    Refused unless every rank was started with the same settings."""
    from transformer.parallel import ranks
    if ranks.job_size() == 1:
        return None
    try:
        job = ranks.job()
    except ranks.JobError as error:
        raise Refused(str(error)) from None
    different = job.first_difference(settings_of_the_run(args))
    if different:
        raise Refused(f"the processes of this MPI job were started differently: {different}; start every "
                      "rank with the same options and environment")
    return job


def writes(job) -> bool:
    """Whether this process writes the run folder: a plain run, or rank 0 of an MPI job."""
    return job is None or job.writer


def settings_of_the_run(args) -> dict:
    """What must be the same on every rank of an MPI job for its ranks to train one model: every
    option (by its flag), the BLAS threads it resolves to, the kernel backend and what rounds the floats."""
    from minigrad.accelerated import get_backend
    from transformer.parallel.threads import arithmetic, blas_setting
    settings = {"--" + name.replace("_", "-"): value for name, value in vars(args).items()}
    settings["--blas-threads"] = blas_setting(args.blas_threads)    # $MINIGRAD_BLAS_THREADS when not given
    settings["the kernel backend ($MINIGRAD_KERNELS)"] = get_backend()
    settings["the arithmetic (BLAS build, vector width)"] = arithmetic()
    return settings


def all_ranks_ready(job, ready: bool = True) -> bool:
    """Whether every process of the job is ``ready`` (this one's word, in a plain run): all go on or all stop."""
    return ready if job is None else job.all_agree(ready)


def opened_everywhere(job, open_trainer: Callable[[], "Trainer"]):
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


# --------------------------------------------------------------- the run folder
def run_folder(job, command: TrainingCommand, args) -> str:
    """The folder this run writes: the command's choice (``new_run_folder``), rank 0's on every rank."""
    out_dir = command.out_dir(args) if writes(job) else None
    return out_dir if job is None else job.shared_text(out_dir)


def new_run_folder(args, default_out: str) -> str:
    """--out; with --resume the checkpoint's folder; else ``default_out``, or when a run is already
    there the next free ``default_out``-N (said in one line). An explicit --out is never changed."""
    from transformer.files.run_dir import next_free_run_folder
    if args.resume:
        return args.out or os.path.dirname(os.path.abspath(args.resume))
    if args.out is not None:
        return args.out
    folder = next_free_run_folder(default_out)
    if folder != default_out:
        print(f"{default_out} holds an earlier run, so this one trains in {folder} (--out to choose)", flush=True)
    return folder


def claimed_everywhere(job, args, out_dir: str, command: TrainingCommand):
    """``claim_run_folder`` on every rank: -> (lock, make_trainer), or Refused on every rank if one refused."""
    from transformer.files.run_dir import RunFolderError
    refusal, claimed = None, (_NoLock(), None)
    try:
        claimed = claim_run_folder(args, out_dir, command.new_trainer, writes(job), command.name)
    except ValueError as error:
        refusal = f"bad setting: {error}"
    except RunFolderError as error:
        refusal = str(error)
    if not all_ranks_ready(job, refusal is None):   # every rank takes part, the one that refused too
        raise Refused(refusal or "")              # a rank but 0 ends as rank 0 does, silently
    return claimed


def claim_run_folder(args, out_dir: str, new_trainer: Callable[[argparse.Namespace, str], Callable[[], "Trainer"]],
                     writes: bool = True, command: str = "dates-train"):
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
    """The lock of a process that does not write the folder (an MPI rank but 0)."""

    def release(self):
        pass


def open_trainer(args, out_dir: str, make_trainer, trainer_class: "type[Trainer]", writes: bool = True) -> "Trainer":
    """The trainer of a new run, or of the resumed one, once the folder may be written."""
    from transformer.files.run_dir import CHECKPOINT_NAME, refuse_to_overwrite, remove_stale_temporaries

    checkpoint = os.path.join(out_dir, CHECKPOINT_NAME)
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
    check_stored_sizes(args.resume, trainer)
    print(f"resuming {args.resume} at step {trainer.step} (at most {trainer.config.steps}), writing to {out_dir}")
    return trainer


def check_stored_sizes(path: str, trainer: "Trainer"):
    """A resumed run's stored sizes meet the command line's limits: CheckpointError before the first step."""
    from transformer.commands.limits import check_stored_sizes as check
    from transformer.files.checkpoint import CheckpointError
    try:
        check(trainer.model_config, trainer.config)
    except ValueError as error:
        raise CheckpointError(f"checkpoint {path} {error}" if str(error).startswith("stores ") else
                              f"checkpoint {path} asks for too much: {error}") from None


# --------------------------------------------------------------- training
def print_model(trainer: "Trainer"):
    mc = trainer.model_config
    layers = (f"{mc.num_layers} causal layers" if mc.architecture == "decoder-only"
              else f"{mc.num_encoder_layers}+{mc.num_decoder_layers} layers")
    print(f"model: {mc.architecture}, d_model {mc.d_model}, {mc.num_heads} heads, {layers}, d_ff {mc.d_ff}, "
          f"{trainer.model.num_parameters():,} parameters", flush=True)


def compile_if_cold(seconds: int):
    """When the training kernels' Numba cache is cold: say so in one line, then compile them
    on both cores before the first step (so the progress bar's rate counts training only)."""
    from minigrad import kernels
    if kernels.cache_is_cold(training=True):
        print(f"compiling kernels, first run only: ~{seconds} s", file=sys.stderr, flush=True)
        kernels.compile_training_kernels()


def train_stopped(error: BaseException, out_dir: str, command: str = "dates-train") -> int:
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
        return fail(f"could not write to {out_dir}: {error.strerror or error}; "
                    "the previous checkpoint there, if any, is intact")
    return fail(str(error))                      # CheckpointError, RunFolderError


def print_the_end(command: TrainingCommand, summary: dict, trainer: "Trainer", wall: float) -> int:
    """The command's summary of a finished run; Ctrl-C during it still says where the run is saved."""
    try:
        command.print_summary(summary, trainer, wall)
    except KeyboardInterrupt:
        print(f"interrupted during the summary; the run had finished and is saved in {summary['checkpoint']}",
              file=sys.stderr)
        return EXIT_INTERRUPTED
    return 0
