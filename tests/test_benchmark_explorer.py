"""The explorer benchmark on tiny runs: a served page, two typed inputs each way, a time for each,
and its table."""

import pytest

from explore_runs import dates_run, next_word_run
from viz.browser import SKIP_REASON

from examples_loader import load_example

pytestmark = [pytest.mark.skipif(SKIP_REASON is not None, reason=str(SKIP_REASON)), pytest.mark.slow]


@pytest.fixture(scope="module")
def benchmark():
    return load_example("benchmark_explorer")


@pytest.mark.parametrize("kind, run", [("next-word", next_word_run), ("dates", dates_run)])
def test_each_typed_input_is_timed_and_tabled(benchmark, tmp_path, kind, run):
    result = benchmark.measure(kind, run(tmp_path, steps=4, every=2), n=2, ladder_steps=0)
    assert list(result["modes"]) == ["without the check", "with the check"]
    for rows in result["modes"].values():
        assert len(rows) == 2 and len({row["text"] for row in rows}) == 2
        assert all(row["wall_ms"] > 0 and row["server_ms"] > 0 and row["draw_ms"] >= 0 for row in rows)
        assert all(row["server_ms"] < row["wall_ms"] for row in rows)
    lines = benchmark.table(result).splitlines()
    assert lines[0].startswith(("next-word-explore --serve", "dates-explore --serve"))
    assert "2 typed inputs each way" in lines[0] and lines[1].startswith("load average")
    assert len(lines) == 3 + 2 * 3 and lines[3].startswith("without the check") and "click to redraw" in lines[3]


def test_inputs_differ_and_are_not_the_pages_own(benchmark):
    from viz.explorer.next_word import default_sentence
    sentences, dates = benchmark.next_word_inputs(8), benchmark.date_inputs(8)
    assert len(set(sentences)) == 8 and default_sentence() not in sentences
    assert len(set(dates)) == 8 and "1845-01-05" not in dates
