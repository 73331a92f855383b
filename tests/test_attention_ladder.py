"""The attention ladder: each rung is causal and differentiable, the averaging rung is the
triangular matrix product, the shared map's scores are symmetric and the separate maps' are
not, the same seed gives the same table, and (slow) the rungs win where they should."""
import json

import numpy as np
import pytest

import minigrad
from minigrad import Tensor, gradcheck
from minigrad import functional as F
from transformer.tasks.language import KINDS, VOCAB, Language, encode_batch, make_example
from transformer.ladder import (RUNGS, Average, DotProduct, FullBlock, Heads, LadderConfig, SeparateMaps, SharedMap,
                                averaging_matrix, run_ladder)
from transformer.commands.ladder import format_scores, parse_seeds
from transformer.commands.ladder import main
from transformer.ladder.experiment import pull_statistic, swap_positions

D, T = 8, 18


def some_ids(count=3, seed=0):
    lang = Language(seed=0)
    return encode_batch(lang.sample("train", count, np.random.default_rng(seed)), "answer", T)


def build(rung_class, seed=0):
    minigrad.manual_seed(seed)
    return rung_class(len(VOCAB), D, T)


@pytest.mark.parametrize("rung_class", RUNGS, ids=lambda r: r.name)
def test_a_later_word_never_changes_an_earlier_prediction(rung_class):
    model = build(rung_class)
    model.eval()
    ids = some_ids().inputs
    changed = ids.copy()
    changed[:, 9:] = VOCAB.index("lake")
    with minigrad.no_grad():
        before, after = model(ids).data, model(changed).data
    np.testing.assert_array_equal(before[:, :9], after[:, :9])
    assert not np.array_equal(before[:, 9:], after[:, 9:])
    weights = model.weights(ids[:1])[0]
    np.testing.assert_array_equal(np.triu(weights, k=1), 0.0)
    np.testing.assert_allclose(weights.sum(axis=-1), 1.0, rtol=1e-5)


@pytest.mark.parametrize("rung_class", RUNGS[:-1], ids=lambda r: r.name)   # the full block: tests of decoder_only
def test_gradcheck_of_each_rungs_loss(rung_class):
    """float64, a vocabulary of 7 words, 4 dimensions: every parameter's gradient by central differences."""
    minigrad.manual_seed(0)
    model = rung_class(7, 4, 5).double()
    ids = np.random.default_rng(0).integers(0, 7, size=(2, 5))
    at, targets = np.array([4, 2]), np.array([3, 6])
    params = [p for _, p in model.named_parameters()]

    def loss(*_):
        return F.cross_entropy(model(ids, at), targets)
    assert gradcheck(loss, params, atol=1e-6, rtol=1e-4)


def test_the_average_rung_is_the_triangular_matrix_product():
    model = build(Average).double()
    x = np.random.default_rng(1).standard_normal((2, 5, D))
    context = model.context(Tensor(x)).data
    loop = np.stack([[x[b, :t + 1].mean(axis=0) for t in range(5)] for b in range(2)])
    np.testing.assert_allclose(context, loop, rtol=1e-12)
    np.testing.assert_array_equal(averaging_matrix(4)[3], [0.25] * 4)
    np.testing.assert_array_equal(averaging_matrix(4)[1], [0.5, 0.5, 0, 0])


def parameter_shapes(rung_class):
    return {name: p.shape for name, p in build(rung_class).named_parameters()}


def test_the_dot_product_rung_has_no_parameters_of_its_own():
    assert set(parameter_shapes(DotProduct)) == {"embedding.weight", "bias"}


def test_one_shared_map_gives_symmetric_scores_two_maps_do_not():
    ids = some_ids(1).inputs
    shared, separate = build(SharedMap), build(SeparateMaps)
    rng = np.random.default_rng(0)
    shared.w_q.weight.data[:] = rng.standard_normal((D, D))
    separate.w_k.weight.data[:] = rng.standard_normal((D, D))     # trained, the two maps differ
    with minigrad.no_grad():
        s = shared.scores(shared.embed(ids)).data[0]
        a = separate.scores(separate.embed(ids)).data[0]
    np.testing.assert_allclose(s, s.T, rtol=1e-5, atol=1e-5)
    assert np.abs(a - a.T).max() > 1e-2


def test_the_heads_rung_is_four_one_head_attentions_side_by_side():
    model = build(Heads).double()
    rng = np.random.default_rng(2)
    for layer in (model.w_q, model.w_k, model.w_v):
        layer.weight.data[:] = rng.standard_normal((D, D))
    x = rng.standard_normal((2, 6, D))
    context = model.context(Tensor(x)).data                        # (B, T, d)
    d_k = D // 4
    for h in range(4):
        part = slice(h * d_k, (h + 1) * d_k)
        q, k, v = ((x @ layer.weight.data)[..., part] for layer in (model.w_q, model.w_k, model.w_v))
        scores = q @ k.swapaxes(-1, -2) / np.sqrt(d_k) + np.where(np.tril(np.ones((6, 6))), 0, -np.inf)
        weights = np.exp(scores - scores.max(-1, keepdims=True))
        weights /= weights.sum(-1, keepdims=True)
        np.testing.assert_allclose(context[..., part], weights @ v, rtol=1e-10)


def test_the_full_block_is_the_decoder_only_model():
    from transformer.models.decoder_only import DecoderOnlyTransformer
    block = build(FullBlock)
    assert isinstance(block.model, DecoderOnlyTransformer)
    maps = block.attention_maps(some_ids(1).inputs)
    assert maps.shape == (2, 1, 4, T, T)


def test_the_pull_statistic_reads_the_last_row_of_the_weights():
    """A rung whose last row weighs the other animal above the asked one: every sentence counts
    as out-pulled; swap_positions finds the two animals where the sentence has them."""
    lang = Language(seed=0)
    swaps = [make_example("swap", c) for c in lang.combinations("held-out", "swap")[:6]]
    for example in swaps:
        (asked, last), other = swap_positions(example)
        words = ("<bos>",) + example.context
        assert words[asked] == words[last] == example.context[-1] and words[other] != words[asked]

    class Looks(DotProduct):
        def weights(self, ids):
            w = np.zeros(ids.shape + (ids.shape[1],))
            w[..., 0] = 1.0
            for b, example in enumerate(swaps):
                (asked, last), other = swap_positions(example)
                w[b, last] = 0.0
                w[b, last, other], w[b, last, asked] = 0.9, 0.1
            return w
    stats = pull_statistic(build(Looks), swaps)
    assert stats["out_pulls"] == 1.0 and stats["right_when_not"] is None
    assert 0.0 <= stats["right_when_out_pulls"] <= 1.0


TINY = dict(steps=4, d_model=8, eval_per_kind=5)


def without_seconds(result):
    table = result.to_json()
    for key in ("seconds", "cpu_seconds"):
        table.pop(key)
    table["config"].pop("jobs")
    for rung in table["rungs"]:
        rung.pop("seconds")
    return table


@pytest.mark.slow
def test_same_seeds_same_table_on_one_core_or_two():
    one = run_ladder(LadderConfig(jobs=1, seeds=(0, 1), **TINY))
    two = run_ladder(LadderConfig(jobs=2, seeds=(0, 1), **TINY))
    assert without_seconds(one) == without_seconds(two)
    assert [r.name for r in one.rungs] == [r.name for r in RUNGS]
    assert "shared map: max |S - Sᵀ|" in format_scores(one)
    swapped = run_ladder(LadderConfig(jobs=1, seeds=(1, 0), **TINY), rungs=[2]).rungs[0]
    assert swapped.accuracy == {k: v[::-1] for k, v in one.rungs[2].accuracy.items()}


@pytest.mark.slow
def test_command_prints_the_table_and_writes_json(tmp_path, capsys):
    out = tmp_path / "sub" / "ladder.json"
    picture = tmp_path / "ladder.png"
    assert main(["--steps", "2", "--seeds", "0,1", "--json", str(out), "--plot", str(picture)]) == 0
    assert picture.read_bytes()[:4] == b"\x89PNG"
    printed = capsys.readouterr().out
    assert "last word" in printed and "full block" in printed and "max |S - Sᵀ|" in printed
    assert "other out-pulls" in printed and "minimal pair" in printed
    table = json.loads(out.read_text())
    assert table["kinds"] == list(KINDS) and table["seeds"] == [0, 1]
    assert [r["name"] for r in table["rungs"]] == [r.name for r in RUNGS]
    for rung in table["rungs"]:
        assert set(rung) >= {"name", "idea", "accuracy", "example"}
        assert set(rung["accuracy"]) == set(table["kinds"])
        assert all(len(per_seed) == 2 and all(0 <= a <= 1 for a in per_seed) for per_seed in rung["accuracy"].values())
        assert rung["example"] == {} or {"context", "predicted", "answer", "reason", "seed"} <= set(rung["example"])
    with pytest.raises(SystemExit) as exit_info:
        main(["--steps", "0"])
    assert exit_info.value.code == 2
    assert main(["--steps", "1", "--seeds", "0", "--json", str(tmp_path)]) == 2
    assert "is a folder" in capsys.readouterr().err
    assert main(["--steps", "1", "--seeds", "0", "--json", str(out)]) == 2          # written before: needs --force
    assert "--force" in capsys.readouterr().err
    notes = tmp_path / "notes.json"
    notes.write_text('{"mine": 1}')
    assert main(["--steps", "1", "--seeds", "0", "--json", str(notes), "--force"]) == 2   # not a ladder table
    assert notes.read_text() == '{"mine": 1}'
    assert main(["--steps", "1", "--seed", "1", "--json", str(out), "--plot", str(picture), "--force"]) == 0
    assert json.loads(out.read_text())["seeds"] == [1]


@pytest.mark.parametrize("argv, message", [
    (["--seed", "-1"], "--seed must be a whole number >= 0, got -1"),
    (["--seeds", "3-x"], "--seeds takes whole numbers >= 0"),
    (["--seeds", "-1"], "--seeds takes whole numbers >= 0"),
    (["--seeds", "0,0"], "each seed once"),
    (["--seeds", "0-40"], "at most 20"),
    (["--seeds", "0-1000000"], "--seeds names 1,000,001 seeds; at most 20"),
    (["--rungs", ""], "--rungs names no rung"),
    (["--rungs", " , "], "--rungs names no rung"),
    (["--without", ""], "--without names no sentence kind"),
    (["--seeds", "0", "--seed", "1"], "not allowed with argument"),
    (["--json", "same.out", "--plot", "same.out"], "--json and --plot name the same file"),
])
def test_bad_arguments_are_one_line_and_exit_2_before_any_training(argv, message, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)

    def no_training(*args, **kwargs):
        raise AssertionError(f"{argv} started training instead of being refused")
    monkeypatch.setattr("transformer.commands.ladder.run_ladder", no_training)
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and err.count("\n") == 1 and message in err, err
    assert list(tmp_path.iterdir()) == []


def test_seed_lists_and_ranges():
    assert parse_seeds("0-4") == (0, 1, 2, 3, 4)
    assert parse_seeds("2,7, 9") == (2, 7, 9)
    assert parse_seeds("5") == (5,)


def test_a_wide_seed_range_is_refused_from_its_bounds_without_being_built():
    import tracemalloc
    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match="names 1,000,001 seeds"):
            parse_seeds("0-1000000")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1_000_000, f"{peak:,} bytes: the range was built before its length was checked"


def start_a_long_ladder(tmp_path):
    """The command in a session of its own, until its workers train (its first line is printed).
    If that line is not the one expected, the whole session is killed before the test fails: a
    ladder of 100,000 steps a rung would otherwise train on for hours after the test run."""
    import os
    import signal
    import subprocess
    import sys
    command = [sys.executable, "-c", "import sys; from dates_commands import attention_ladder; "
               "sys.exit(attention_ladder(['--steps', '100000', '--seeds', '0,1']))"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=open(tmp_path / "err", "w"), text=True,
                               start_new_session=True, cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    try:
        first = process.stdout.readline()
        assert first.startswith(f"training {len(RUNGS)} rungs"), first
    except BaseException:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=60)
        raise
    return process


def wait_for_workers(ladder):
    """Until the ladder's pool workers run and leave Ctrl-C to the parent (their initializer
    ignores SIGINT): the moment these tests signal, however slowly a busy machine starts them."""
    import signal
    from processes import group_members, ignored_signals, wait_for

    def workers_ready():
        workers = [pid for pid in group_members(ladder.pid) if pid != ladder.pid]
        return workers and all(signal.SIGINT in ignored_signals(pid) for pid in workers)
    assert wait_for(workers_ready, 300), "the ladder's workers never started"


def group_alive(pgid) -> bool:
    import os
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False


def wait_for_group_to_end(pgid, seconds=120) -> bool:
    from processes import wait_for
    return wait_for(lambda: not group_alive(pgid), seconds)


@pytest.fixture
def ladder_process(tmp_path):
    """A running ladder, whose whole process group is killed at the end however the test went."""
    import os
    import signal
    process = start_a_long_ladder(tmp_path)
    try:
        yield process
    finally:
        if group_alive(process.pid):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=60)


@pytest.mark.slow
def test_ctrl_c_stops_every_training_at_once(ladder_process, tmp_path):
    """Ctrl-C reaches the whole process group; the workers leave it to the parent, which stops them."""
    import os
    import signal
    wait_for_workers(ladder_process)
    os.killpg(ladder_process.pid, signal.SIGINT)
    assert ladder_process.wait(timeout=120) == 130
    assert (tmp_path / "err").read_text().strip() == "interrupted"
    assert wait_for_group_to_end(ladder_process.pid), "a worker outlived the ladder"


@pytest.mark.slow
def test_a_killed_ladder_takes_its_workers_along_without_a_traceback(ladder_process, tmp_path):
    import os
    import signal
    wait_for_workers(ladder_process)
    os.kill(ladder_process.pid, signal.SIGKILL)      # the parent alone, as an OOM killer would
    ladder_process.wait(timeout=60)
    assert wait_for_group_to_end(ladder_process.pid), "a worker outlived the ladder"
    assert "Traceback" not in (tmp_path / "err").read_text()


def test_ctrl_c_while_the_workers_start_stops_them_and_is_raised(monkeypatch):
    """A Ctrl-C in the moment the pool forks its workers is neither lost nor fatal to a worker
    that has not yet learned to leave Ctrl-C to the parent: it is raised once the pool exists,
    and the pool is gone by then."""
    import multiprocessing
    import os
    import signal

    from transformer.ladder import experiment
    made, real_pool, before = [], multiprocessing.Pool, signal.getsignal(signal.SIGINT)

    def pool_while_ctrl_c(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGINT)                 # pressed while the workers are forked
        made.append(real_pool(*args, **kwargs))
        return made[-1]
    monkeypatch.setattr(experiment.multiprocessing, "Pool", pool_while_ctrl_c)
    with pytest.raises(KeyboardInterrupt):
        experiment.worker_pool(2)
    assert made and all(not worker.is_alive() for worker in made[0]._pool)
    assert signal.getsignal(signal.SIGINT) is before                # the caller's handler is back
