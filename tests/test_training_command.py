"""The training commands' shared module (transformer/commands/training_command.py): both
trainers take their options, run folder, lock, MPI job and profile from it, and the command
modules import no private name from one another."""
import ast
import pathlib

from transformer.commands import training_command

COMMANDS = pathlib.Path(training_command.__file__).parent


def imports_of(path: pathlib.Path):
    """(module, name) of every ``from X import name`` in the file, relative imports resolved to transformer.commands."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                module = "transformer.commands" + ("." + module if module else "")
            for alias in node.names:
                yield module, alias.name


def test_no_command_module_takes_a_private_name_from_another_module():
    taken = [f"{path.name}: {module}.{name}" for path in sorted(COMMANDS.glob("*.py"))
             for module, name in imports_of(path)
             if module.startswith(("transformer", "viz", "minigrad")) and name.startswith("_")]
    assert taken == []


def test_both_trainers_share_the_training_module_not_each_other():
    for name in ("dates.py", "next_word.py"):
        modules = {module for module, _ in imports_of(COMMANDS / name)}
        assert "transformer.commands.training_command" in modules, name
        assert "transformer.commands.dates" not in modules, name
