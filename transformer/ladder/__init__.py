"""The attention ladder: from the last word to self-attention, each rung one idea.

    rungs.py       the nine rungs, one short class each (LastWord ... TwoLayers), and the project's model (FullBlock)
    experiment.py  train every rung alike on the generated language and several seeds, score it per sentence kind

The command, ``attention-ladder`` (the table over the seeds, the pull statistic, a wrong sentence
per rung, --json), is transformer/commands/ladder.py.
"""
from transformer.ladder.experiment import LadderConfig, LadderResult, RungResult, RungRun, run_cells, run_ladder, run_rung
from transformer.ladder.rungs import (LADDER, RUNGS, Average, DotProduct, FullBlock, Heads, LastWord, Positions, SeparateMaps, SharedMap, TwoLayers,
                    Values, averaging_matrix, causal_softmax)

__all__ = ["LADDER", "RUNGS", "LastWord", "Average", "DotProduct", "Values", "SharedMap", "SeparateMaps", "Positions",
           "Heads", "TwoLayers", "FullBlock", "averaging_matrix", "causal_softmax", "LadderConfig", "LadderResult", "RungResult",
           "RungRun", "run_cells", "run_ladder", "run_rung"]
