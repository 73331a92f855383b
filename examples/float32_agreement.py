"""When two float32 computations of the same numbers agree: the target ``compare_with_pytorch.py`` checks.

float32 carries about 7 significant digits (one step, ``eps``, is 1.2e-7 of the value), and two
libraries that sum in different orders differ by a few steps *of the values' size*. So a difference
is judged against the size of what is compared: it is within the target when

    difference <= TOLERANCE * max(1, largest |value|)

that is 1e-5 absolute for values up to 1 and 1e-5 relative beyond (logits up to 12.3 may differ by
1.23e-4, about a thousand float32 steps at that size; the trained model's differ by ten). Kept
apart from the script so that it can be tested without PyTorch.
"""
from typing import NamedTuple

TOLERANCE = 1e-5


class Difference(NamedTuple):
    name: str          # a stage ("logits"), a stage's gradient or a parameter's gradient
    difference: float  # the largest |minigrad - PyTorch|
    scale: float       # the largest |value| compared (PyTorch's)

    @property
    def allowed(self) -> float:
        return TOLERANCE * max(1.0, self.scale)

    @property
    def ratio(self) -> float:
        """difference / allowed: at most 1 is within the target."""
        return self.difference / self.allowed


def worst(differences) -> Difference:
    """The difference furthest from (or beyond) its target."""
    return max(differences, key=lambda d: d.ratio)


def verdict(differences) -> tuple:
    """(within: bool, one line saying which difference came closest to its target and why)."""
    w = worst(differences)
    within = w.ratio <= 1.0
    return within, (f"largest difference relative to its target: {w.difference:.2e} in {w.name} (values up to "
                    f"{w.scale:.3g}, target {TOLERANCE:g} x max(1, {w.scale:.3g}) = {w.allowed:.2e}): "
                    f"{'within' if within else 'ABOVE'} the float32 target")
