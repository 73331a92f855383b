"""The model files read on their own: the GPT in one file that takes from the project only the
attention module, and no model file importing the task, training, parallel or command code."""
import ast
import inspect
from pathlib import Path

import transformer.models
from minigrad import nn
from transformer.models import decoder_only, encoder_decoder

MODELS = Path(transformer.models.__file__).parent
HIGHER_ROOMS = ("transformer.tasks", "transformer.training", "transformer.parallel", "transformer.commands",
                "transformer.files", "transformer.ladder", "viz")


def imported_modules(path: Path) -> set:
    """Every module ``path`` imports, at the top or inside a function."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            found.add(node.module)
    return found


def test_the_gpt_file_takes_only_the_attention_module_from_the_project():
    project = {name for name in imported_modules(MODELS / "decoder_only.py") if name.split(".")[0] == "transformer"}
    assert project <= {"transformer.models.attention"}


def test_no_model_file_imports_a_task_training_or_a_command():
    for path in sorted(MODELS.glob("*.py")):
        upward = {name for name in imported_modules(path) if name.startswith(HIGHER_ROOMS)}
        assert not upward, f"{path.name} imports {sorted(upward)}"


def test_the_gpt_block_is_its_own_and_its_path_is_on_one_page():
    """Block is not another model's block with its forward overridden; forward, the loss and
    generate sit together in DecoderOnlyTransformer, within one screen page of each other."""
    assert decoder_only.Block.__mro__[1:] == (nn.Module, object)
    assert encoder_decoder.EncoderLayer not in decoder_only.Block.__mro__
    model = decoder_only.DecoderOnlyTransformer
    first = inspect.getsourcelines(model.forward)[1]
    last_lines, last_start = inspect.getsourcelines(model.generate)
    assert last_start + len(last_lines) - first < 80
