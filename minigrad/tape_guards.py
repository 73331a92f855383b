"""What a pure replay assumes besides its arguments, written down while a call is verified, and
checked (``Guards.broken``) before every pure run: the cheap half of ``torch.compile``'s guards.
A broken guard makes ``trace.py`` record the call afresh.

A pure replay skips the piece's Python, so whatever that Python read is frozen unless guarded:

- the parameters: the same Parameter objects in the same module attributes (a reassigned
  ``lin.weight`` is another tensor), each still holding the very array the tape captured
  (``p.data = ...``, ``model.to(np.float64)``, ``load_state_dict``), still requiring grad,
  with no hook. Their values are read live: an in-place update (an optimizer step) is seen
  as eagerly, so the in-place version, which every step bumps, is not a guard;
- every attribute of every module (or other object of the piece's code) whose method ran:
  ``training`` (``model.eval()``), a dropout's ``p``, a stored buffer, a submodule swapped, a
  trainer's label smoothing. Attributes the call itself sets on a module (``last_weights`` kept
  for heatmaps) are its side effects: not redone. Set on another object (a counter), they refuse;
- the module globals the Python read (a ``SCALE`` read at trace time, as JAX bakes globals in)
  and the values the piece closes over;
- grad mode and the kernel backend are part of the tape's key (``trace.py``); the random
  generator is read live, and a call that draws from it outside an op is never pure.

Found with ``sys.setprofile`` during the one verifying call: each Python frame gives its
``self`` (a Module?) and the global names its code reads.
"""
import operator
import sys
import types

import numpy as np

MISSING = object()
UNCHANGING = ("numpy", "numba", "contextlib", "threading", "minigrad.trace", "minigrad.tape_",
              "minigrad.pure_replay")     # modules whose globals no one reassigns: not guarded
NOT_GUARDED = (types.ModuleType, types.FunctionType, types.BuiltinFunctionType, types.MethodType, type,
               np.random.Generator)


class GuardWatch:
    """Collects, during one call, the modules whose methods ran and the globals read."""

    def __init__(self):
        self.modules = {}       # id -> (module, its attributes when first seen)
        self.codes = {}         # code object -> its globals dict
        self.previous = None

    def __enter__(self):
        modules, codes = self.modules, self.codes
        previous = self.previous = sys.getprofile()

        def profile(frame, event, arg):
            if event == "call":
                code = frame.f_code
                if code not in codes:
                    codes[code] = frame.f_globals
                if code.co_argcount and code.co_varnames[0] == "self":
                    obj = frame.f_locals.get("self")
                    if id(obj) not in modules and _is_watched(obj):
                        modules[id(obj)] = (obj, dict(vars(obj)))
            if previous is not None:
                previous(frame, event, arg)
        sys.setprofile(profile)
        return self

    def __exit__(self, *exc):
        sys.setprofile(self.previous)

    def guards(self, leaves, piece):
        """The checks of everything this call read (see the module doc), as ``Guards``, and the
        attributes the call set: of modules (``last_weights``: not redone by a pure replay), and
        of other objects (a counter, a log: a pure replay would lose them, so it is refused)."""
        attributes, side_effects, refused = [], [], None
        for module, before in self.modules.values():
            now = vars(module)
            for name, value in now.items():
                if before.get(name, MISSING) is value:
                    attributes.append((now, name, value, f"{type(module).__name__}.{name}"))
                elif _is_module(module):
                    side_effects.append(f"{type(module).__name__}.{name}")
                elif refused is None:
                    refused = (f"the piece sets {type(module).__name__}.{name} on every call: a pure replay "
                               "would not; keep it outside the traced piece")
            if not _is_module(module):
                continue
            if "training" not in now:
                attributes.append((now, "training", MISSING, f"{type(module).__name__}.training"))
        seen = set()
        for code, names in self.codes.items():
            if names.get("__name__", "").startswith(UNCHANGING):
                continue
            for name in code.co_names:
                value = names.get(name, MISSING)
                if value is MISSING or isinstance(value, NOT_GUARDED) or (id(names), name) in seen:
                    continue
                seen.add((id(names), name))
                attributes.append((names, name, value, f"the global {names.get('__name__', '?')}.{name}"))
        cells = [(cell, cell.cell_contents) for cell in (getattr(piece, "__closure__", None) or ())
                 if _filled(cell)]
        return Guards([(leaf, leaf.data) for leaf in leaves], attributes, cells), side_effects, refused


# libraries whose objects a piece makes and drops within a call (numpy 1's ``errstate`` sets its
# own attributes on entry, a ``contextlib`` manager too): not state the tape depends on
LIBRARY_OBJECTS = ("minigrad.", "numpy", "numba", "contextlib", "threading")


def _is_watched(obj):
    """A module, or any object of the piece's own code whose method ran (a trainer holding the
    label smoothing, say); not the engine's own objects (ops, kernels) nor the libraries' (see
    ``LIBRARY_OBJECTS``), made anew or never changed."""
    return hasattr(obj, "__dict__") and not isinstance(obj, type) and (
        _is_module(obj) or not type(obj).__module__.startswith(LIBRARY_OBJECTS))


def _is_module(obj):
    """An ``nn.Module`` (known by its ``training`` flag and ``forward``: the engine below ``nn``
    does not import it)."""
    kind = type(obj)
    return isinstance(getattr(kind, "training", None), bool) and hasattr(kind, "forward") and hasattr(obj, "__dict__")


def _filled(cell):
    try:
        cell.cell_contents
    except ValueError:
        return False
    return True


class Guards:
    """The checks, grouped so that each group is one C-level loop (they run before every pure call)."""

    def __init__(self, leaves, attributes, cells):
        self.leaves = [leaf for leaf, _ in leaves]
        self.arrays = [array for _, array in leaves]
        self.count = len(leaves) + len(attributes) + len(cells)
        groups = {}
        for names, name, value, what in attributes:
            groups.setdefault(id(names), (names, []))[1].append((name, value, what))
        self.groups = []        # (dict, names, values, whats): dict[name] is value for each
        self.absent = []        # (dict, name, what): a name the dict must not hold (``training``)
        for names, entries in groups.values():
            present = [e for e in entries if e[1] is not MISSING]
            self.absent += [(names, name, what) for name, value, what in entries if value is MISSING]
            if present:
                keys = tuple(name for name, _, _ in present)
                self.groups.append((names, operator.itemgetter(*keys) if len(keys) > 1 else _one(keys[0]),
                                    tuple(value for _, value, _ in present), [what for _, _, what in present], keys))
        self.cells = cells

    def __len__(self):
        return self.count

    def broken(self):
        """None while every assumption holds, else the first one that does not, in words."""
        leaves = self.leaves
        if not all(map(operator.is_, map(DATA, leaves), self.arrays)):
            return "a parameter holds another array (.data replaced)"
        if not all(map(REQUIRES_GRAD, leaves)) or any(map(HOOKS, leaves)) or any(map(RETAINS_GRAD, leaves)):
            return "a parameter was frozen or given a hook"
        for names, get, values, whats, keys in self.groups:
            try:
                now = get(names)
            except KeyError:
                return f"{whats[0]} (or another attribute of its module) was deleted"
            if not all(map(operator.is_, now, values)):
                return next(what for what, a, b in zip(whats, now, values) if a is not b) + " changed"
        for names, name, what in self.absent:
            if name in names:
                return f"{what} changed"
        for cell, value in self.cells:
            if cell.cell_contents is not value:
                return "a value the piece closes over changed"
        return None


def _one(key):
    """Like itemgetter(key), but a one-tuple (itemgetter of one key gives the bare value)."""
    return lambda names: (names[key],)


DATA, REQUIRES_GRAD = operator.attrgetter("data"), operator.attrgetter("requires_grad")
HOOKS, RETAINS_GRAD = operator.attrgetter("_hooks"), operator.attrgetter("_retains_grad")
