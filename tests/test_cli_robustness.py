"""Every console script survives its surroundings: a closed or full stdout or stderr, stdin
as an endless or binary stream, numbers too large to honour, Ctrl-C at any moment. Each
case ends with a documented exit code and at most one line on stderr, never a traceback;
a training run whose stdout goes away saves its last step first.
"""
import configparser
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from transformer.commands import dates as cli

from transformer.commands import console
from transformer.models.config import ModelConfig
from transformer.training.trainer import TrainConfig
from transformer.training.dates import DateTrainer

REPO = Path(__file__).resolve().parents[1]
TINY_ARGS = ["--d-model", "16", "--heads", "2", "--layers", "1", "--d-ff", "32", "--batch-size", "8",
             "--eval-every", "0", "--no-progress"]


def console_scripts() -> dict:
    """name -> 'module:function', as setup.cfg installs them (so a new script is tested too)."""
    config = configparser.ConfigParser()
    config.read(REPO / "setup.cfg")
    lines = config["options.entry_points"]["console_scripts"].strip().splitlines()
    return dict(line.replace(" ", "").split("=") for line in lines)


def command(name, *args):
    """What the installed console script runs, without needing it on PATH."""
    module, function = console_scripts()[name].split(":")
    return [sys.executable, "-c", f"import sys; from {module} import {function} as m; sys.exit(m())", *args]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    folder = tmp_path_factory.mktemp("robust-run")
    trainer = DateTrainer(ModelConfig(d_model=16, num_heads=2, num_encoder_layers=1, num_decoder_layers=1, d_ff=32),
                      TrainConfig(steps=2, batch_size=8, eval_every=0, checkpoint_every=0), out_dir=str(folder))
    trainer.train_step()
    trainer.train_step()
    trainer.save(str(folder / "model.npz"))
    return str(folder / "model.npz")


def cheap_arguments(name, checkpoint, folder):
    log = folder / "log.jsonl"
    log.write_text("".join(json.dumps({"step": s, "loss": 1.0 / s}) + "\n" for s in (1, 2, 3)))
    return {"dates-train": ["--out", str(folder / "run"), "--max-steps", "2", *TINY_ARGS],
            "dates-translate": ["1845-01-05", "--checkpoint", checkpoint],
            "dates-evaluate": ["--checkpoint", checkpoint, "--show", "0"],
            "dates-attention-graph": ["--checkpoint", checkpoint, "--out", str(folder / "graph")],
            "dates-heatmaps": ["--checkpoint", checkpoint, "--out-dir", str(folder / "maps")],
            "dates-plot-training": [str(log), "--out", str(folder / "curves.png")],
            "dates-explain": ["--checkpoint", checkpoint],
            "dates-backward-animation": ["--out", str(folder / "anim"), "--format", "html"]}.get(name, ["--help"])


def run(argv, **kwargs):
    if "input" not in kwargs:
        kwargs.setdefault("stdin", subprocess.DEVNULL)
    kwargs.setdefault("timeout", 300)
    return subprocess.run(argv, capture_output="stdout" not in kwargs and "stderr" not in kwargs, text=True,
                          cwd=REPO, **kwargs)


def assert_one_line(err, *fragments):
    assert err.count("\n") == 1 and "Traceback" not in err, err
    for fragment in fragments:
        assert fragment in err, err


# ------------------------------------------------------ stdout / stderr closed or full
@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(console_scripts()))
def test_every_console_script_survives_a_full_or_closed_stdout(name, checkpoint, tmp_path):
    args = cheap_arguments(name, checkpoint, tmp_path)
    with open("/dev/full", "w") as full:
        result = subprocess.run(command(name, *args), stdout=full, stderr=subprocess.PIPE, text=True,
                                stdin=subprocess.DEVNULL, timeout=300, cwd=REPO)
    assert result.returncode == console.EXIT_OUTPUT_LOST, result.stderr
    assert result.stderr.endswith("error: cannot write to stdout (No space left on device)\n"), result.stderr
    assert "Traceback" not in result.stderr and "Exception ignored" not in result.stderr

    closed = subprocess.run(command(name, *args), stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL,
                            timeout=300, cwd=REPO, preexec_fn=lambda: os.close(1))
    assert closed.returncode == console.EXIT_OUTPUT_LOST
    assert_one_line(closed.stderr, "stdout is closed")


@pytest.mark.parametrize("redirect", ["closed", "full"])
def test_a_closed_or_full_stderr_changes_nothing_else(checkpoint, redirect):
    argv = command("dates-translate", "1845-01-05", "not-a-date", "--checkpoint", checkpoint)
    if redirect == "closed":
        result = subprocess.run(argv, stdout=subprocess.PIPE, text=True, timeout=300, cwd=REPO,
                                preexec_fn=lambda: os.close(2))
    else:
        with open("/dev/full", "w") as full:
            result = subprocess.run(argv, stdout=subprocess.PIPE, stderr=full, text=True, timeout=300, cwd=REPO)
    assert result.returncode == 2 and result.stdout == ""        # the error went nowhere, not to stdout
    ok = subprocess.run(argv[:-3] + ["--checkpoint", checkpoint], stdout=subprocess.PIPE, text=True,
                        timeout=300, cwd=REPO, preexec_fn=lambda: os.close(2))
    assert ok.returncode == 0 and ok.stdout.startswith("1845-01-05 -> ")


def test_heatmaps_into_head_c1_is_quiet(checkpoint, tmp_path):
    process = subprocess.Popen(command("dates-heatmaps", "--checkpoint", checkpoint, "--out-dir", str(tmp_path)),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO)
    process.stdout.read(1)
    process.stdout.close()
    err = process.stderr.read().decode()
    assert process.wait(timeout=300) in (0, console.EXIT_OUTPUT_LOST)
    assert "Traceback" not in err and "BrokenPipe" not in err and "Exception ignored" not in err, err


def test_training_whose_stdout_closes_saves_and_says_how_to_resume(tmp_path):
    """`dates-train ... | head -1`: the reader leaves after the first line; the run saves its
    last completed step, says so on stderr and exits with 141 (before: no checkpoint, silence)."""
    out = tmp_path / "run"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}          # every print reaches the pipe at once
    process = subprocess.Popen(command("dates-train", "--out", str(out), "--max-steps", "400",
                                       *TINY_ARGS[:-3], "--eval-every", "3", "--no-progress"),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=REPO)
    first = process.stdout.readline()
    process.stdout.close()                                  # what `head -1` does
    err = process.stderr.read().decode()
    assert process.wait(timeout=300) == console.EXIT_OUTPUT_LOST, err
    assert first.startswith(b"model:")
    lines = [line for line in err.splitlines() if not line.startswith("compiling kernels")]
    assert len(lines) == 1 and "checkpoint saved to" in lines[0] and "resume with: dates-train --resume" in lines[0]
    from transformer.files.checkpoint import load_checkpoint
    step = load_checkpoint(str(out / "model.npz"))[2]["step"]
    assert 1 <= step < 400 and f"at step {step};" in lines[0]


# ----------------------------------------------------------------------------- stdin
def test_stdin_is_translated_in_batches_as_it_comes(checkpoint):
    """The first translations come out while stdin is still open (before: all of stdin was
    read first, so `yes 1845-01-05 | dates-translate` grew without bound)."""
    process = subprocess.Popen(command("dates-translate", "--checkpoint", checkpoint), stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO)
    process.stdin.write(b"1845-01-05\n" * (cli.STDIN_BATCH + 10))
    process.stdin.flush()
    first = []
    reader = threading.Thread(target=lambda: first.append(process.stdout.readline()))
    reader.start()
    reader.join(timeout=120)
    try:
        assert first and first[0].startswith(b"1845-01-05 -> "), "no output while stdin stayed open"
    finally:
        process.stdin.close()
        process.stdout.read()
        process.wait(timeout=120)
    assert process.returncode == 0


def test_bad_stdin_lines_get_one_error_each_and_the_rest_is_translated(checkpoint):
    garbage = bytes(b for b in range(256) if b != ord("\n")) * 40     # 10 kB of binary without a newline
    data = b"1845-01-05\nhello\n" + garbage + b"\n\xff\xfe\n2000-02-29\n"
    result = subprocess.run(command("dates-translate", "--checkpoint", checkpoint), input=data,
                            capture_output=True, timeout=300, cwd=REPO)
    assert result.returncode == 2
    assert [line.split(" -> ")[0] for line in result.stdout.decode().splitlines()] == ["1845-01-05", "2000-02-29"]
    errors = result.stderr.decode().splitlines()
    assert len(errors) == 3 and all(line.startswith("error: stdin line ") for line in errors), errors
    assert "stdin line 2: 'hello'" in errors[0] and "line 3: longer than" in errors[1] and "line 4: not UTF-8" in errors[2]


def test_translate_with_stdin_closed_is_one_line(checkpoint):
    result = run(command("dates-translate", "--checkpoint", checkpoint), stdin=None, preexec_fn=lambda: os.close(0))
    assert result.returncode == 2
    assert_one_line(result.stderr, "stdin is closed")


def test_translate_help_documents_the_exit_codes():
    result = run(command("dates-translate", "--help"))
    assert "141" in result.stdout and "stdin line N" in result.stdout


# ------------------------------------------------------------------------ beam width
@pytest.mark.parametrize("main, argv", [(cli.translate_main, ["1845-01-05"]), (cli.evaluate_main, [])])
@pytest.mark.parametrize("beam", ["99999999999999999999", "1000000", str(2 ** 31), "101"])
def test_a_huge_beam_is_one_line_naming_the_limit(checkpoint, capsys, main, argv, beam):
    code = main([*argv, "--checkpoint", checkpoint, "--beam", beam])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert_one_line(err, "--beam must be at most 100", beam)


def test_evaluate_with_a_wide_beam_decodes_in_smaller_batches(checkpoint, monkeypatch):
    from transformer.training import evaluation
    from transformer.tasks.dates import DateDataset
    from transformer.files.trained_model import load_model
    widths = []
    real = evaluation.beam_search
    monkeypatch.setattr(evaluation, "beam_search", lambda model, src, k: widths.append(len(src) * k) or real(model, src, k))
    data = DateDataset()
    evaluation.evaluate(load_model(checkpoint), data.test_src[:30], data.test_tgt[:30], batch_size=40, beam_size=8)
    assert widths and max(widths) <= 40


# --------------------------------------------------------------------------- Ctrl-C
@pytest.mark.parametrize("name", ["dates-evaluate", "dates-heatmaps"])
def test_ctrl_c_while_a_console_script_starts_is_one_line_and_130(checkpoint, tmp_path, name):
    """SIGINT as soon as numpy is loaded: the command's modules are still being imported."""
    import signal
    import time
    process = subprocess.Popen(command(name, *cheap_arguments(name, checkpoint, tmp_path)), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, cwd=REPO)
    deadline = time.monotonic() + 60
    while "_multiarray_umath" not in Path(f"/proc/{process.pid}/maps").read_text():
        assert time.monotonic() < deadline and process.poll() is None
        time.sleep(0.002)
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=120)
    assert process.returncode == console.EXIT_INTERRUPTED and err == "interrupted\n", err


def test_ctrl_c_anywhere_in_a_command_is_one_line_and_130(capsys):
    @console.console_script
    def main(argv=None):
        raise KeyboardInterrupt
    assert main([]) == console.EXIT_INTERRUPTED
    assert capsys.readouterr().err == "interrupted\n"


def test_ctrl_c_during_the_closing_summary_says_the_run_finished(tmp_path, capsys, monkeypatch):
    def interrupted(*args):
        raise KeyboardInterrupt
    monkeypatch.setattr(cli, "_print_summary", interrupted)
    code = cli.train_main(["--out", str(tmp_path / "run"), "--max-steps", "2", *TINY_ARGS])
    err = capsys.readouterr().err
    assert code == console.EXIT_INTERRUPTED
    assert_one_line(err.splitlines()[-1] + "\n", "finished", "model.npz")
    assert (tmp_path / "run" / "model.npz").exists()


# ---------------------------------------------------------- sizes and thread counts
@pytest.mark.parametrize("argv, fragment", [
    (["--batch-size", "99999999999999999999"], "--batch-size: must be at most 16,384"),
    (["--d-ff", "10000000"], "--d-ff: must be at most 16,384"),
    (["--layers", "100000"], "--layers: must be at most 64"),
    (["--d-model", "100000"], "--d-model: must be at most 4,096"),
    (["--d-model", "4096", "--d-ff", "16384", "--layers", "8"], "more than the limit of 50,000,000"),
    (["--batch-size", "16384", "--d-ff", "4096", "--layers", "4"], "lower --batch-size"),
])
def test_train_refuses_sizes_beyond_the_limits_in_one_line(tmp_path, capsys, monkeypatch, argv, fragment):
    monkeypatch.setattr(DateTrainer, "__init__", lambda *a, **k: pytest.fail("a model was built"))
    try:
        code = cli.train_main(["--out", str(tmp_path / "run"), *argv])
    except SystemExit as exit_:
        code = exit_.code
    out, err = capsys.readouterr()
    assert code == 2
    assert_one_line(err, fragment)
    assert not (tmp_path / "run").exists() or not os.listdir(tmp_path / "run")


@pytest.mark.parametrize("argv, fragment", [(["--d-model", "100000"], "more than the limit of 50,000,000"),
                                            (["--layers", "100000"], "more than the limit of 50,000,000")])
def test_viz_tools_refuse_a_huge_fresh_model_in_one_line(tmp_path, capsys, argv, fragment):
    from transformer.commands import explain
    code = explain.main(["--untrained", *argv])
    assert code == 2
    assert_one_line(capsys.readouterr().err, fragment)


@pytest.mark.parametrize("value, fragment", [("99999999999999999999999", "<= 256"), ("0", ">= 1")])
def test_a_huge_blas_thread_count_is_one_line(checkpoint, value, fragment):
    result = run(command("dates-translate", "1845-01-05", "--checkpoint", checkpoint),
                 env={**os.environ, "MINIGRAD_BLAS_THREADS": value})
    assert result.returncode == 2 and result.stdout == ""
    assert_one_line(result.stderr, "MINIGRAD_BLAS_THREADS", fragment)


def test_more_blas_threads_than_cores_is_a_one_line_note(checkpoint):
    cores = os.cpu_count()
    result = run(command("dates-translate", "1845-01-05", "--checkpoint", checkpoint),
                 env={**os.environ, "MINIGRAD_BLAS_THREADS": str(cores + 1)})
    assert result.returncode == 0 and result.stdout.startswith("1845-01-05 -> ")
    assert_one_line(result.stderr, f"MINIGRAD_BLAS_THREADS={cores + 1} is more than this machine's {cores} cores")


# ------------------------------------------------------------------ training logs
BAD_LOG_LINES = {"invalid UTF-8": b'{"step": 2, "loss": 0.5, "note": "\xff\xfe"}\n',
                 "deep nesting": b"[" * 200_000 + b"\n",
                 "huge line": b'{"step": 2, "loss": ' + b"1" * 100_000 + b"}\n"}


@pytest.mark.parametrize("kind", sorted(BAD_LOG_LINES))
def test_plot_training_names_a_bad_log_line_in_one_line(tmp_path, capsys, kind):
    from transformer.commands import heatmaps
    log = tmp_path / "train_log.jsonl"
    log.write_bytes(b'{"step": 1, "loss": 1.0}\n' + BAD_LOG_LINES[kind])
    code = heatmaps.curves_main([str(log), "--out", str(tmp_path / "c.png")])
    assert code == 2
    assert_one_line(capsys.readouterr().err, "line 2: not a training-log record")


@pytest.mark.parametrize("kind", sorted(BAD_LOG_LINES))
def test_resume_leaves_a_bad_log_line_out(checkpoint, tmp_path, capsys, kind):
    import shutil
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    shutil.copy(checkpoint, run_dir / "model.npz")
    (run_dir / "train_log.jsonl").write_bytes(b'{"step": 1, "loss": 1.0}\n' + BAD_LOG_LINES[kind]
                                              + b'{"step": 2, "loss": 0.9}\n')
    code = cli.train_main(["--resume", str(run_dir / "model.npz"), "--max-steps", "3", "--no-progress"])
    assert code == 0, capsys.readouterr().err
    steps = [json.loads(line)["step"] for line in (run_dir / "train_log.jsonl").read_text().splitlines()]
    assert steps == [1, 2, 3]


@pytest.mark.parametrize("special", ["fifo", "/dev/zero"])
def test_plot_training_refuses_a_fifo_or_a_device_at_once(tmp_path, special):
    path = "/dev/zero" if special == "/dev/zero" else str(tmp_path / "log.fifo")
    if special == "fifo":
        os.mkfifo(path)
    result = run(command("dates-plot-training", path, "--out", str(tmp_path / "c.png")), timeout=60)
    assert result.returncode == 2
    assert_one_line(result.stderr, "not a regular file")


# ----------------------------------------------------------------- the run folder
def test_a_new_run_refuses_to_replace_a_log_whose_checkpoint_was_moved(tmp_path, capsys):
    log = tmp_path / "train_log.jsonl"
    log.write_text('{"step": 1, "loss": 2.0}\n')
    code = cli.train_main(["--out", str(tmp_path), "--max-steps", "2", *TINY_ARGS])
    assert code == 2
    assert_one_line(capsys.readouterr().err, "already holds a training log", "--force")
    assert log.read_text() == '{"step": 1, "loss": 2.0}\n'
    assert cli.train_main(["--out", str(tmp_path), "--max-steps", "2", "--force", *TINY_ARGS]) == 0


def test_a_lock_path_that_is_a_folder_is_one_line(tmp_path, capsys):
    from transformer.files.run_dir import LOCK_NAME
    (tmp_path / LOCK_NAME).mkdir()
    code = cli.train_main(["--out", str(tmp_path), "--max-steps", "2", *TINY_ARGS])
    assert code == 2
    assert_one_line(capsys.readouterr().err, "is a folder", LOCK_NAME)


def _contend(folder, rounds, start, done, results):
    """One of two processes: each round, try to take the (stale) lock at the same instant."""
    from transformer.files.run_dir import RunFolderError, RunLock
    for _ in range(rounds):
        start.wait()
        lock = RunLock(folder)
        try:
            lock.acquire()
            results.put(1)
        except RunFolderError:
            results.put(0)
        done.wait()                    # both have tried: the winner lets go for the next round
        lock.release()
        done.wait()


def test_two_runs_taking_over_one_stale_lock_at_once_never_both_get_it(tmp_path):
    import multiprocessing
    from transformer.files.run_dir import LOCK_NAME
    context = multiprocessing.get_context("fork")
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()                                  # a pid that no longer runs: the lock is stale
    rounds = 1000
    start, done = context.Barrier(3), context.Barrier(3)
    results = context.Queue()
    workers = [context.Process(target=_contend, args=(str(tmp_path), rounds, start, done, results))
               for _ in range(2)]
    for worker in workers:
        worker.start()
    winners = []
    try:
        for _ in range(rounds):
            (tmp_path / LOCK_NAME).write_text(f"{dead.pid}\n")
            start.wait(timeout=60)
            winners.append(results.get(timeout=60) + results.get(timeout=60))
            done.wait(timeout=60)
            done.wait(timeout=60)
    finally:
        for worker in workers:
            worker.join(timeout=60)
            if worker.is_alive():
                worker.kill()
    assert winners == [1] * rounds, f"{winners.count(2)} rounds with two winners, {winners.count(0)} with none"


# ----------------------------------------------------------------------- sampling
@pytest.mark.parametrize("temperature", ["1e-320", "5e-324", "1e-300", "1e-30"])
def test_a_tiny_temperature_samples_the_greedy_output(checkpoint, capsys, temperature):
    """As T -> 0 sampling becomes greedy; before, logits / T overflowed and printed garbage."""
    dates = ["1845-01-05", "1996-09-08", "2023-02-28", "1000-01-01"]
    assert cli.translate_main([*dates, "--checkpoint", checkpoint]) == 0
    greedy = capsys.readouterr().out
    assert cli.translate_main([*dates, "--checkpoint", checkpoint, "--temperature", temperature, "--seed", "3"]) == 0
    out, err = capsys.readouterr()
    assert out == greedy and err == ""


# ------------------------------------------------------------------ unclear inputs
@pytest.mark.parametrize("name, argv", [
    ("dates-train", ["--resume", ""]), ("dates-train", ["--out", " "]),
    ("dates-translate", ["1845-01-05", "--checkpoint", ""]), ("dates-evaluate", ["--checkpoint", ""]),
    ("dates-heatmaps", ["--checkpoint", ""]), ("dates-heatmaps", ["--out-dir", ""]),
    ("dates-attention-graph", ["--out", ""]), ("dates-backward-animation", ["--out", ""]),
    ("dates-plot-training", ["--out", ""]), ("dates-explain", ["--checkpoint", ""]),
])
def test_an_empty_path_is_refused_in_one_line(tmp_path, capsys, monkeypatch, name, argv):
    import importlib
    monkeypatch.chdir(tmp_path)
    module, function = console_scripts()[name].split(":")
    main = getattr(importlib.import_module(module), function)
    try:
        code = main(argv)
    except SystemExit as exit_:
        code = exit_.code
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert_one_line(err, "empty")
    assert os.listdir(tmp_path) == []


def test_viz_argparse_errors_are_one_line(capsys):
    from transformer.commands import attention_graph
    with pytest.raises(SystemExit) as exit_:
        attention_graph.main(["--kind", "nonsense"])
    assert exit_.value.code == 2
    assert_one_line(capsys.readouterr().err, "--kind", "see dates-attention-graph --help")


def test_a_signal_during_the_final_evaluation_does_not_offer_to_resume_a_finished_run(tmp_path, capsys,
                                                                                      monkeypatch):
    import signal
    real = DateTrainer.evaluate

    def evaluate_then_ctrl_c(self, *args, **kwargs):
        os.kill(os.getpid(), signal.SIGINT)      # arrives during the last step's evaluation
        return real(self, *args, **kwargs)
    monkeypatch.setattr(DateTrainer, "evaluate", evaluate_then_ctrl_c)
    code = cli.train_main(["--out", str(tmp_path), "--max-steps", "2", *TINY_ARGS])
    out, err = capsys.readouterr()
    assert code == 0 and "resume" not in err, err
    assert "held-out exact match" in out


@pytest.mark.parametrize("name", sorted(console_scripts()))
def test_every_console_script_documents_its_exit_codes(name, capsys):
    import importlib
    module, function = console_scripts()[name].split(":")
    with pytest.raises(SystemExit):
        getattr(importlib.import_module(module), function)(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "130 Ctrl-C" in text and "141 stdout closed or full" in text, text
