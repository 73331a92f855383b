"""The next-word model in the explorer (``next-word-explore``), watched while it learned.

    next-word-train --snapshot-every 10                 # records attention while it trains
    next-word-explore                                   # -> runs/viz/next-word.html
    next-word-explore --serve                           # type your own sentence in the page

The page is ``dates-explore``'s (one file, no server, no network): one attention step of the
model on a sentence, forward and backward, and every layer and head at once, over the run's
recorded training steps (a play button, each kind's held-out accuracy and the loss as
curves) on probe sentences that tell circuits apart (the recall and swap sentences asked
both ways); it opens on the recall circuit's reader when the run formed the circuit (else on
the head whose weights changed most over training). Below, the
attention ladder's rungs on the same sentence.
"""
import os
import sys

import minigrad
from transformer.models import build_model
from transformer.tasks import language
from transformer.training.next_word import default_model_config

from ..inputs import UNTRAINED

DEFAULT_RUN = os.path.join("runs", "next-word")
DEFAULT_PAGE = os.path.join("runs", "viz", "next-word.html")
LADDER_STEPS = 600          # Adam steps per rung trained for the page (attention-ladder trains 2,500)


def default_sentence() -> str:
    """The recall probe asked about the second name: the place stated first is the wrong answer,
    so a model that has learned a 'first place' shortcut gets it wrong and one that recalls does not."""
    recall = next(e for e in language.Language().evaluation_set(per_kind=1) if e.kind == "recall")
    *facts, asked = recall.combination
    return " ".join(language.make_example("recall", (*facts, 1 - asked)).context)


def untrained_model(checkpoint):
    """A fresh next-word model of next-word-train's default shape, seed 0, said in one line, as
    ``dates-explore`` draws a fresh date model when there is no run yet."""
    print(f"note: no checkpoint at {checkpoint}: drawing an {UNTRAINED} (fresh, seed 0); train one with "
          "next-word-train --snapshot-every 10, or pass --checkpoint PATH", file=sys.stderr)
    minigrad.manual_seed(0)
    return build_model(default_model_config()).eval()
