"""next-word-train and next-word-complete on the generated language.

A tiny model trained for a few steps stands for a trained one: the commands, checkpoints,
errors and the accuracy bookkeeping do not depend on how good it is. Training the default
model to its target is the slow test at the end.
"""
import io
import json
import os

import numpy as np
import pytest

from transformer.commands import dates as cli

from transformer.tasks import language
from transformer.files.checkpoint import CheckpointError
from transformer.models.decoder_only import DecoderOnlyTransformer
from transformer.training.next_word import (KINDS, NextWordTrainer, accuracy_by_kind, complete, default_model_config,
                                   default_train_config, scored_words)
from transformer.commands.next_word import complete_main, train_main
from transformer.training.trainer import TrainConfig
from transformer.training.dates import DateTrainer
from transformer.files.trained_model import load_model

from test_decoder_only_commands import one_line_error, run

TINY_ARGS = ["--d-model", "16", "--heads", "2", "--layers", "1", "--d-ff", "32", "--batch-size", "20",
             "--no-progress"]


def tiny_trainer(folder, steps=3):
    return NextWordTrainer(default_model_config(d_model=16, num_heads=2, num_layers=1, d_ff=32),
                           default_train_config(steps=steps, batch_size=20, checkpoint_every=0), out_dir=str(folder))


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    folder = tmp_path_factory.mktemp("next-word-run")
    trainer = tiny_trainer(folder)
    for _ in range(3):
        trainer.train_step()
    path = folder / "model.npz"
    trainer.save(str(path))
    return str(path)


# ------------------------------------------------------------- accuracy
def test_scored_words_reads_the_scored_position():
    examples = language.Language(0).evaluation_set(per_kind=2)
    batch = language.encode_batch(examples)
    logits = np.zeros(batch.targets.shape + (len(language.VOCAB),))
    rows = np.arange(len(examples))
    logits[rows, batch.answer_position, batch.targets[rows, batch.answer_position]] = 1.0
    assert scored_words(logits, batch).all()
    logits[0, batch.answer_position[0]] = 0.0
    logits[0, batch.answer_position[0], language.WORD_TO_ID["ann"]] = 1.0
    assert scored_words(logits, batch).tolist() == [False] + [True] * (len(examples) - 1)


def test_accuracy_by_kind_reports_every_kind_and_the_lowest(checkpoint):
    model = load_model(checkpoint, task="next-word")
    examples = language.Language(0, kinds=KINDS).evaluation_set(per_kind=5)
    result = accuracy_by_kind(model, examples, show_wrong=3)
    assert list(result["per_kind"]) == list(KINDS)
    assert result["lowest"] == min(result["per_kind"].values()) and result["count"] == 25
    assert len(result["wrong"]) <= 3


def test_a_training_batch_holds_every_kind_and_scores_the_answer_and_eos(tmp_path):
    trainer = tiny_trainer(tmp_path)
    sentences = trainer.training_sentences()
    assert len(sentences) == trainer.config.batch_size and {s.kind for s in sentences} == set(KINDS)
    loss, tokens, rows = trainer.batch_loss(trainer.sample_batch())
    estimate = trainer.batch_estimate(rows)
    assert loss.shape == () and 0.0 <= estimate <= 1.0
    assert tokens == 2 * trainer.config.batch_size   # the scored word and <eos> of each sentence


# ----------------------------------------------------------- checkpoints
def test_the_checkpoint_resumes_and_is_a_next_word_model(checkpoint):
    resumed = NextWordTrainer.resume(checkpoint)
    assert resumed.step == 3 and isinstance(resumed.model, DecoderOnlyTransformer)
    assert resumed.model_config.task == "next-word"


def test_resuming_the_same_run_twice_gives_the_same_weights(checkpoint, tmp_path):
    a, b = NextWordTrainer.resume(checkpoint, out_dir=str(tmp_path)), NextWordTrainer.resume(checkpoint,
                                                                                             out_dir=str(tmp_path))
    a.train_step()
    b.train_step()
    for name, value in a.model.state_dict().items():
        assert np.array_equal(value, b.model.state_dict()[name])


def test_the_tasks_do_not_mix(checkpoint, tmp_path, capsys):
    """A date command given a next-word checkpoint, and the other way round: one line each."""
    with pytest.raises(CheckpointError, match="holds a next-word model"):
        load_model(checkpoint)
    with pytest.raises(CheckpointError, match="holds a next-word model"):
        DateTrainer.resume(checkpoint)
    code, _, err = run(cli.translate_main, ["1996-09-08", "--checkpoint", checkpoint], capsys)
    one_line_error(code, err, "holds a next-word model (written by next-word-train)", "needs a dates model")
    dates = DateTrainer(train_config=TrainConfig(steps=1, checkpoint_every=0), out_dir=str(tmp_path))
    dates.save(str(tmp_path / "dates.npz"))
    code, _, err = run(complete_main, ["ann went to", "--checkpoint", str(tmp_path / "dates.npz")], capsys)
    one_line_error(code, err, "holds a dates model (written by dates-train)")


# -------------------------------------------------------------- complete
def test_complete_is_greedy_cached_and_stops(checkpoint):
    model = load_model(checkpoint, task="next-word")
    words = "ann went to the bakery and bought a".split()
    greedy = complete(model, words)
    assert greedy == complete(model, words, temperature=0.0)
    assert "<eos>" not in greedy and "<pad>" not in greedy and "<bos>" not in greedy
    assert len(greedy) <= model.config.max_len - len(words) - 1
    assert complete(model, words, max_words=2) == greedy[:2]
    first = complete(model, words, temperature=1.0, top_k=5, rng=np.random.default_rng(3))
    assert first == complete(model, words, temperature=1.0, top_k=5, rng=np.random.default_rng(3))


def test_complete_command_from_arguments_and_stdin(checkpoint, capsys, monkeypatch):
    code, out, err = run(complete_main, ["ann went to the bakery and bought a", "--checkpoint", checkpoint], capsys)
    assert code == 0 and out.startswith("ann went to the bakery and bought a -> "), err
    monkeypatch.setattr("sys.stdin", io.StringIO("bob gave the cup to ann\nonce upon a\n\nann is at the\n"))
    code, out, err = run(complete_main, ["--checkpoint", checkpoint, "--temperature", "0.8", "--seed", "1"], capsys)
    assert code == 2
    assert [line.split(" -> ")[0] for line in out.splitlines()] == ["bob gave the cup to ann", "ann is at the"]
    assert err.startswith("error: stdin line 2: 'once' is not a word of the language") and err.count("\n") == 1


@pytest.mark.parametrize("argv, fragment", [
    (["once upon a"], "'once' is not a word of the language"),
    (["ann", "--top-k", "3"], "--top-k only applies to sampling"),
    (["ann", "--temperature", "-1"], "--temperature must be >= 0"),
    (["ann", "--max-words", "0"], "--max-words must be at least 1"),
    ([" ".join(["ann"] * 31)], "the prompt has 31 words; the model continues 1 to 30 words"),
    (["  "], "the prompt has 0 words"),
])
def test_complete_command_errors_are_one_line(checkpoint, capsys, argv, fragment):
    code, _, err = run(complete_main, [*argv, "--checkpoint", checkpoint], capsys)
    one_line_error(code, err, fragment)


def test_complete_without_a_checkpoint_says_how_to_get_one(tmp_path, capsys):
    code, _, err = run(complete_main, ["ann", "--checkpoint", str(tmp_path / "none.npz")], capsys)
    one_line_error(code, err, "does not exist")


# ----------------------------------------------------------------- train
def test_train_command_writes_a_run_folder_prints_every_kind_and_resumes(tmp_path, capsys):
    out_dir = str(tmp_path / "run")
    code, out, err = run(train_main, ["--out", out_dir, "--max-steps", "2", *TINY_ARGS], capsys)
    assert code == 0, err
    assert sorted(os.listdir(out_dir)) == ["model.npz", "train_log.jsonl"]
    assert "model: decoder-only" in out and "held-out next-word accuracy" in out
    for kind in KINDS:
        assert f"  {kind} " in out
    assert "ann went to the florist and bought a -> " in out
    code, out, err = run(train_main, ["--resume", os.path.join(out_dir, "model.npz"), "--max-steps", "3",
                                      "--no-progress"], capsys)
    assert code == 0 and "at step 2 (at most 3)" in out, err
    with open(os.path.join(out_dir, "train_log.jsonl")) as log:
        assert [json.loads(line)["step"] for line in log] == [1, 2, 3]


def test_train_refuses_to_overwrite_and_bad_settings_in_one_line(tmp_path, capsys):
    out_dir = str(tmp_path / "run")
    assert train_main(["--out", out_dir, "--max-steps", "1", *TINY_ARGS]) == 0
    capsys.readouterr()
    code, _, err = run(train_main, ["--out", out_dir, "--max-steps", "1", *TINY_ARGS], capsys)
    one_line_error(code, err, "--force")
    code, _, err = run(train_main, ["--out", str(tmp_path / "b"), *TINY_ARGS, "--heads", "3"], capsys)
    one_line_error(code, err, "not divisible")


def test_ctrl_c_saves_and_says_how_to_resume(tmp_path, capsys, monkeypatch):
    original = NextWordTrainer.train_step
    calls = []

    def step_then_interrupt(self, *args, **kwargs):
        record = original(self, *args, **kwargs)
        calls.append(1)
        if len(calls) == 2:
            import signal
            os.kill(os.getpid(), signal.SIGINT)
        return record
    monkeypatch.setattr(NextWordTrainer, "train_step", step_then_interrupt)
    code, _, err = run(train_main, ["--out", str(tmp_path / "run"), "--max-steps", "50", *TINY_ARGS], capsys)
    assert code == 130
    assert "resume with: next-word-train --resume" in err and err.count("\n") == 1


@pytest.mark.slow
def test_the_default_model_learns_the_kinds_one_layer_of_attention_can_read(tmp_path, capsys):
    """300 steps of the default model (the whole run, to every kind at 95%, takes about 2,000:
    README): the kinds an attention to one fixed position decides are learned by then."""
    code, out, err = run(train_main, ["--out", str(tmp_path / "run"), "--no-progress", "--max-steps", "300",
                                      "--target-accuracy", "0"], capsys)
    assert code == 0, err
    accuracy = dict(line.split() for line in out.splitlines() if line.startswith("  ") and line.endswith("%"))
    assert set(accuracy) == set(KINDS)
    for kind in ("topic", "order"):
        assert float(accuracy[kind].rstrip("%")) >= 95.0, (kind, out)


@pytest.mark.parametrize("main", [train_main, complete_main])
def test_every_option_has_help_and_shows_its_default(main, monkeypatch):
    from transformer.commands.console import Parser
    caught = []

    def catch(self, args=None, namespace=None):       # the parser the command builds, before it parses
        caught.append(self)
        raise SystemExit(0)
    monkeypatch.setattr(Parser, "parse_args", catch)
    with pytest.raises(SystemExit):
        main([])
    parser = caught[0]
    assert parser.prog.startswith("next-word-")
    for action in parser._actions:
        if action.dest == "help":
            continue
        assert action.help and len(action.help) > 10, action.dest
        if action.option_strings and action.default is not False:
            assert "default" in parser._get_formatter()._get_help_string(action), action.dest
    text = " ".join(parser.format_help().split())
    assert "(default: None)" not in text and "runs/dates" not in text
    if main is train_main:
        assert "(default: 0.95)" in text and "--batch-size BATCH_SIZE sentences per training step (default: 128)" in text


def test_default_run_folders_and_the_default_checkpoint(tmp_path, capsys, monkeypatch):
    """A plain next-word-train writes runs/next-word, a second one runs/next-word-2; next-word-complete
    without --checkpoint reads the newest finished run."""
    monkeypatch.chdir(tmp_path)
    assert train_main(["--max-steps", "1", *TINY_ARGS]) == 0
    assert train_main(["--max-steps", "1", *TINY_ARGS]) == 0
    out = capsys.readouterr().out
    assert "runs/next-word holds an earlier run, so this one trains in runs/next-word-2" in out
    assert os.path.exists("runs/next-word/model.npz") and os.path.exists("runs/next-word-2/model.npz")
    code, out, err = run(complete_main, ["ann went to the bakery and bought a"], capsys)
    assert code == 0 and "runs/next-word-2/model.npz" in err, err


def test_next_word_steps_give_the_same_bits_on_one_or_two_workers(tmp_path):
    """The fixed halves of data-parallel training hold for the next-word task too."""
    runs = []
    for workers in ([1, 1, 1], [2, 1, 2]):
        trainer = tiny_trainer(tmp_path / str(len(runs)))
        records = []
        for count in workers:
            trainer.gradients.workers = count
            records.append(trainer.train_step())
        runs.append(([r["loss"] for r in records], trainer.model.state_dict()))
    (losses_a, weights_a), (losses_b, weights_b) = runs
    assert losses_a == losses_b
    for name, value in weights_a.items():
        assert np.array_equal(value, weights_b[name]), name
