"""Whether this thread is recording or replaying a ``minigrad.trace`` tape.

``Function.apply`` and the backward pass read ``state.tape`` (one attribute of a
``threading.local``, None unless a traced function runs) and hand their work to it.
Kept apart from ``trace.py`` so that the engine can read it without importing the tracer.
"""
import threading


class _TapeState(threading.local):
    tape = None     # the Recording or Replay of this thread's running traced call; a new thread has none


state = _TapeState()
