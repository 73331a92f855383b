"""Every dates-* command documents itself: each option has help text and shows its default,
and dates-train's --help states the stopping rule, the peak learning rate and the seed."""
import argparse
import re

import pytest

from transformer.commands import console, training_command
from transformer.commands import dates as cli

MAINS = [name for name in dir(cli) if name.endswith("_main") and not name.startswith("_")]


def parser_of(main, monkeypatch):
    """The parser a command builds, caught when it starts parsing."""
    caught = []

    def catch(self, args=None, namespace=None):
        caught.append(self)
        raise SystemExit(0)

    monkeypatch.setattr(console.Parser, "parse_args", catch)
    with pytest.raises(SystemExit):
        getattr(cli, main)([])
    return caught[0]


def test_every_command_in_cli_is_found():
    assert {"train_main", "translate_main", "evaluate_main"} <= set(MAINS)


@pytest.mark.parametrize("main", MAINS)
def test_every_option_has_help_and_shows_its_default(main, monkeypatch):
    parser = parser_of(main, monkeypatch)
    text = parser.format_help()
    assert parser.prog.startswith("dates-")
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        name = action.option_strings[0] if action.option_strings else action.dest
        assert action.help and len(action.help) > 10, f"{parser.prog} {name} has no help text"
        if action.option_strings and action.default is not False:
            assert "default" in (parser._get_formatter()._get_help_string(action)), \
                f"{parser.prog} {name} does not show its default"
    assert "(default: None)" not in text


def test_train_help_states_the_stopping_rule_and_the_defaults_a_learner_compares(monkeypatch, capsys):
    with pytest.raises(SystemExit):
        cli.train_main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    for phrase in ("cool-down", "--cooldown-at (98%)", "--target-accuracy (99.9%)", "No single evaluation at "
                   "the peak rate can end a run", "docs/early_stopping.md"):
        assert phrase in text, phrase
    assert re.search(r"--lr LR peak learning rate .*\(default: 0\.002\)", text)
    assert re.search(r"--seed SEED .*bit for bit on any machine load.* \(default: 0\)", text)


def test_the_compile_notice_and_the_docs_give_the_same_figure():
    from pathlib import Path
    readme = (Path(__file__).resolve().parents[1] / "docs" / "dates.md").read_text(encoding="utf-8")
    quoted = re.search(r"The first run compiles the Numba kernels \(~(\d+) s", readme)
    assert quoted and int(quoted.group(1)) == training_command.COMPILE_SECONDS
