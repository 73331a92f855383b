"""Tests for transformer.commands.dates (dates-train, dates-translate, dates-evaluate).

The entry points take an argv list and return an exit code. Bad input (not a date, an
impossible date, a loose format, a missing or corrupt checkpoint, a bad setting) must
give exit code 2 and a one-line ``error: ...`` on stderr, never a traceback. The
checkpoint is a tiny model trained for a few steps: accuracy does not matter here.
"""
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from transformer.commands import dates as cli
from transformer.commands import training_command
from transformer.models.config import ModelConfig
from transformer.tasks.dates import SRC_LEN, decode_batch, encode_batch
from transformer.decoding import beam_search, greedy_decode
from transformer.training.trainer import TrainConfig
from transformer.training.dates import DateTrainer
from transformer.files.trained_model import load_model

REPO = Path(__file__).resolve().parents[1]
TINY_ARGS = ["--d-model", "16", "--heads", "2", "--layers", "1", "--d-ff", "32", "--batch-size", "8",
             "--eval-every", "0", "--no-progress"]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    folder = tmp_path_factory.mktemp("cli-run")
    trainer = DateTrainer(ModelConfig(d_model=16, num_heads=2, num_encoder_layers=1, num_decoder_layers=1, d_ff=32),
                      TrainConfig(steps=3, batch_size=8, eval_every=0, checkpoint_every=0), out_dir=str(folder))
    for _ in range(3):
        trainer.train_step()
    path = folder / "model.npz"
    trainer.save(str(path))
    return str(path)


@pytest.fixture(scope="module")
def corrupt_checkpoint(tmp_path_factory):
    path = tmp_path_factory.mktemp("cli-bad") / "model.npz"
    path.write_bytes(b"PK\x03\x04 this is not really a zip file")
    return str(path)


def run(main, argv, capsys):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def assert_clean_failure(code, out, err, *fragments):
    assert code == 2
    assert err.startswith("error: ") and err.count("\n") == 1, f"not one line: {err!r}"
    assert "Traceback" not in err
    for fragment in fragments:
        assert fragment in err, f"{fragment!r} not in {err!r}"


def outputs(out):
    """'1996-09-08 -> September 8, 1996' lines -> {input: output}."""
    pairs = [line.split(" -> ", 1) for line in out.splitlines()]
    assert all(len(p) == 2 for p in pairs), out
    return dict(pairs)


# --------------------------------------------------------------------- translate
def test_translate_dates_from_arguments(checkpoint, capsys):
    code, out, err = run(cli.translate_main, ["1996-09-08", "1845-01-05", "--checkpoint", checkpoint], capsys)
    assert code == 0 and err == ""
    translated = outputs(out)
    assert list(translated) == ["1996-09-08", "1845-01-05"]
    expected = decode_batch(greedy_decode(load_model(checkpoint), encode_batch(["1996-09-08", "1845-01-05"], SRC_LEN)))
    assert list(translated.values()) == expected


@pytest.mark.parametrize("text, fragments", [
    ("hello", ["'hello'", "not a date in YYYY-MM-DD form"]),
    ("2023-02-30", ["2023-02-30", "day is out of range", "February 2023 has 28 days"]),
    ("1996-9-8", ["1996-9-8", "expected e.g. 1996-09-08"]),
    ("0999-12-31", ["outside the supported range"]),
    ("2023-13-01", ["month must be 01..12"]),
])
def test_translate_rejects_bad_dates(checkpoint, capsys, text, fragments):
    code, out, err = run(cli.translate_main, ["1996-09-08", text, "--checkpoint", checkpoint], capsys)
    assert_clean_failure(code, out, err, *fragments)
    assert out == ""


def test_translate_rejects_a_missing_checkpoint(tmp_path, capsys):
    missing = str(tmp_path / "nothing" / "model.npz")
    code, out, err = run(cli.translate_main, ["1996-09-08", "--checkpoint", missing], capsys)
    assert_clean_failure(code, out, err, missing, "does not exist")


def test_translate_rejects_a_corrupt_checkpoint(corrupt_checkpoint, capsys):
    code, out, err = run(cli.translate_main, ["1996-09-08", "--checkpoint", corrupt_checkpoint], capsys)
    assert_clean_failure(code, out, err, corrupt_checkpoint, "corrupt")


def test_translate_reads_stdin(checkpoint, capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.StringIO("1996-09-08\n\n  2000-01-01  \n"))
    code, out, err = run(cli.translate_main, ["--checkpoint", checkpoint], capsys)
    assert code == 0
    assert list(outputs(out)) == ["1996-09-08", "2000-01-01"]


def test_translate_with_empty_stdin_fails_cleanly(checkpoint, capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.StringIO("\n \n"))
    code, out, err = run(cli.translate_main, ["--checkpoint", checkpoint], capsys)
    assert_clean_failure(code, out, err, "no dates given")


def test_translate_bad_date_on_stdin_fails_cleanly(checkpoint, capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.StringIO("1996-09-08\nhello\n"))
    code, out, err = run(cli.translate_main, ["--checkpoint", checkpoint], capsys)
    assert_clean_failure(code, out, err, "hello")


def test_translate_with_beam_search(checkpoint, capsys):
    dates = ["1996-09-08", "2023-02-28", "1000-01-01"]
    code, out, err = run(cli.translate_main, [*dates, "--checkpoint", checkpoint, "--beam", "2"], capsys)
    assert code == 0
    expected = decode_batch(beam_search(load_model(checkpoint), encode_batch(dates, SRC_LEN), 2))
    assert list(outputs(out).values()) == expected


def test_translate_temperature_zero_and_top_k_one_are_greedy(checkpoint, capsys):
    dates = ["1996-09-08", "2023-02-28", "1000-01-01"]
    greedy = outputs(run(cli.translate_main, [*dates, "--checkpoint", checkpoint], capsys)[1])
    for extra in (["--temperature", "0"], ["--temperature", "0.8", "--top-k", "1", "--seed", "1"]):
        code, out, err = run(cli.translate_main, [*dates, "--checkpoint", checkpoint, *extra], capsys)
        assert code == 0 and outputs(out) == greedy, extra


def test_translate_sampling_is_seeded(checkpoint, capsys):
    argv = ["1996-09-08", "2023-02-28", "--checkpoint", checkpoint, "--temperature", "1.5", "--seed", "7"]
    first = run(cli.translate_main, argv, capsys)
    assert first[0] == 0
    assert run(cli.translate_main, argv, capsys) == first


@pytest.mark.parametrize("extra, fragment", [
    (["--beam", "0"], "--beam must be at least 1"),
    (["--temperature", "-1"], "--temperature must be >= 0"),
    (["--temperature", "1", "--top-k", "0"], "top-k"),
])
def test_translate_rejects_bad_decoding_options(checkpoint, capsys, extra, fragment):
    code, out, err = run(cli.translate_main, ["1996-09-08", "--checkpoint", checkpoint, *extra], capsys)
    assert_clean_failure(code, out, err, fragment)


def test_translate_beam_and_temperature_are_exclusive(checkpoint, capsys):
    with pytest.raises(SystemExit) as info:
        cli.translate_main(["1996-09-08", "--checkpoint", checkpoint, "--beam", "2", "--temperature", "1"])
    assert info.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err


def test_example_script_fails_cleanly_in_a_subprocess():
    result = subprocess.run([sys.executable, str(REPO / "examples" / "translate_dates.py"), "hello",
                             "--checkpoint", "x"], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert result.stderr.startswith("error: ") and "'hello'" in result.stderr
    assert result.stdout == ""


# ---------------------------------------------------------------------- evaluate
def test_evaluate_prints_exact_match(checkpoint, capsys):
    code, out, err = run(cli.evaluate_main, ["--checkpoint", checkpoint, "--show", "2"], capsys)
    assert code == 0
    assert "held-out dates: 2000" in out
    line = next(line for line in out.splitlines() if line.startswith("exact match:"))
    assert line.rstrip().endswith("%")
    assert len([line for line in out.splitlines() if line.strip().startswith("wrong:")]) <= 2


def test_evaluate_json(checkpoint, capsys):
    code, out, err = run(cli.evaluate_main, ["--checkpoint", checkpoint, "--json", "--show", "0"], capsys)
    assert code == 0
    result = json.loads(out)
    assert result["count"] == 2000 and 0.0 <= result["exact_match"] <= 1.0
    assert 0.0 <= result["char_accuracy"] <= 1.0 and result["wrong"] == []


@pytest.mark.parametrize("which", ["missing", "corrupt"])
def test_evaluate_rejects_bad_checkpoints(tmp_path, corrupt_checkpoint, capsys, which):
    path = str(tmp_path / "none.npz") if which == "missing" else corrupt_checkpoint
    code, out, err = run(cli.evaluate_main, ["--checkpoint", path], capsys)
    assert_clean_failure(code, out, err, path)


def test_evaluate_rejects_beam_zero(checkpoint, capsys):
    code, out, err = run(cli.evaluate_main, ["--checkpoint", checkpoint, "--beam", "0"], capsys)
    assert_clean_failure(code, out, err, "--beam must be at least 1")


# ------------------------------------------------------------------------- train
def test_train_tiny_run_then_resume(tmp_path, capsys):
    out_dir = str(tmp_path / "run")
    code, out, err = run(cli.train_main, ["--out", out_dir, "--steps", "3", *TINY_ARGS], capsys)
    assert code == 0, err
    assert "held-out exact match" in out and "steps 3" in out
    assert sorted(os.listdir(out_dir)) == ["model.npz", "train_log.jsonl"]
    checkpoint = os.path.join(out_dir, "model.npz")
    code, out, err = run(cli.train_main, ["--resume", checkpoint, "--steps", "5", "--out", out_dir,
                                          "--no-progress"], capsys)
    assert code == 0, err
    assert "resuming" in out and "at step 3 (at most 5)" in out
    with open(os.path.join(out_dir, "train_log.jsonl")) as log:
        assert [json.loads(line)["step"] for line in log] == [1, 2, 3, 4, 5]


def test_train_resume_of_a_finished_run_does_not_crash(checkpoint, tmp_path, capsys):
    """Resuming a checkpoint that already reached its last step trains 0 steps; the
    summary must still print (no TypeError on the missing step time)."""
    finished = DateTrainer.resume(checkpoint)
    finished.config.steps = finished.step
    path = str(tmp_path / "finished.npz")
    finished.save(path)
    code, out, err = run(cli.train_main, ["--resume", path, "--out", str(tmp_path), "--no-progress"], capsys)
    assert code == 0, err
    assert "held-out exact match" in out


@pytest.mark.parametrize("argv, fragment", [
    (["--heads", "3"], "not divisible"),
    (["--steps", "-1"], "steps must be an integer >= 1"),
    (["--steps", "0"], "steps"),
    (["--dropout", "1.5"], "dropout"),
    (["--batch-size", "0"], "batch_size"),
    (["--label-smoothing", "2"], "label"),
])
def test_train_rejects_bad_settings_before_training(tmp_path, capsys, monkeypatch, argv, fragment):
    def refuse(*args, **kwargs):
        raise AssertionError("training started despite a bad setting")

    monkeypatch.setattr(DateTrainer, "run", refuse)
    code, out, err = run(cli.train_main, ["--out", str(tmp_path), *TINY_ARGS, *argv], capsys)
    assert_clean_failure(code, out, err, fragment)


@pytest.mark.parametrize("which", ["missing", "corrupt"])
def test_train_rejects_a_bad_resume_checkpoint(tmp_path, corrupt_checkpoint, capsys, which):
    path = str(tmp_path / "none.npz") if which == "missing" else corrupt_checkpoint
    code, out, err = run(cli.train_main, ["--resume", path, "--out", str(tmp_path)], capsys)
    assert_clean_failure(code, out, err, path)


# ------------------------------------------------------------- bad numbers
@pytest.mark.parametrize("argv, fragment", [
    (["--lr", "nan"], "--lr: must be a finite number"),
    (["--lr", "inf"], "--lr: must be a finite number"),
    (["--lr=-1e-3"], "lr must be a finite number in"),
    (["--lr", "0"], "lr must be positive"),
    (["--eval-every", "-1"], "eval_every must be an integer >= 0"),
    (["--batch-size", "-8"], "batch_size"),
    (["--warmup", "-1"], "warmup"),
    (["--clip", "nan"], "--clip: must be a finite number"),
    (["--clip", "-1"], "clip must be"),
    (["--target-accuracy", "1.5"], "target_accuracy"),
    (["--target-accuracy", "nan"], "--target-accuracy: must be a finite number"),
    (["--cooldown", "0"], "cooldown"),
    (["--cooldown-at", "-0.5"], "cooldown_at"),
    (["--seed", "-1"], "seed"),
    (["--dropout", "nan"], "--dropout: must be a finite number"),
    (["--d-model", "0"], "d_model must be a positive integer"),
    (["--max-steps", "abc"], "invalid int value"),
])
def test_train_rejects_bad_numbers_in_one_line(tmp_path, capsys, monkeypatch, argv, fragment):
    monkeypatch.setattr(DateTrainer, "run", lambda *a, **k: pytest.fail("training started despite a bad setting"))
    code, out, err = _run_exit(cli.train_main, ["--out", str(tmp_path / "run"), *TINY_ARGS, *argv], capsys)
    assert_clean_failure(code, out, err, fragment)
    assert not (tmp_path / "run").exists()                  # nothing created for a bad command


def _run_exit(main, argv, capsys):
    """Like run(), but argparse's own errors (SystemExit) count as an exit code too."""
    try:
        code = main(argv)
    except SystemExit as exit_:
        code = exit_.code
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("extra, fragment", [
    (["--temperature", "nan"], "--temperature: must be a finite number"),
    (["--temperature", "inf"], "--temperature: must be a finite number"),
    (["--temperature", "-1"], "--temperature must be >= 0"),
    (["--temperature", "1", "--seed", "-2"], "--seed must be >= 0"),
    (["--beam", "-3"], "--beam must be at least 1"),
])
def test_translate_rejects_bad_numbers_in_one_line(checkpoint, capsys, extra, fragment):
    code, out, err = _run_exit(cli.translate_main, ["1996-09-08", "--checkpoint", checkpoint, *extra], capsys)
    assert_clean_failure(code, out, err, fragment)
    assert out == ""


@pytest.mark.parametrize("extra, fragment", [(["--show", "-1"], "--show must be >= 0"),
                                             (["--beam", "x"], "invalid int value")])
def test_evaluate_rejects_bad_numbers_in_one_line(checkpoint, capsys, extra, fragment):
    code, out, err = _run_exit(cli.evaluate_main, ["--checkpoint", checkpoint, *extra], capsys)
    assert_clean_failure(code, out, err, fragment)


def test_a_non_npz_checkpoint_is_one_line(tmp_path, capsys):
    text = tmp_path / "model.txt"
    text.write_text("just some notes\n")
    for main, argv in ((cli.translate_main, ["1996-09-08", "--checkpoint", str(text)]),
                       (cli.evaluate_main, ["--checkpoint", str(text)]),
                       (cli.train_main, ["--resume", str(text), "--out", str(tmp_path / "o")])):
        code, out, err = run(main, argv, capsys)
        assert_clean_failure(code, out, err, str(text), "not a .npz archive")


def test_closed_stdout_ends_quietly(checkpoint):
    """`dates-translate ... | head -1`: the reader goes away; no BrokenPipeError traceback."""
    dates = [f"19{y:02d}-01-01" for y in range(100)]
    process = subprocess.Popen([sys.executable, str(REPO / "examples" / "translate_dates.py"), *dates,
                                "--checkpoint", checkpoint], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               cwd=REPO)
    process.stdout.close()                                    # the reader is gone before anything is written
    err = process.stderr.read().decode()
    process.wait(timeout=120)
    assert process.returncode == cli.EXIT_BROKEN_PIPE, err
    assert "Traceback" not in err and "BrokenPipe" not in err and "Exception ignored" not in err, err


# ------------------------------------------------------ compile notice, bar
@pytest.mark.parametrize("cold", [True, False])
def test_compile_notice_only_when_the_training_kernels_are_cold(capsys, monkeypatch, cold):
    import minigrad.kernels
    monkeypatch.setattr(minigrad.kernels, "cache_is_cold", lambda training=True: cold and training)
    compiled = []
    monkeypatch.setattr(minigrad.kernels, "compile_training_kernels", lambda: compiled.append(True))
    training_command.compile_if_cold(6)
    assert capsys.readouterr().err == ("compiling kernels, first run only: ~6 s\n" if cold else "")
    assert compiled == ([True] if cold else [])


@pytest.mark.parametrize("cold", [True, False])
def test_decoding_commands_decode_on_the_numpy_twins(checkpoint, capsys, monkeypatch, cold):
    """Decoding is no faster with the kernels and loading them costs start-up time (compiling
    them, on a cold cache, seconds): translate decodes on the numpy twins, cache warm or cold."""
    import minigrad.kernels
    from transformer import decoding
    monkeypatch.setattr(minigrad.kernels, "cache_is_cold", lambda training=True: cold)
    backends = []
    real = decoding.greedy_decode

    def spy(*args, **kwargs):
        backends.append(minigrad.kernels.get_backend())
        return real(*args, **kwargs)

    monkeypatch.setattr(decoding, "greedy_decode", spy)
    code, out, err = run(cli.translate_main, ["1996-09-08", "--checkpoint", checkpoint], capsys)
    assert code == 0 and err == "" and backends == ["numpy"]
    assert minigrad.kernels.get_backend() == "numba"          # switched back afterwards


def test_progress_bar_starts_after_the_first_step(tmp_path, monkeypatch):
    """The bar's clock (and so its rate and ETA) must not include the first step's compile."""
    import tqdm
    created = []
    real = tqdm.tqdm

    def spy(*args, **kwargs):
        created.append((trainer.step, kwargs.get("initial")))
        return real(*args, **kwargs)

    monkeypatch.setattr(tqdm, "tqdm", spy)
    trainer = DateTrainer(ModelConfig(d_model=16, num_heads=2, num_encoder_layers=1, num_decoder_layers=1, d_ff=32),
                      TrainConfig(steps=3, batch_size=8, target_accuracy=0), out_dir=str(tmp_path))
    monkeypatch.setattr(DateTrainer, "evaluate", lambda self, limit=None, show_wrong=5: {
        "exact_match": 0.0, "char_accuracy": 0.0, "count": 1, "wrong": []})
    trainer.run(progress=False)
    assert created == [(1, 1)]


@pytest.mark.parametrize("main, argv", [(cli.train_main, ["--max-steps", "1"]),
                                        (cli.translate_main, ["1996-09-08"]), (cli.evaluate_main, [])])
def test_a_bad_blas_thread_setting_is_one_line_before_any_work(main, argv, capsys, monkeypatch):
    monkeypatch.setenv("MINIGRAD_BLAS_THREADS", "many")
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and err.count("\n") == 1 and "MINIGRAD_BLAS_THREADS" in err
