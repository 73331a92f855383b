"""The one random generator behind parameter initialisation and dropout.

Seed it with ``minigrad.manual_seed(seed)``; its state can be saved and restored
(``get_rng_state`` / ``set_rng_state``) so a resumed training run draws the same
dropout masks as an uninterrupted one.
"""
import numpy as np

_generator = np.random.default_rng(0)


def manual_seed(seed: int) -> None:
    global _generator
    _generator = np.random.default_rng(seed)


def generator() -> np.random.Generator:
    return _generator


def get_rng_state() -> dict:
    """The generator's state as a JSON-serialisable dict."""
    return _generator.bit_generator.state


def set_rng_state(state: dict) -> None:
    _generator.bit_generator.state = state
