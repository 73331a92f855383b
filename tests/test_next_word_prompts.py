"""next-word-complete's prompts: stdin takes what the argument form takes, the markers are not
words, and an empty completion says why.

- A 26-word prompt (more than 100 characters) is completed from stdin as from an argument
  (stdin once refused it as "longer than 100 characters, not a date").
- ``<pad>``, ``<bos>`` and ``<eos>`` are the model's markers, not words a prompt may hold.
- Given good and bad prompts as arguments, the good ones are completed, each bad one gets one
  error line naming it, and the exit status is 2 (as a bad stdin line is handled).
- A prompt the model ends at once (a whole sentence already) gets its empty completion and one
  note saying so; typed with capitals, the note says the language is lower-case.
"""
import io

import numpy as np
import pytest

from transformer.commands.next_word import complete_main
from transformer.tasks import language
from transformer.tasks.language import LanguageError, split_words
from transformer.training.next_word import NextWordTrainer, check_prompt, default_model_config, default_train_config

LONG_PROMPT = "ann went to the bakery and bought a bun . bob went to the florist and bought a rose . " \
              "cal went to the butcher and"
EOS_BIAS = 100.0


def test_the_long_prompt_is_valid_and_longer_than_100_characters():
    assert len(LONG_PROMPT.split()) == 26 and len(LONG_PROMPT) > 100
    split_words(LONG_PROMPT)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    folder = tmp_path_factory.mktemp("next-word")
    trainer = NextWordTrainer(default_model_config(d_model=16, num_heads=2, num_layers=1, d_ff=32),
                              default_train_config(steps=1, batch_size=8, warmup=1, target_accuracy=0),
                              out_dir=str(folder))
    trainer.train_step()
    trainer.save(str(folder / "model.npz"))
    return str(folder / "model.npz")


@pytest.fixture(scope="module")
def ends_at_once(tmp_path_factory):
    """A model whose every next word is <eos>: every completion is empty."""
    folder = tmp_path_factory.mktemp("eos")
    trainer = NextWordTrainer(default_model_config(d_model=16, num_heads=2, num_layers=1, d_ff=32),
                              default_train_config(steps=1, batch_size=8, warmup=1, target_accuracy=0),
                              out_dir=str(folder))
    trainer.model.output.bias.data[language.EOS] = EOS_BIAS
    trainer.flat_params.gather()
    trainer.save(str(folder / "model.npz"))
    return str(folder / "model.npz")


def run(argv, capsys, monkeypatch, stdin=None):
    if stdin is not None:
        monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    code = complete_main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_stdin_completes_the_prompt_the_argument_form_completes(checkpoint, capsys, monkeypatch):
    code, from_argument, err = run([LONG_PROMPT, "--checkpoint", checkpoint], capsys, monkeypatch)
    assert code == 0 and not err, err
    code, from_stdin, err = run(["--checkpoint", checkpoint], capsys, monkeypatch, stdin=LONG_PROMPT + "\n")
    assert code == 0 and not err, err
    assert from_stdin == from_argument and from_stdin.startswith(LONG_PROMPT + " ->")


def test_a_line_longer_than_any_prompt_is_one_error_naming_prompts_not_dates(checkpoint, capsys, monkeypatch):
    code, out, err = run(["--checkpoint", checkpoint], capsys, monkeypatch,
                         stdin="ann " * 100_000 + "\nann went to the\n")
    assert code == 2 and err.count("\n") == 1 and "stdin line 1: longer than" in err and "date" not in err, err
    assert out.startswith("ann went to the ->")


def test_bad_argument_prompts_are_each_one_line_and_the_good_ones_are_completed(checkpoint, capsys, monkeypatch):
    good, unknown_word, too_long = "ann went to the", "once upon a", " ".join(["ann"] * 31)
    code, out, err = run([unknown_word, good, too_long, "--checkpoint", checkpoint], capsys, monkeypatch)
    assert code == 2
    assert [line.split(" -> ")[0] for line in out.splitlines()] == [good]
    first, second = err.splitlines()
    assert first.startswith("error: prompt 1: 'once' is not a word of the language"), err
    assert second.startswith("error: prompt 3: the prompt has 31 words"), err


def test_only_unknown_words_are_refused_without_a_model(tmp_path, capsys, monkeypatch):
    code, out, err = run(["once upon a", "ann went to the moon", "--checkpoint", str(tmp_path / "none.npz")],
                         capsys, monkeypatch)
    assert code == 2 and not out
    first, second = err.splitlines()
    assert first.startswith("error: prompt 1: 'once' is not") and second.startswith("error: prompt 2: 'moon' is not"), err


@pytest.mark.parametrize("marker", language.SPECIALS)
def test_the_markers_are_not_prompt_words(checkpoint, marker, capsys, monkeypatch):
    prompt = f"ann went to the {marker} and bought a"
    code, out, err = run([prompt, "--checkpoint", checkpoint], capsys, monkeypatch)
    assert code == 2 and err.startswith("error: ") and err.count("\n") == 1 and marker in err and not out, err
    code, out, err = run(["--checkpoint", checkpoint], capsys, monkeypatch, stdin=prompt + "\nann went to the\n")
    assert code == 2 and err.startswith("error: stdin line 1: ") and marker in err and err.count("\n") == 1, err
    with pytest.raises(LanguageError, match="marker"):
        split_words(prompt)
    with pytest.raises(LanguageError, match="marker"):
        check_prompt(None, prompt.split())


def test_an_empty_completion_says_why(ends_at_once, capsys, monkeypatch):
    code, out, err = run(["ann is at the lake", "--checkpoint", ends_at_once], capsys, monkeypatch)
    assert code == 0 and out == "ann is at the lake -> \n"
    assert err.count("\n") == 1 and err.startswith("note: ") and "ended" in err and "at once" in err, err
    assert "lower-case" not in err


def test_capitals_are_said_when_the_completion_is_empty(ends_at_once, capsys, monkeypatch):
    code, out, err = run(["Ann is at the lake", "--checkpoint", ends_at_once], capsys, monkeypatch)
    assert code == 0 and out == "Ann is at the lake -> \n"
    assert err.count("\n") == 1 and "lower-case" in err and "'ann is at the lake'" in err, err


def test_the_eos_model_really_ends_at_once(ends_at_once):
    from transformer.training.next_word import complete
    from transformer.files.trained_model import load_model
    model = load_model(ends_at_once, task="next-word")
    assert complete(model, ["ann", "went"]) == []
    assert np.argmax(model.output.bias.data) == language.EOS
