"""The record of ``variants.py`` as the Markdown tables docs/ladder.md shows (tested against it).

Every cell is over the record's seeds: the mean and, in brackets, the lowest and highest seed.
"""
import numpy as np

from transformer.ladder.head_roles import BLEND_ROLES, role_of
from transformer.ladder.variants import steps_to

LEARNED = 0.9               # "learned" a kind: 90% of its held-out sentences right on the learning curve


def variant(record, name: str) -> dict:
    return next(v for v in record["variants"] if v["name"] == name)


def spread(values, scale: float = 100.0) -> str:
    """'97.5 (95-100)': the mean and the range of ``values`` (fractions shown in percent)."""
    values = scale * np.asarray(values, dtype=float)
    return f"{values.mean():.1f} ({values.min():.0f}-{values.max():.0f})"


def steps_to_learn(record, name: str, kind: str) -> list:
    """Per seed: the first step at which the variant had ``LEARNED`` of ``kind`` right (None: never)."""
    return [steps_to(curve, LEARNED, record["curve_every"]) for curve in variant(record, name)["curve"][kind]]


def steps_later(record, name: str, baseline: str, kind: str) -> list:
    """Per seed: how many steps later ``name`` learned ``kind`` than ``baseline`` (None: one never did)."""
    pairs = zip(steps_to_learn(record, name, kind), steps_to_learn(record, baseline, kind))
    return [None if a is None or b is None else a - b for a, b in pairs]


def steps_cell(steps) -> str:
    reached = [s for s in steps if s is not None]
    never = len(steps) - len(reached)
    if not reached:
        return f"never ({never} of {len(steps)})"
    text = f"{np.mean(reached):.0f} ({min(reached)}-{max(reached)})"
    return text + (f", never on {never} of {len(steps)}" if never else "")


def accuracy_table(record, names) -> str:
    kinds = record["config"]["kinds"]
    lines = ["| variant | " + " | ".join(kinds) + " |", "|---|" + "---:|" * len(kinds)]
    for name in names:
        accuracy = variant(record, name)["accuracy"]
        lines.append(f"| {name} | " + " | ".join(spread(accuracy[k]) for k in kinds) + " |")
    return "\n".join(lines)


def steps_table(record, names, kinds) -> str:
    lines = ["| variant | " + " | ".join(f"steps to {LEARNED:.0%} {k}" for k in kinds) + " |",
             "|---|" + "---:|" * len(kinds)]
    for name in names:
        lines.append(f"| {name} | " + " | ".join(steps_cell(steps_to_learn(record, name, k)) for k in kinds) + " |")
    return "\n".join(lines)


def roles_table(record, name: str = "heads") -> str:
    """Per seed: which head reads each blend role (its mean weight on that role's thing)."""
    entry = variant(record, name)
    roles = entry["head_roles"]
    lines = ["| seed | blend | " + " | ".join(f"reads the {r}'s thing" for r in BLEND_ROLES) + " | reads no one role |",
             "|---:|---:|" + "---|" * (len(BLEND_ROLES) + 1)]
    for s, seed in enumerate(record["config"]["seeds"]):
        seed_roles = {role: roles[role][s] for role in BLEND_ROLES}
        heads = range(len(seed_roles[BLEND_ROLES[0]]))
        cells = []
        for role in BLEND_ROLES:
            readers = [h for h in heads if role_of(seed_roles, h) == role]
            cells.append(", ".join(f"head {h} ({seed_roles[role][h]:.2f})" for h in readers) or "none")
        free = [h for h in heads if role_of(seed_roles, h) is None]
        cells.append(", ".join(f"head {h}" for h in free) or "none")
        lines.append(f"| {seed} | {100 * entry['accuracy']['blend'][s]:.1f} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
