"""The house rules (docs/design.md, "House rules") hold: import-linter keeps every contract in
setup.cfg, and the two rules it cannot state are checked here on the source's syntax tree
(no private name imported from another module; every console script's main lives with the
commands). Each check is also shown to fail on a copy of the code that breaks its rule."""
import ast
import configparser
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGES = ("minigrad", "transformer", "viz")
CONFIG = ROOT / "setup.cfg"
LINT_IMPORTS = "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"



def lint_imports(source_root: pathlib.Path) -> subprocess.CompletedProcess:
    """``lint-imports`` run in ``source_root`` (it reads the setup.cfg there) on the packages there
    (first on the path), with no cache: nothing is written beside them."""
    env = dict(os.environ, PYTHONPATH=str(source_root))
    return subprocess.run([sys.executable, "-c", LINT_IMPORTS, "--no-cache"], cwd=source_root, env=env,
                          capture_output=True, text=True, timeout=600)


def copy_of_the_packages(tmp_path) -> pathlib.Path:
    for package in PACKAGES:
        shutil.copytree(ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__", "*.json"))
    shutil.copy(CONFIG, tmp_path / CONFIG.name)
    return tmp_path


def test_lint_imports_keeps_every_contract():
    result = lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


@pytest.mark.parametrize("path, line, broken", [
    ("viz/render.py", "from transformer.commands import console", "viz is not allowed to import transformer.commands"),
    ("transformer/models/layers.py", "from transformer.training import stopping",
     "transformer.models is not allowed to import transformer.training"),
    ("minigrad/ops/reduce.py", "from minigrad.kernels import registry",
     "minigrad.ops is not allowed to import minigrad.kernels"),
    # the engine's old ring: a Tensor imported back up, inside a function as it used to be
    ("minigrad/function.py", "def _tensor_class():\n    from .tensor import Tensor\n    return Tensor",
     "minigrad.function is not allowed to import minigrad.tensor"),
])
def test_lint_imports_fails_on_an_import_that_breaks_a_rule(tmp_path, path, line, broken):
    source_root = copy_of_the_packages(tmp_path)
    with open(source_root / path, "a", encoding="utf-8") as module:
        module.write(f"\n\n{line}\n")
    result = lint_imports(source_root)
    assert result.returncode == 1, result.stdout + result.stderr
    assert broken in " ".join(result.stdout.split()), result.stdout


def test_every_contract_is_a_rule_of_the_design_doc():
    """Each contract's name is the rule as docs/design.md states it, so the doc and the linter agree."""
    config = configparser.ConfigParser()
    config.read(CONFIG, encoding="utf-8")
    names = [config[section]["name"] for section in config.sections() if section.startswith("importlinter:contract:")]
    design = " ".join((ROOT / "docs" / "design.md").read_text(encoding="utf-8").split())
    assert len(names) >= 5
    for name in names:
        assert name in design, f"the contract {name!r} is not a rule in docs/design.md"


# ------------------------------------------------------------------ what import-linter cannot say
def private_imports(root: pathlib.Path) -> set:
    """(file, module, name) for every ``from module import _name`` in the packages (dunders are not private)."""
    found = set()
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            relative = path.relative_to(root).as_posix()
            package_parts = relative.split("/")[:-1]      # what a relative import starts from
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), relative)):
                if not isinstance(node, ast.ImportFrom):
                    continue
                module = node.module or ""
                if node.level:             # relative: resolved against the file's package
                    base = package_parts[:len(package_parts) - (node.level - 1)]
                    module = ".".join(base + ([module] if module else []))
                for alias in node.names:
                    if alias.name.startswith("_") and not alias.name.startswith("__"):
                        found.add((relative, module, alias.name))
    return found


def test_no_private_name_is_imported_from_another_module():
    taken = private_imports(ROOT)
    assert taken == set(), "make these names public, or keep the code in one module"


def test_the_private_name_check_finds_one(tmp_path):
    source_root = copy_of_the_packages(tmp_path)
    with open(source_root / "viz" / "explorer" / "check.py", "a", encoding="utf-8") as module:
        module.write("\n\nfrom ..graph import _escape_this\n")
    assert ("viz/explorer/check.py", "viz.graph", "_escape_this") in private_imports(source_root)


def console_script_targets() -> list:
    """'module:function' of every console script (setup.cfg's entry points lead to dates_commands)."""
    tree = ast.parse((ROOT / "dates_commands.py").read_text(encoding="utf-8"))
    return [node.args[0].value for node in ast.walk(tree) if isinstance(node, ast.Call)
            and getattr(node.func, "id", None) == "_run" and isinstance(node.args[0], ast.Constant)]


def entry_points() -> list:
    config = configparser.ConfigParser(interpolation=None)
    config.read(CONFIG, encoding="utf-8")
    return [line for line in config["options.entry_points"]["console_scripts"].splitlines() if line.strip()]


def mains_in_viz(root: pathlib.Path) -> list:
    return [f"{path.relative_to(root)}: {node.name}" for path in sorted((root / "viz").rglob("*.py"))
            for node in ast.parse(path.read_text(encoding="utf-8")).body
            if isinstance(node, ast.FunctionDef) and (node.name == "main" or node.name.endswith("_main"))]


def test_every_console_script_main_lives_with_the_commands():
    targets = console_script_targets()
    assert len(targets) == len(entry_points()) > 10, targets
    assert [t for t in targets if not t.startswith("transformer.commands.")] == []
    assert mains_in_viz(ROOT) == [], "viz draws; a console script's main belongs in transformer/commands/"


def test_the_main_check_finds_one_in_viz(tmp_path):
    source_root = copy_of_the_packages(tmp_path)
    with open(source_root / "viz" / "ladder.py", "a", encoding="utf-8") as module:
        module.write("\n\ndef main(argv=None):\n    return 0\n")
    assert mains_in_viz(source_root) == ["viz/ladder.py: main"]

