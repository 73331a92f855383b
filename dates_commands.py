"""The console scripts' entry points (setup.cfg): a module that imports nothing heavy.

Importing a command's module (numpy, Numba, the model) takes about half a second. Ctrl-C
in that time would print a KeyboardInterrupt traceback if the console script imported the
module itself, before any of the project's code could catch it. Here the import happens
inside a ``try``, so Ctrl-C at any moment after Python has started is one line and exit
130; from then on ``transformer.commands.console.console_script`` keeps the same promise.
"""
import importlib
import signal
import sys

EXIT_INTERRUPTED = 130          # as transformer.commands.console.EXIT_INTERRUPTED (not imported: it is not light)
_interrupted = False


def _on_sigint(signum, frame):
    global _interrupted
    _interrupted = True
    raise KeyboardInterrupt


def _run(target: str, argv):
    module, function = target.split(":")
    previous = signal.signal(signal.SIGINT, _on_sigint)
    try:
        main = getattr(importlib.import_module(module), function)
    except KeyboardInterrupt:
        return _interrupted_at_start()
    except ImportError:
        if _interrupted:     # numpy before 1.25 turns a Ctrl-C inside its C extension's import into this
            return _interrupted_at_start()
        raise
    finally:
        signal.signal(signal.SIGINT, previous)
    try:
        return main(argv)
    finally:
        if argv is None:         # the process's own command (a console script), not a call in a test
            _finished()


def _finished():
    """The command is done and has said everything: Python's teardown after it (about a second
    once Numba's code is loaded) ignores Ctrl-C and SIGTERM, so a late signal cannot turn a
    finished command's exit status into a silent -2 or -15. SIGKILL still ends it. Only for the
    process's own command: ignored signals would outlast a call in a test and reach its children."""
    for name in ("SIGINT", "SIGTERM"):
        try:
            signal.signal(getattr(signal, name), signal.SIG_IGN)
        except (ValueError, OSError):      # not the main thread: leave it
            pass


def _interrupted_at_start() -> int:
    try:
        print("interrupted", file=sys.stderr)
    except (OSError, ValueError, AttributeError):    # stderr closed or full
        pass
    return EXIT_INTERRUPTED


def train(argv=None):
    return _run("transformer.commands.dates:train_main", argv)


def translate(argv=None):
    return _run("transformer.commands.dates:translate_main", argv)


def evaluate(argv=None):
    return _run("transformer.commands.dates:evaluate_main", argv)


def attention_graph(argv=None):
    return _run("transformer.commands.attention_graph:main", argv)


def heatmaps(argv=None):
    return _run("transformer.commands.heatmaps:main", argv)


def plot_training(argv=None):
    return _run("transformer.commands.heatmaps:curves_main", argv)


def explain(argv=None):
    return _run("transformer.commands.explain:main", argv)


def backward_animation(argv=None):
    return _run("transformer.commands.backward_animation:main", argv)


def explore(argv=None):
    return _run("transformer.commands.explore:dates_main", argv)


def next_word_explore(argv=None):
    return _run("transformer.commands.explore:next_word_main", argv)


def export(argv=None):
    return _run("transformer.commands.export:main", argv)


def next_word_train(argv=None):
    return _run("transformer.commands.next_word:train_main", argv)


def next_word_complete(argv=None):
    return _run("transformer.commands.next_word:complete_main", argv)


def attention_ladder(argv=None):
    return _run("transformer.commands.ladder:main", argv)
