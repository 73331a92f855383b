"""The ladder's lessons, as docs/ladder.md states them, on every seed of the default run
(slow: the whole ladder, nine rungs on seeds 0-4, about 3 minutes on two quiet cores).

Each "fails, then the next rung fixes it" sentence is one row of ``REASONS``: the next rung
must gain at least 20 points on that kind on every seed. The last rung must reach 95% on
every kind on every seed, and the pull statistic must say what the docs say it says.
"""
import numpy as np
import pytest

from transformer.ladder import RUNGS, LadderConfig, run_ladder
from transformer.ladder.experiment import REASONS

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def ladder():
    result = run_ladder(LadderConfig())
    return {r.name: r for r in result.rungs}, result


# One head sometimes learns blend after all (98% on seeds 3 and 4, 66-70% on seeds 0 and 2):
# the heads rung's lesson does not hold on every seed yet (docs/ladder.md says so).
NOT_ON_EVERY_SEED = {("positions", "blend")}


def gain_over(ladder, name, kind):
    """The next rung's accuracy minus this rung's on ``kind``, per seed."""
    rungs, _ = ladder
    names = [r.name for r in RUNGS]
    after = rungs[names[names.index(name) + 1]]
    return np.subtract(after.accuracy[kind], rungs[name].accuracy[kind])


def test_each_rung_fails_a_kind_and_the_next_rung_fixes_it_on_every_seed(ladder):
    names = [r.name for r in RUNGS]
    assert [name for name, _ in REASONS] == names[:-1]          # every rung but the last has its lesson
    for (name, kind) in set(REASONS) - NOT_ON_EVERY_SEED:
        gain = gain_over(ladder, name, kind)
        assert gain.min() >= 0.20, f"the rung after {name} on {kind}: {np.round(100 * gain)} points"


@pytest.mark.xfail(strict=True, reason="one head learns blend on some seeds: the heads rung's lesson is open")
def test_heads_fix_blend_on_every_seed(ladder):
    for name, kind in NOT_ON_EVERY_SEED:
        assert gain_over(ladder, name, kind).min() >= 0.20


def test_the_full_block_gets_every_kind_right_on_every_seed(ladder):
    rungs, result = ladder
    for kind, per_seed in rungs["full block"].accuracy.items():
        assert min(per_seed) >= 0.95, (kind, per_seed)


def test_the_pull_statistic(ladder):
    """Swap: without the other animal out-pulling the asked one, no rung is right; the separate
    maps make it out-pull in nearly every sentence, the shared map in at most about half."""
    rungs, _ = ladder
    for name in ("dot product", "values"):
        assert max(rungs[name].pull["out_pulls"]) <= 0.05, name
    shared, separate = rungs["shared map"].pull, rungs["separate maps"].pull
    assert max(shared["out_pulls"]) <= 0.60
    assert min(separate["out_pulls"]) >= 0.85
    for name in ("shared map", "separate maps", "positions"):         # one head: its weights are the pull
        pull = rungs[name].pull
        assert min(v for v in pull["right_when_out_pulls"] if v is not None) >= 0.80, name
        when_not = [v for v in pull["right_when_not"] if v is not None]
        assert not when_not or max(when_not) <= 0.60, name


def test_order_blind_rungs_answer_the_minimal_pair_with_one_name_twice(ladder):
    rungs, _ = ladder
    for name in ("average", "dot product", "values", "shared map", "separate maps"):
        (_, a, _), (_, b, _) = rungs[name].pair
        assert a == b, name
    for name in ("positions", "heads", "full block"):
        assert [p for _, p, _ in rungs[name].pair] == [right for _, _, right in rungs[name].pair], name
