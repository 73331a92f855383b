"""A pure replay of a ``minigrad.trace`` tape: each recorded forward, then each recorded backward
rule and gradient sum, run as a flat list on the new call's arrays. No piece Python, no
``Function.apply``, no graph, no topological sort: what is left is each op's own forward and
backward and the fixed cost of its numpy/BLAS/Numba calls.

Every input comes from a feed (``tape_inputs.py``): a view of an argument, an earlier line's
output, the parameters' arrays, the current random generator, a constant that ``trace.py``
checked was the same object on two calls. Masks and CrossEntropy's count of non-pad targets
are computed by ops from the batch's arrays, so they are computed anew here. ``Guards``
(``tape_guards.py``) say before each run whether everything else the tape assumed still holds.
"""
import numpy as np

from . import autograd, rng
from .function import unbroadcast
from .tape_inputs import argument_view
from .tensor import Tensor

SLOT, ARG, CONST, TENSOR, GENERATOR, FRESH_LIST, TUPLE = range(7)


class PureTape:
    """A verified tape as a flat list of steps (see ``Traced``); ``guards`` say when it is stale."""

    def __init__(self, tape, guards, replayed_fn):
        self.tape, self.guards, self.replayed_fn = tape, guards, replayed_fn
        leaves = len(tape.leaves)
        self.leaf_arrays = [leaf.data for leaf in tape.leaves]     # their identity is guarded
        self.shapes = [array.shape for array in self.leaf_arrays] + [line.shape for line in tape.lines]
        self.steps = []
        last_reader = {}        # slot -> the step that reads it last
        for index, line in enumerate(tape.lines):
            inputs = tuple((SLOT, s) if s != -1 else _compiled(feed, leaves, as_input=True)
                           for s, feed in zip(line.sources, line.feeds))
            options = tuple((name, _compiled(feed, leaves)) for name, feed in line.option_feeds.items())
            self.steps.append((line.op, line.needs, line.recorded, inputs, options))
            for slot in _slots_read(inputs + tuple(feed for _, feed in options)):
                last_reader[slot] = index
        # An output is dropped after its last reader, as eager drops a tensor no op holds; what
        # backward reads, each op keeps in ``fn.saved``. Kept: the loss and what is returned.
        kept = {tape.root} | set(_result_slots(tape.result))
        self.frees = [[] for _ in tape.lines]
        for slot, index in last_reader.items():
            if slot >= leaves and slot not in kept:
                self.frees[index].append(slot)

    def __call__(self, arguments):
        """Run the tape on ``arguments`` (the call's arrays, as ``arrays_of`` lists them): the
        parameters' ``.grad`` are accumulated as eagerly; returns the piece's result."""
        tape = self.tape
        values = list(self.leaf_arrays)
        fns = []
        for (op, needs, recorded, inputs, options), frees in zip(self.steps, self.frees):
            arrays = [values[feed[1]] if feed[0] == SLOT else _value(feed, values, arguments) for feed in inputs]
            fn = op()
            fn.needs_input_grad = needs
            if options:
                out = fn.forward(*arrays, **{name: _value(feed, values, arguments) for name, feed in options})
            else:
                out = fn.forward(*arrays)
            if type(out) is not np.ndarray:
                out = np.asarray(out)       # as Function.apply: a numpy scalar becomes a 0-d array
            values.append(out)
            if recorded:
                fn.saved = {name: out if i is None else arrays[i] for name, i in op.backward_reads}
                fns.append(fn)
            else:
                fns.append(None)
            for slot in frees:
                values[slot] = None
        if tape.root is not None:
            self._backward(values, fns)
        return self._rebuilt(tape.result, values)

    def _backward(self, values, fns):
        tape = self.tape
        grads = [None] * len(values)
        grads[tape.root] = np.ones_like(values[tape.root])
        run_plan(tape.plan, grads, fns, self.shapes, tape.leaves)

    def _rebuilt(self, spec, values):
        """The piece's return value, made of the replayed outputs (they require grad, no graph)."""
        if spec[0] == "none":
            return None
        if spec[0] == "tuple":
            return spec[1](self._rebuilt(s, values) for s in spec[2])
        position = spec[1]
        line = self.tape.lines[position - len(self.tape.leaves)]
        return Tensor._from_op(values[position], self.replayed_fn if line.recorded else None)


def run_plan(plan, grads, fns, shapes, leaves):
    """A tape's backward plan (``trace.Recording.backward`` wrote it): eager's order of rules, of
    sums and of ``.grad`` accumulation. ``grads`` holds the root's gradient at its slot; ``fns``
    the replayed ops (each dropped after its rule, as eager's ``release()`` frees saved arrays);
    ``shapes`` every slot's; ``leaves`` the tensors whose ``.grad`` the plan fills."""
    for slot, line, flows in plan:
        g = grads[slot]
        if g is None:
            continue
        grads[slot] = None
        if line is None:
            autograd._accumulate(leaves[slot], g, False)     # eager's own leaf accumulation
            continue
        fn = fns[line]
        input_grads = fn.backward(g, **fn.saved)
        if not isinstance(input_grads, tuple):
            input_grads = (input_grads,)
        fns[line] = None
        for target, ig in zip(flows, input_grads):
            if target is None or ig is None:
                continue
            shape = shapes[target]
            if ig.shape != shape:
                ig = unbroadcast(ig, shape)
            grads[target] = ig if grads[target] is None else grads[target] + ig


def _slots_read(feeds):
    for feed in feeds:
        if feed[0] == SLOT:
            yield feed[1]
        elif feed[0] == TUPLE:
            yield from _slots_read(feed[1])


def _result_slots(spec):
    if spec is None or spec[0] == "none":
        return
    if spec[0] == "tuple":
        for s in spec[2]:
            yield from _result_slots(s)
    else:
        yield spec[1]


def _compiled(feed, leaves, as_input=False):
    """A feed as the run reads it. A number or array given as an op's input becomes what
    ``Function.apply`` makes of it (``Tensor(x).data``); options are passed as they are."""
    kind = feed[0]
    if kind == "line":
        return (SLOT, leaves + feed[1])
    if kind == "arg":
        _, k, offset, shape, strides, made = feed
        return (ARG, k, offset, shape, strides, made or as_input)
    if kind == "const":
        value = feed[1]
        return (CONST, Tensor(value).data if as_input and not isinstance(value, Tensor) else value)
    if kind == "tensor":
        return (TENSOR, feed[1])
    if kind == "generator":
        return (GENERATOR,)
    if kind == "fresh_list":
        return (FRESH_LIST,)
    return (TUPLE, tuple(_compiled(f, leaves) for f in feed[1]))


def _value(feed, values, arguments):
    kind = feed[0]
    if kind == SLOT:
        return values[feed[1]]
    if kind == CONST:
        return feed[1]
    if kind == ARG:
        view = argument_view(arguments[feed[1]], *feed[2:5])
        return Tensor(view).data if feed[5] else view      # as Tensor(x) converts it (a copy)
    if kind == TENSOR:
        return feed[1].data
    if kind == GENERATOR:
        return rng.generator()
    if kind == FRESH_LIST:
        return []
    return tuple(_value(f, values, arguments) for f in feed[1])
