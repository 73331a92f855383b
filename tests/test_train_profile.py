"""dates-train --profile N: step N runs inside minigrad.profile() and its table is printed;
without minigrad.profile the flag says so in one line."""
import contextlib

import pytest

import minigrad
from test_train_run import TINY, train


def test_without_the_profiler_the_flag_says_so_in_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.delattr(minigrad, "profile", raising=False)
    code, out, err = train(capsys, "--out", tmp_path / "run", "--max-steps", 3, "--profile", 2, *TINY)
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "--profile needs minigrad.profile()" in err
    assert not (tmp_path / "run").exists()


@pytest.mark.skipif(not hasattr(minigrad, "profile"), reason="minigrad.profile() is not in this minigrad")
def test_profile_prints_the_table_of_exactly_one_step(tmp_path, capsys, monkeypatch):
    tables, real_profile = [], minigrad.profile

    @contextlib.contextmanager
    def recording(*args, **kwargs):
        with real_profile(*args, **kwargs) as prof:
            yield prof
        tables.append(prof.table())

    monkeypatch.setattr(minigrad, "profile", recording)
    code, out, err = train(capsys, "--out", tmp_path / "run", "--max-steps", 4, "--profile", 2, *TINY)
    assert code == 0, err
    assert len(tables) == 1 and tables[0].strip() and tables[0] in out


@pytest.mark.skipif(not hasattr(minigrad, "profile"), reason="minigrad.profile() is not in this minigrad")
def test_profile_step_zero_is_refused(tmp_path, capsys):
    code, out, err = train(capsys, "--out", tmp_path / "run", "--max-steps", 3, "--profile", 0, *TINY)
    assert code == 2 and err.count("\n") == 1 and "--profile must be a step number >= 1" in err


def test_the_hook_profiles_step_n_only_and_prints_its_table(tmp_path, capsys, monkeypatch):
    """Against the API (a context manager whose result has .table()), with a stand-in profiler:
    the hook point works before the real one is merged."""
    from transformer.training.dates import DateTrainer
    profiled_steps, real_step = [], DateTrainer.train_step

    class StandIn:
        def __enter__(self):
            self.inside = True
            return self

        def __exit__(self, *exc):
            self.inside = False

        def table(self):
            return "STAND-IN PROFILE TABLE"

    def step(self):
        record = real_step(self)
        if profiler.inside:
            profiled_steps.append(record["step"])
        return record

    profiler = StandIn()
    profiler.inside = False
    monkeypatch.setattr(minigrad, "profile", lambda: profiler, raising=False)
    monkeypatch.setattr(DateTrainer, "train_step", step)
    code, out, err = train(capsys, "--out", tmp_path / "run", "--max-steps", 5, "--profile", 3, *TINY)
    assert code == 0, err
    assert profiled_steps == [3] and out.count("STAND-IN PROFILE TABLE") == 1


def test_a_profile_step_the_run_never_reaches_is_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(minigrad, "profile", contextlib.nullcontext, raising=False)
    code, out, err = train(capsys, "--out", tmp_path / "run", "--max-steps", 3, "--profile", 5, *TINY)
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "--profile 5 is not a step this run trains (steps 1 to 3)" in err
