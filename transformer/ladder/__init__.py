"""The attention ladder: from the last word to self-attention, each rung one idea.

    rungs.py       the seven models, one short class each (LastWord ... FullBlock)
    experiment.py  train every rung alike on the generated language, score it per sentence kind
    cli.py         attention-ladder: the table, a wrong sentence per rung, --json
"""
from transformer.ladder.experiment import LadderConfig, LadderResult, RungResult, run_ladder
from transformer.ladder.rungs import (RUNGS, Average, DotProduct, FullBlock, LastWord, Positions, SeparateMaps, SharedMap,
                    averaging_matrix, causal_softmax)

__all__ = ["RUNGS", "LastWord", "Average", "DotProduct", "SharedMap", "SeparateMaps", "Positions", "FullBlock",
           "averaging_matrix", "causal_softmax", "LadderConfig", "LadderResult", "RungResult", "run_ladder"]
