"""Who watches the engine: one list of observers per thread (the profiler, ``detect_anomaly``,
``nn.record_scopes``), read once per op by ``Function.apply`` and by the backward loop.

With nothing watching (the common case) the engine reads the empty tuple and goes on. An
observer overrides what it needs of ``Observer``:

    call(what, stage, run, *args, **options)   run ``run(*args, **options)``: an op's forward or
                                               backward (``what`` the op), or an @accelerated
                                               function (stage "kernel" or "numpy"); the profiler times it
    recorded(fn)                               op ``fn`` was just recorded in the graph
    stepped(fn, grad, input_grads)             ``fn``'s backward turned ``grad`` into ``input_grads``

Observers watch from outside: none of them changes an op, so what is computed is the same
watched or not. As grad mode, the list belongs to the thread: a ``profile()`` in one thread
sees no other thread's ops.
"""
import contextlib
import threading


class Observer:
    """The base of every observer: each method does nothing (or just runs the call)."""

    def call(self, what, stage, run, *args, **options):
        return run(*args, **options)

    def recorded(self, fn):
        pass

    def stepped(self, fn, grad, input_grads):
        pass


class _Watching(threading.local):
    observers = ()          # this thread's observers, outermost first; a new thread has none


watching = _Watching()


@contextlib.contextmanager
def observing(observer, enabled=True):
    """Context manager: ``observer`` watches this thread's engine inside the block, or, with
    ``enabled=False``, does not (even if an outer block started it); afterwards it watches
    again exactly if it did before."""
    was_watching = observer in watching.observers
    watching.observers = _without(observer) + ((observer,) if enabled else ())
    try:
        yield observer
    finally:
        watching.observers = _without(observer) + ((observer,) if was_watching else ())


def is_watching(observer) -> bool:
    return observer in watching.observers


def _without(observer):
    return tuple(o for o in watching.observers if o is not observer)


def call(what, stage, run, *args, **options):
    """``run(*args, **options)`` passed through each observer's ``call``, outermost first."""
    return _through(watching.observers, what, stage, run, args, options)


def _through(observers, what, stage, run, args, options):
    if not observers:
        return run(*args, **options)

    def inner(*args, **options):
        return _through(observers[1:], what, stage, run, args, options)
    return observers[0].call(what, stage, inner, *args, **options)
