"""next-word-train and next-word-complete: next-word prediction on the generated language.

    next-word-train                               # until every held-out kind is at 95%
    next-word-complete "on monday ann went to the bakery and bought a"
    echo "bob gave the cup to ann . now the cup is held by" | next-word-complete

The same conventions as dates-train and dates-translate, whose training run, options and
stdin reading they share (``training_command.py``, ``decoding_command.py``): a progress bar,
atomic checkpoints in a run folder under runs/, Ctrl-C saves the last step and says how to
resume, one-line errors and exit 2, stdin read a line at a time. The language, its sentence kinds and its split: ``transformer/tasks/language.py``.
"""
import os
import sys

import numpy as np

from transformer.commands.console import EXIT_USAGE, Parser, console_script, fail, path_argument
from transformer.commands.decoding_command import decoding_kernels, read_stdin
from transformer.commands.training_command import (TrainingCommand, add_model_options, add_optimizer_options,
                                                   add_run_options, add_stopping_options, finite, new_run_folder,
                                                   reword_help, run_training, train_values)

DEFAULT_OUT = os.path.join("runs", "next-word")
DEFAULT_CHECKPOINT = os.path.join(DEFAULT_OUT, "model.npz")
MAX_PROMPT_LINE = 1 << 16   # longest stdin line looked at: far past any prompt (a prompt is max_len - 2 words at most)
EXAMPLE_PROMPTS = ("on monday ann went to the florist and bought a",
                   "i see a lemon , a ruby and a parrot . i point at the green",
                   "the hen and the dog swap voices . now the hen",
                   "ann gave the cup to bob . now the cup is held by",
                   "ann is at the lake and bob is at the mill . where is bob")

TRAIN_DESCRIPTION = """\
Train the decoder-only model to predict the next word of the generated language, until
it is done: every sentence kind (topic, colour, swap, order, recall) at --target-accuracy
on held-out sentences, whose names, places, things and animals never appeared together in
training. The stopping rule is dates-train's, read on held-out samples: a cool-down once a
few held-out sentences of each kind, scored every step, are nearly all right, then the check
on the whole held-out set.

Ctrl-C saves the last completed step; --resume continues it exactly."""


# ------------------------------------------------------------------- train
def _train_parser():
    from transformer.training.next_word import default_model_config, default_train_config

    p = Parser(prog="next-word-train", description=TRAIN_DESCRIPTION)
    t = default_train_config()
    add_run_options(p.add_argument_group("the run"), t, DEFAULT_OUT)
    add_stopping_options(p.add_argument_group("when to stop"), t)
    reword_help(p, "target_accuracy", f"stop when every kind's held-out accuracy reaches this fraction at the end of "
                   f"the cool-down (default: {t.target_accuracy}); 0 = train --max-steps steps")
    reword_help(p, "steps", f"at most this many optimizer steps in all (default: {t.steps})")
    reword_help(p, "cooldown_at", "the lowest kind's accuracy on the last 4 steps' held-out samples that starts the "
                   "cool-down (at most --target-accuracy)")
    add_optimizer_options(p.add_argument_group("optimizer and data"), t)
    reword_help(p, "batch_size", "sentences per training step")
    add_model_options(p.add_argument_group("the model (a new run; --resume keeps the checkpoint's)"),
                      default_model_config(), architecture=False)
    reword_help(p, "layers", "blocks of causal self-attention and feed-forward")
    reword_help(p, "snapshot_every", "record the attention maps (every layer and head) of one held-out sentence of each "
                   "kind at step 0, every N steps and at the last step, into attention_snapshots.npz "
                   "in the run folder (transformer.training.snapshots.load_snapshots reads it) (default: 0 = "
                   "none; with --resume: the run's own setting)")
    return p


def _out_dir(args) -> str:
    return new_run_folder(args, DEFAULT_OUT)


def _new_trainer(args, out_dir):
    from transformer.commands.limits import check_model_size
    from transformer.training.next_word import NextWordTrainer, default_model_config, default_train_config

    model_config = default_model_config(d_model=args.d_model, num_heads=args.heads, num_layers=args.layers,
                                        d_ff=args.d_ff, dropout=args.dropout, positional=args.positional)
    train_config = default_train_config(**train_values(args))
    check_model_size(model_config, train_config.batch_size)
    return lambda: NextWordTrainer(model_config, train_config, out_dir=out_dir)


@console_script
def train_main(argv=None) -> int:
    from transformer.parallel.ranks import silence_other_ranks
    from transformer.training.next_word import NextWordTrainer

    silence_other_ranks()                         # in an MPI job rank 0 speaks for all
    args = _train_parser().parse_args(argv)
    return run_training(args, TrainingCommand("next-word-train", NextWordTrainer, _out_dir, _new_trainer,
                                              _print_summary))


def _print_summary(summary, trainer, wall):
    from transformer.training.next_word import complete

    evaluation = summary["evaluation"]
    print(f"\nheld-out next-word accuracy ({evaluation['count']} sentences never seen in training):")
    for kind, accuracy in evaluation["per_kind"].items():
        print(f"  {kind:8s} {accuracy:7.2%}")
    target = summary["target"]
    if target is not None and summary["reached_step"] is not None:
        state = "confirmed" if summary["target_confirmed"] else "not yet confirmed"
        print(f"target {target:.2%} on every kind reached at step {summary['reached_step']} after "
              f"{summary['reached_seconds']:.1f} s of training ({state})")
    elif target is not None:
        print(f"target {target:.2%} on every kind not reached in {summary['steps']} steps (raise --max-steps, "
              "or resume)")
    median = summary["median_step_ms"]
    print(f"steps {summary['steps']}, wall time {wall:.1f} s" + (f", median step {median:.1f} ms" if median else ""))
    for context, predicted, expected in summary["wrong"]:
        print(f"  wrong: {context} -> {predicted!r} (expected {expected!r})")
    for prompt in EXAMPLE_PROMPTS:
        print(f"  {prompt} -> {' '.join(complete(trainer.model, prompt.split()))}")
    print(f"checkpoint: {summary['checkpoint']}\ntraining log: {summary['log']}")


# ---------------------------------------------------------------- complete
def _complete_parser():
    p = Parser(prog="next-word-complete",
               description="Continue prompts in the generated language, one word at a time, with a trained model.",
               epilog="Prompts given as arguments are all checked before any is completed: a bad one gets one "
                      "'error: prompt N: ...' line on stderr and the others are still completed. Prompts on stdin "
                      "are completed one per line as they come: a bad line gets one 'error: stdin line N: ...' line "
                      "on stderr and the others are still completed. Exit codes: 0 all completed, 2 a bad argument, "
                      "prompt, checkpoint or input line (the good prompts were still completed), 130 Ctrl-C, "
                      "141 stdout closed or full.")
    p.add_argument("prompts", nargs="*", help="prompts to continue; none: read one per line from stdin")
    p.add_argument("--checkpoint", default=None, type=path_argument,
                   help=f"the model next-word-train wrote (default: the newest finished run's, {DEFAULT_CHECKPOINT} "
                        f"or {DEFAULT_OUT}-N/model.npz)")
    p.add_argument("--temperature", type=finite, default=0.0, metavar="T",
                   help="sample each word from softmax(logits / T); 0 = greedy, the most likely word")
    p.add_argument("--top-k", type=int, default=None, metavar="K",
                   help="with --temperature: sample among the K most likely words (default: all)")
    p.add_argument("--seed", type=int, default=None, help="random seed for sampling (default: a fresh one)")
    p.add_argument("--max-words", type=int, default=None, metavar="N",
                   help="stop after N words (default: at <eos>, or when the model's max_len is full)")
    return p


def _check_options(args):
    """The first bad option's message, or None."""
    if args.temperature < 0:
        return f"--temperature must be >= 0, got {args.temperature}"
    if args.top_k is not None and args.top_k < 1:
        return f"--top-k must be at least 1, got {args.top_k}"
    if args.top_k is not None and args.temperature == 0:
        return "--top-k only applies to sampling: add --temperature T"
    if args.seed is not None and args.seed < 0:
        return f"--seed must be >= 0, got {args.seed}"
    if args.max_words is not None and args.max_words < 1:
        return f"--max-words must be at least 1, got {args.max_words}"
    return None


@console_script
def complete_main(argv=None) -> int:
    from transformer.files.checkpoint import CheckpointError
    from transformer.tasks.language import LanguageError, split_words
    from transformer.files.run_dir import default_checkpoint
    from transformer.files.trained_model import load_model

    args = _complete_parser().parse_args(argv)
    if not args.prompts and sys.stdin is None:
        return fail("stdin is closed and no prompts were given: pass them as arguments or one per line on stdin")
    problem = _check_options(args)
    if problem:
        return fail(problem)
    refused = _refusals(args.prompts, split_words)
    if args.prompts and len(refused) == len(args.prompts):    # unknown words: no model is needed to say so
        _say_refused(refused)
        return EXIT_USAGE
    try:
        model = load_model(args.checkpoint or default_checkpoint(DEFAULT_OUT), task="next-word")
    except CheckpointError as error:
        return fail(str(error))
    write = _completer(model, args)
    if args.prompts:
        # as a bad stdin line does, a bad prompt gets its line and the good ones are still completed
        refused = _refusals(args.prompts, lambda text: _prompt_words(model, text))
        _say_refused(refused)
        for number, text in enumerate(args.prompts, 1):
            if number not in refused:
                write(text, _prompt_words(model, text))
        return EXIT_USAGE if refused else 0
    return read_stdin(lambda texts: [write(text, _prompt_words(model, text)) for text in texts],
                      lambda text: _prompt_words(model, text), LanguageError, "prompts", batch_size=1,
                      max_line=MAX_PROMPT_LINE, too_long=f"longer than {MAX_PROMPT_LINE:,} characters, more than "
                                                         f"any prompt (at most {model.config.max_len - 2} words)")


def _refusals(prompts, check) -> dict:
    """Prompt number (from 1) -> why ``check`` refuses that prompt, for the refused ones."""
    from transformer.tasks.language import LanguageError
    refused = {}
    for number, text in enumerate(prompts, 1):
        try:
            check(text)
        except LanguageError as error:
            refused[number] = str(error)
    return refused


def _say_refused(refused):
    for number, problem in refused.items():
        print(f"error: prompt {number}: {problem}", file=sys.stderr, flush=True)


def _prompt_words(model, text):
    """A typed prompt -> its words, checked (LanguageError: an unknown word, none, too many)."""
    from transformer.tasks.language import split_words
    from transformer.training.next_word import check_prompt
    words = split_words(text)
    check_prompt(model, words)
    return words


def _completer(model, args):
    """(prompt text, its words) -> the prompt and its continuation printed."""
    from transformer.training.next_word import complete
    rng = np.random.default_rng(args.seed)

    def write(text, words):
        with decoding_kernels():             # one short sequence: the kernels' numpy twins are as fast
            continuation = complete(model, words, args.max_words, args.temperature, args.top_k, rng)
        print(f"{text} -> {' '.join(continuation)}", flush=True)
        if not continuation:
            _say_why_nothing_follows(text, words)
    return write


def _say_why_nothing_follows(text, words):
    """An empty completion is the model's answer, not a failure: one note says so (and, when the
    prompt was typed with capitals, how it was read)."""
    read_as = " ".join(words)
    capitals = (f"; the language is lower-case, so {text.strip()!r} was read as {read_as!r}"
                if text.strip() != read_as and any(c.isupper() for c in text) else "")
    print(f"note: the model ended {read_as!r} at once (its first word was <eos>), so nothing follows it{capitals}",
          file=sys.stderr, flush=True)
