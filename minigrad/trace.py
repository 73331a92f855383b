"""``minigrad.trace``: record a training piece once, print it as straight-line code, replay it.

    traced = minigrad.trace(piece, names=model.named_parameters())
    loss = traced(src, tgt)      # first call: an ordinary eager run that records the tape
    loss = traced(src2, tgt2)    # second: a checked replay, which also verifies the tape
    loss = traced(src3, tgt3)    # then: a pure replay, the tape alone; .grad set as eagerly
    print(traced.code)           # the step as code: forward, backward, gradient sums

``piece(*args)`` computes a loss and calls ``loss.backward()`` once; it returns the tensors it
computed (the loss) or None.

What the tape is. Recording runs ``piece`` eagerly while ``Function.apply`` and the backward
pass tell the tape each op call: which op, which earlier output, parameter or constant each
input is, where each constant and option came from (``tape_inputs.py``: a view of an argument,
an earlier output, a stored object) and (watched like the profiler watches) which kernel or
numpy function ran. Before the eager backward runs, the tape also writes down its plan: the
order of the backward rules, where each gradient goes and in which order the sums are made.

The checked replay calls ``piece`` again and each op call is handed to the tape, which
*checks* it against its line (same op, inputs wired to the same earlier outputs or the same
parameter objects, no new tensor that requires grad, same grad mode) and runs the op's forward
on today's arrays and options; backward runs the written plan. Anything that changes the
program (another branch's ops, a replaced parameter, dropout switched off, a frozen parameter,
a hook) shows up as a line that does not match: the call is run again from its start as a
fresh recording (the random generator rewound first, so dropout draws what eager draws).

The pure replay (``pure_replay.py``) skips the piece's Python: it runs the recorded forwards
and backward rules as a flat list. It is allowed only after a checked call *verified* that
every constant was fed as at the recording (so masks, ids and targets are ops' outputs or
arguments, never arrays the Python built from the data), that the Python read no value of the
data (``tape_reads.py``: ``.item()``, ``int()``, a ``.data`` not handed on to an op), and that it
drew no random number outside an op; otherwise ``why_checked`` says why, in one line, and the
checked replay goes on. Before each pure call, ``Guards`` (``tape_guards.py``) check what the
skipped Python read: the parameters' arrays, every attribute of the modules that ran
(``training``, dropout's ``p``, a reassigned parameter), the globals it read, the piece's
closure. A broken guard records the call afresh (the next call verifies the new tape).

What runs eagerly instead: calls under the profiler, ``detect_anomaly`` or ``record_scopes``
(they watch the eager engine) and inside forward-mode AD. What is refused, with one line
(``TraceError``): in-place changes of tensors (``+=``, an optimizer step: step outside),
``autograd.grad`` or ``create_graph`` inside the piece, more than one backward, hooks and
``retain_grad`` on the step's tensors.

Bit for bit: the forward of each op is the same call with the same arrays, the backward
rules run in the eager order, each gradient sum adds in the eager order and the parameters'
``.grad`` are accumulated by eager's own function, so losses and gradients equal the eager
run's exactly (``tests/test_trace.py``). The lesson, beside ``torch.compile``, ``jax.jit`` and
tinygrad's ``TinyJit``: docs/tracing.md.
"""
import contextlib
import os
import sys

import numpy as np

from . import autograd, forward_ad, inplace, rng
from .accelerated import Accelerated, get_backend
from .function import Function
from .grad_mode import state as grad_state
from .observers import Observer, observing, watching
from .pure_replay import PureTape, run_plan
from .tape_guards import GuardWatch
from .tape_inputs import FeedFinder, same_feed
from .tape_printing import tape_lines
from .tape_reads import watching_tensors
from .tape_state import state as tape_state
from .tensor import Tensor

CONSTANT = -1           # the source of an input that is no earlier output and no parameter
MAX_TAPES = 64          # one tape per input signature (as jax.jit's cache); the oldest goes first
MAX_STALE = 3           # a tape whose guards break this often stays checked (verifying costs a call)


class TraceError(RuntimeError):
    """What a traced piece does cannot be replayed from a tape; the message says why."""


class _Diverged(BaseException):
    """A replayed call did something its tape did not record: record it afresh.
    A BaseException so that a piece's own ``except Exception`` cannot swallow it."""


class _Replayed(Function):
    """(Not an op: "_" keeps it out of the op lists.) The ``grad_fn`` of a replayed op's output: the tape holds its backward, so the tensor
    requires grad as eagerly (``+=`` makes a new tensor, as eagerly) but has no graph; a
    backward() from it outside the traced call says its buffers are gone."""
    released, below = True, ()


_REPLAYED = _Replayed()


class Line:
    """One op call of the tape. ``feeds``/``option_feeds``: where each constant input and each
    option came from (``tape_inputs.py``), for a pure replay."""
    __slots__ = ("index", "op", "sources", "grad_mode", "recorded", "needs", "shape", "dtype",
                 "options", "kernels", "constants", "feeds", "option_feeds")


class Tape:
    """The recorded step: ``lines`` (forward op calls), ``leaves`` (parameters and other tensors
    that require grad, read by the step), and the backward ``plan`` (see ``Recording.backward``)."""

    def __init__(self):
        self.lines, self.leaves, self.plan = [], [], []
        self.root = None            # the slot of the tensor backward() started from
        self.backward_at = None     # how many lines ran before backward()
        self.backward_kernels = {}  # line index -> kernels its backward rule ran
        self.result = None          # what the piece returned, as line outputs (see _result_spec)
        self.refused = None         # why this tape never replays purely (None: it may, once verified)
        self.pure = None            # the PureTape, once a checked replay fed every input alike
        self.stale = 0              # how often the pure tape's guards broke


def trace(piece, names=None, pure=True):
    """``piece`` as a ``Traced`` callable (see the module doc). ``names``: (name, tensor) pairs,
    e.g. ``model.named_parameters()``, to name the parameters in ``.code``. ``pure=False``: every
    replay runs the piece's Python, checked (never the pure replay)."""
    return Traced(piece, names, pure)


class Traced:
    """A piece with its tapes, one per input signature. ``last`` says how the last call ran:
    "recorded", "replayed" (checked), "replayed purely", or "eager: <why>"; ``recordings``,
    ``replays`` and ``pure_replays`` count calls; ``why_checked`` says why the last call was
    not pure (a refusal, or the guard that broke), or None."""

    def __init__(self, piece, names=None, pure=True):
        self.piece, self.pure = piece, pure
        self.names = {id(tensor): name for name, tensor in (names or ())}
        self.tapes = {}
        self.last, self.recordings, self.replays, self.pure_replays = None, 0, 0, 0
        self.last_tape, self.why_checked = None, None

    def __call__(self, *args, **kwargs):
        if tape_state.tape is not None:
            raise TraceError("a traced piece called inside another traced piece; trace the outer one only")
        why = _eager_reason()
        if why:
            self.last = f"eager: {why}"
            return self.piece(*args, **kwargs)
        key = (_signature(args, kwargs), grad_state.enabled, get_backend())
        tape = self.tapes.get(key)
        arguments, broken = _arrays_of(args, kwargs), None
        if tape is not None and tape.pure is not None:
            broken = tape.pure.guards.broken()
            if broken is None:
                self.last, self.last_tape, self.why_checked = "replayed purely", tape, None
                self.replays, self.pure_replays = self.replays + 1, self.pure_replays + 1
                return tape.pure(arguments)
            stale, tape = tape.stale + 1, None      # what the Python read changed: record afresh
        if tape is not None:
            # verifying watches the Python with sys.setprofile: not while a profiler (cProfile) holds it
            profiled = sys.getprofile() is not None
            verify = self.pure and tape.refused is None and not profiled
            generator_state = rng.get_rng_state()
            try:
                replay = Replay(tape, arguments, self.piece if verify else None)
                result = _run(replay, self.piece, args, kwargs)
                self.last, self.replays, self.last_tape = "replayed", self.replays + 1, tape
                if verify:
                    replay.verified()
                self.why_checked = tape.refused or ("this call verified the tape" if verify else
                                                    "a Python profiler is active" if profiled else "trace(pure=False)")
                return result
            except _Diverged:
                rng.set_rng_state(generator_state)     # draw again what the abandoned run drew
        recording = Recording(arguments)
        result = _run(recording, self.piece, args, kwargs)
        recording.finish(result)
        if broken:
            recording.tape.stale = stale
            if stale >= MAX_STALE:
                recording.tape.refused = f"its guards broke {stale} times (last: {broken})"
        if len(self.tapes) >= MAX_TAPES and key not in self.tapes:
            del self.tapes[next(iter(self.tapes))]
        self.tapes[key] = self.last_tape = recording.tape
        self.last, self.recordings = "recorded", self.recordings + 1
        self.why_checked = f"recorded afresh ({broken})" if broken else "the first call of a shape records"
        return result

    def for_another_thread(self) -> "Traced":
        """The same piece for another thread: its own ``last`` and counts, the same tapes, so a
        tape recorded and verified on one thread replays purely on the other from its first call
        (a call keeps its state in itself: two threads may replay one tape at once)."""
        twin = Traced(self.piece, None, self.pure)
        twin.names, twin.tapes = self.names, self.tapes
        return twin

    @property
    def code(self) -> str:
        """The last call's tape as straight-line Python (see ``tape_code``)."""
        if self.last_tape is None:
            raise TraceError("no tape yet: call the traced piece once (it records its step)")
        return tape_code(self.last_tape, self.names)


def _eager_reason():
    if watching.observers:
        return "the profiler, detect_anomaly or record_scopes watches the eager engine"
    if forward_ad.state.active:
        return "forward-mode AD is active"
    return None


def _signature(args, kwargs):
    """The arguments as a cache key: arrays and tensors by shape and dtype, other values by value."""
    def one(x):
        if isinstance(x, np.ndarray):
            return ("array", x.shape, x.dtype.str)
        if isinstance(x, Tensor):
            return ("tensor", x.shape, x.dtype.str, x.requires_grad)
        try:
            hash(x)
        except TypeError:
            raise TraceError(f"a traced piece takes arrays, Tensors and hashable values; got a "
                             f"{type(x).__name__} (pass a tuple, or close over it)") from None
        return (type(x), x)
    return tuple(one(x) for x in args) + tuple((k, one(v)) for k, v in sorted(kwargs.items()))


def _arrays_of(args, kwargs):
    """The call's arguments in a fixed order (positional, then keywords by name); a tensor by its array."""
    values = list(args) + [kwargs[k] for k in sorted(kwargs)]
    return [v.data if isinstance(v, Tensor) else v for v in values]


def _run(tape, piece, args, kwargs):
    """``piece`` with ``tape`` receiving this thread's op calls and backward pass."""
    clock = inplace.clock
    tape_state.tape = tape
    try:
        with tape.watching():
            result = piece(*args, **kwargs)
    finally:
        tape_state.tape = None
    if inplace.clock != clock:
        _refuse_in_place()
    tape.finished()
    return result


def _refuse_in_place():
    raise TraceError("a traced piece changed a tensor in place (+=, an optimizer step): a tape cannot "
                     "replay that; trace the forward and backward only and update outside")


class _KernelNotes(Observer):
    """Watches a recording as the profiler does: which kernel or numpy function each op ran."""

    def __init__(self):
        self.current, self.last = [], []

    def call(self, what, stage, run, *args, **options):
        if isinstance(what, Accelerated):
            self.current.append(f"{what.__name__}:{stage}")
            return run(*args, **options)
        if stage in ("forward", "backward"):
            self.current = []
            result = run(*args, **options)
            self.last = self.current
            return result
        return run(*args, **options)


class Recording:
    """The tape being written while ``piece`` runs eagerly."""

    def __init__(self, arguments):
        self.tape = Tape()
        self.finder = FeedFinder(arguments)
        self.slot_of = {}           # id(tensor) -> slot; self.known keeps those tensors alive
        self.known = []
        self.notes = _KernelNotes()
        self.line_of_fn = {}        # id(grad_fn) -> line index, for the backward's kernel notes

    def watching(self):
        return watching_tensors()

    def made(self, tensor, data):
        self.finder.made(tensor, data)

    def read(self, tensor, how, value):
        pass        # the verifying call judges reads (Replay.read)

    def apply(self, cls, inputs, options):
        option_feeds = {name: self.finder.feed(value) for name, value in options.items()}   # before forward fills a list
        tape_state.tape = None
        try:
            with observing(self.notes):
                result = cls.apply(*inputs, **options)
        finally:
            tape_state.tape = self
        lines = self.tape.lines
        line = Line()
        line.index, line.op, line.options = len(lines), cls, options
        line.sources = tuple(self._source(x) for x in inputs)
        line.constants = tuple(_constant_text(x) if s == CONSTANT else None for x, s in zip(inputs, line.sources))
        line.feeds = tuple(self.finder.feed(x) if s == CONSTANT else None for x, s in zip(inputs, line.sources))
        line.option_feeds = option_feeds
        line.grad_mode = grad_state.enabled
        line.needs = tuple(isinstance(x, Tensor) and x.requires_grad for x in inputs)
        line.recorded = result.grad_fn is not None
        line.shape, line.dtype, line.kernels = result.shape, result.dtype, tuple(self.notes.last)
        lines.append(line)
        self.finder.output(result.data, line.index)
        self._remember(result, ("line", line.index))
        if line.recorded:
            self.line_of_fn[id(result.grad_fn)] = line.index
        return result

    def _source(self, x):
        if not isinstance(x, Tensor):
            return CONSTANT
        slot = self.slot_of.get(id(x))
        if slot is not None:
            return slot
        if x.grad_fn is not None:
            raise TraceError("a traced piece read a tensor computed before the call (it has a graph "
                             "outside the tape); pass its array as an argument, or detach() it")
        if not x.requires_grad:
            return CONSTANT     # today's value is read on every replay: a constant of the call
        slot = ("leaf", len(self.tape.leaves))
        self.tape.leaves.append(x)
        self._remember(x, slot)
        return slot

    def _remember(self, tensor, slot):
        self.slot_of[id(tensor)] = slot
        self.known.append(tensor)

    def backward(self, roots, grads, run):
        tape = self.tape
        _refuse_other_passes(run, roots, grads, tape)
        root = self.slot_of.get(id(roots[0]))
        if root is None or root[0] != "line":
            raise TraceError("backward() inside a traced piece must start from a tensor the piece computed")
        order = autograd._reverse_topological_order(roots)
        for tensor in order:
            if tensor._hooks or tensor._retains_grad:
                raise TraceError("a traced piece registers a hook or retain_grad() on a tensor: the tape "
                                 "does not replay hooks; run this piece eagerly")
        tape.root, tape.backward_at = root, len(tape.lines)
        for tensor in order:    # what autograd._run will do, written down
            slot = self.slot_of[id(tensor)]
            if tensor.grad_fn is None:
                tape.plan.append((slot, None, ()))
            else:
                flows = tuple(self.slot_of[id(x)] if x.requires_grad else None for x in tensor.grad_fn.inputs)
                tape.plan.append((slot, self.line_of_fn[id(tensor.grad_fn)], flows))
        notes = _BackwardNotes(self)
        tape_state.tape = None
        try:
            with observing(notes):
                autograd._exhaust(roots, grads, run)
        finally:
            tape_state.tape = self

    def finished(self):
        pass

    def finish(self, result):
        """Resolve slots to list positions: leaves first, then one per line; note what the piece returned."""
        tape, leaves = self.tape, len(self.tape.leaves)
        tape.result = _result_spec(result, self.finder, leaves)
        if tape.result is None:
            tape.refused = ("the piece returns a value its Python computed, not only tensors it computed "
                            "(return the loss tensor; count tokens outside)")

        def position(slot):
            return slot if slot in (None, CONSTANT) else (slot[1] if slot[0] == "leaf" else leaves + slot[1])
        for line in tape.lines:
            line.sources = tuple(position(s) for s in line.sources)
        tape.plan = [(position(slot), line, tuple(position(f) for f in flows)) for slot, line, flows in tape.plan]
        if tape.root is not None:
            tape.root = position(tape.root)
        tape.leaf_slots = {id(leaf): i for i, leaf in enumerate(tape.leaves)}


class _BackwardNotes(_KernelNotes):
    def __init__(self, recording):
        super().__init__()
        self.recording = recording

    def stepped(self, fn, grad, input_grads):
        line = self.recording.line_of_fn.get(id(fn))
        if line is not None:
            self.recording.tape.backward_kernels[line] = tuple(self.last)


def _constant_text(x):
    """How ``.code`` shows a constant input: its value if it is one number, else its dtype and shape
    (its value is read anew on every call)."""
    array = x.data if isinstance(x, Tensor) else np.asarray(x)
    if array.size == 1 and array.ndim == 0:
        return repr(array.item())
    return f"const_{array.dtype}{list(array.shape)}"


def _refuse_other_passes(run, roots, grads, tape):
    if type(run) is not autograd._Pass or len(roots) != 1:
        raise TraceError("autograd.grad() inside a traced piece is not traced; call loss.backward() "
                         "and read .grad, or run this piece eagerly")
    if run.create_graph:
        raise TraceError("backward(create_graph=True) inside a traced piece is not traced; run it eagerly")
    if grads[0] is not None:
        raise TraceError("backward(gradient) inside a traced piece is not traced; backward() a scalar loss")
    if tape.root is not None:
        raise TraceError("a traced piece called backward() twice; a tape holds one backward pass")


class Replay:
    """One call of ``piece`` run by a recorded tape (see the module doc). Given ``piece``, it also
    verifies the tape for a pure replay: every constant fed as at the recording, no value of the
    data read into Python, no random draw outside an op (``verified``)."""

    def __init__(self, tape, arguments, piece=None):
        self.tape = tape
        leaves = len(tape.leaves)
        self.values = list(tape.leaves) + [None] * len(tape.lines)
        self.slot_of = dict(tape.leaf_slots)
        self.fns = [None] * len(tape.lines)
        self.position, self.leaves = 0, leaves
        self.backward_done = False
        self.verifying = piece is not None
        if self.verifying:
            self.piece, self.finder, self.refused = piece, FeedFinder(arguments), None
            self.fed = set()            # ids of the arrays this call handed to ops as they are
            self.array_reads = []       # (array, why): arrays the Python took out of the data's tensors
            self.guard_watch = GuardWatch()
            self.draws = _GeneratorUse()

    def watching(self):
        if not self.verifying:
            return contextlib.nullcontext()
        stack = contextlib.ExitStack()
        stack.enter_context(watching_tensors())
        stack.enter_context(self.guard_watch)
        return stack

    def made(self, tensor, data):
        if self.verifying:
            self.finder.made(tensor, data)

    def read(self, tensor, how, value):
        """The piece's Python read ``value`` out of ``tensor`` (see ``tape_reads.py``)."""
        if not self.verifying or self.refused:
            return
        slot = self.slot_of.get(id(tensor))
        of_data = slot is not None or self.finder.feed(tensor)[0] == "arg"     # a parameter, an op's output, the batch
        if not of_data:
            return      # a stored constant
        caller = sys._getframe(2)
        where = f"{os.path.basename(caller.f_code.co_filename)}:{caller.f_lineno}"
        what = "a parameter" if slot is not None and slot < self.leaves else (
            f"line {slot - self.leaves}'s output" if slot is not None else "the batch")
        why = f"{where} reads {what} into Python ({how})"
        if how in (".data", "numpy()", "array()") and isinstance(value, np.ndarray):
            self.array_reads.append((value, why))    # fine if handed on to an op as it is
        else:
            self.refused = why + "; a pure replay would keep this call's value: use an op"

    def apply(self, cls, inputs, options):
        if self.backward_done:      # what follows backward() (a metric, say) changes no gradient: eager
            if self.verifying and not self.refused:
                self.refused = f"{cls.__name__} runs after backward(): a pure replay runs nothing after it"
            return _eager_apply(cls, inputs, options)
        lines = self.tape.lines
        if self.position >= len(lines):
            raise _Diverged
        line = lines[self.position]
        if line.op is not cls or line.grad_mode is not grad_state.enabled or len(inputs) != len(line.sources):
            raise _Diverged
        arrays = []
        slot_of = self.slot_of
        for x, source in zip(inputs, line.sources):
            if isinstance(x, Tensor):
                if slot_of.get(id(x), CONSTANT) != source or (source == CONSTANT and x.requires_grad):
                    raise _Diverged
                arrays.append(x.data)
            elif source != CONSTANT:
                raise _Diverged
            else:
                arrays.append(Tensor(x).data)     # as Function.apply converts a number
        if self.verifying and not self.refused:
            self._compare_feeds(line, inputs, options)
            self.draws.check(self, f"before line {line.index} ({cls.__name__})")
        fn = cls()
        fn.needs_input_grad = line.needs
        out = fn.forward(*arrays, **options)
        if type(out) is not np.ndarray:
            out = np.asarray(out)
        if line.recorded != (out.dtype.kind == "f" and grad_state.enabled and True in line.needs):
            raise _Diverged
        result = Tensor._from_op(out, _REPLAYED if line.recorded else None)
        if self.verifying:
            self.finder.output(out, self.position)
            self.draws.after_op()
        slot = self.leaves + self.position
        self.values[slot] = result
        slot_of[id(result)] = slot
        if line.recorded:
            fn.saved = {name: out if i is None else arrays[i] for name, i in cls.backward_reads}
            self.fns[self.position] = fn
        self.position += 1
        return result

    def _compare_feeds(self, line, inputs, options):
        """The verifying call: every constant input and option must be fed as at the recording."""
        for k, (x, recorded) in enumerate(zip(inputs, line.feeds)):
            if recorded is not None:
                self._compare(line, f"input {k}", recorded, x)
        if options.keys() != line.option_feeds.keys():
            self.refused = f"line {line.index} ({line.op.__name__}) has other options than at the recording"
        for name, value in options.items():
            if not self.refused:
                self._compare(line, f"option {name}", line.option_feeds[name], value)

    def _compare(self, line, what, recorded, value):
        today = self.finder.feed(value)
        _note_fed(value, self.fed)
        if not self.refused and not same_feed(recorded, today):
            self.refused = _refusal(line, what, recorded)

    def verified(self):
        """After the verifying call: make the pure replay, or write down why not."""
        tape = self.tape
        self.draws.check(self, "after the last op")
        for array, why in self.array_reads:
            if not self.refused and id(array) not in self.fed:
                self.refused = why + " and uses it otherwise than as an op's input: use an op"
        if tape.result is None or tape.refused:
            return
        if self.refused:
            tape.refused = self.refused
            return
        guards, self.side_effects, refused = self.guard_watch.guards(tape.leaves, self.piece)
        if refused:
            tape.refused = refused
            return
        tape.pure = PureTape(tape, guards, _REPLAYED)

    def backward(self, roots, grads, run):
        tape = self.tape
        if (type(run) is not autograd._Pass or run.create_graph or len(roots) != 1 or grads[0] is not None
                or self.backward_done or self.position != tape.backward_at
                or self.slot_of.get(id(roots[0])) != tape.root):
            raise _Diverged
        for value in self.values:      # a hook, retain_grad() or a frozen parameter since recording
            if value._hooks or value._retains_grad:
                raise _Diverged
        for leaf in tape.leaves:
            if not leaf.requires_grad:
                raise _Diverged
        self.backward_done = True
        values, fns = self.values, self.fns
        shapes = [value.shape for value in values]
        grads = [None] * len(values)
        grads[tape.root] = np.ones_like(values[tape.root].data)
        self.values = tape.leaves     # the outputs are dropped, as eager's backward frees them
        run_plan(tape.plan, grads, fns, shapes, tape.leaves)

    def finished(self):
        if (self.tape.root is not None) != self.backward_done or (
                not self.backward_done and self.position != len(self.tape.lines)):
            raise _Diverged


class _GeneratorUse:
    """Whether the piece's Python drew from minigrad's random generator (or numpy's global one)
    outside an op: a pure replay runs only the ops, so it would not draw those numbers."""

    def __init__(self):
        self.legacy = np.random.get_state()[1].copy()
        self.after_op()

    def after_op(self):
        self.state = rng.get_rng_state()

    def check(self, replay, when):
        if replay.refused:
            return
        if rng.get_rng_state() != self.state or not np.array_equal(np.random.get_state()[1], self.legacy):
            replay.refused = f"the piece drew random numbers outside an op ({when}): draw them in an op"


def _note_fed(value, fed):
    """The ids of the arrays in ``value`` (an op's input or option) handed on as they are."""
    if isinstance(value, np.ndarray):
        fed.add(id(value))
    elif isinstance(value, Tensor):
        fed.add(id(value.data))
    elif isinstance(value, tuple):
        for v in value:
            _note_fed(v, fed)


def _refusal(line, what, recorded):
    number = not isinstance(recorded[1], (np.ndarray, tuple)) if recorded[0] == "const" else (
        recorded[0] == "tensor" and recorded[1].ndim == 0)
    why = ("a value that changed between calls (read from the data?)" if number
           else "an array built anew on each call outside any op (computed from the data?)")
    return (f"line {line.index} ({line.op.__name__}) {what}: {why}; compute it with an op "
            "(minigrad.functional.array_function) or keep it made once")


def _result_spec(value, finder, leaves):
    """What the piece returned as line outputs, or None if it returned a value its Python made."""
    if value is None:
        return ("none",)
    if isinstance(value, (tuple, list)):
        specs = [_result_spec(v, finder, leaves) for v in value]
        return None if None in specs else ("tuple", type(value), specs)
    if isinstance(value, Tensor):
        line = finder.line_of_array.get(id(value.data))
        return None if line is None else ("line", leaves + line)
    return None


def _eager_apply(cls, inputs, options):
    tape, tape_state.tape = tape_state.tape, None
    try:
        return cls.apply(*inputs, **options)
    finally:
        tape_state.tape = tape


def tape_code(tape, names=None) -> str:
    """The tape as straight-line Python, one line per op: the forward, then the backward rules in
    the order they run and the gradient sums, then each parameter's ``.grad``. Comments give each
    output's shape and dtype and the kernels (or numpy functions) the recording ran."""
    return "\n".join(tape_lines(tape, names or {}))
