"""The README and its pages say what is true today: the profile table of docs/results.md has the rows a
profiled step prints, its results keep one table per question with the command that re-draws it and the
machine, the README links every notebook there is, and dates-export points at a script that does load
its file."""
import os
import re

import pytest

from examples_loader import load_example

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = open(os.path.join(REPO, "README.md"), encoding="utf-8").read()
RESULTS = open(os.path.join(REPO, "docs", "results.md"), encoding="utf-8").read()


def section(title, text=RESULTS, level="## "):
    """The text of the section ``title`` up to the next heading of the same level."""
    start = text.index(f"\n{level}{title}\n")
    end = text.find(f"\n{level}", start + 1)
    return text[start:end if end > 0 else len(text)]


def table_rows(text):
    return [line for line in text.splitlines() if line.startswith("| ") and not line.startswith("|---")]


def profile_rows(table: str) -> set:
    """(op, pass, path) of every op row of a minigrad.profile() table."""
    rows = set()
    for line in table.splitlines():
        match = re.match(r"(\S.*?)\s+(forward|backward|call)\s+(kernel|numpy)\s+\d+", line)
        if match:
            rows.add(match.groups())
    return rows


def test_the_profile_table_has_the_rows_a_profiled_step_prints():
    module = load_example("profile_step")
    prof, _ = module.profile_step(warm_up_steps=1)
    quoted = re.search(r"```\n(op +pass +path.*?)```", section("Where the time goes"), re.S).group(1)
    assert profile_rows(quoted) == profile_rows(prof.table())
    assert quoted.splitlines()[0] == prof.table().splitlines()[0]          # the same header


def test_results_keep_one_table_per_question_with_its_command_machine_and_date():
    results = RESULTS[:RESULTS.index("\n## Where the time goes")]
    assert "AMD EPYC" in results and "AVX-512" in results
    questions = re.findall(r"\n### (.+)\n", results)
    assert questions == ["Time to a trained model", "A training step and decoding, beside PyTorch", "Under load"]
    for question in questions:
        text = section(question, results, "### ")
        tables = re.findall(r"(?:\n\|.*\|)+", text)
        assert len(tables) == 1, question
        scripts = re.findall(r"python (examples/\w+\.py)", text)
        assert scripts and all(os.path.isfile(os.path.join(REPO, s)) for s in scripts), question
        assert re.search(r"2026-\d\d-\d\d", text), question
    assert os.path.isfile(os.path.join(REPO, "docs", "history.md"))
    assert "](history.md)" in results


def test_the_time_to_model_table_is_the_scripts_layout():
    results = section("Time to a trained model", RESULTS, "### ")
    header = table_rows(results)[0]
    source = open(os.path.join(REPO, "examples", "time_to_model.py"), encoding="utf-8").read()
    assert header in source


def test_the_readme_links_every_notebook_there_is():
    notebooks = sorted(n for n in os.listdir(os.path.join(REPO, "notebooks")) if n.endswith(".ipynb"))
    linked = sorted(re.findall(r"\(notebooks/([\w-]+\.ipynb)\)", README))
    assert linked == notebooks


@pytest.mark.parametrize("fmt", ["safetensors"])
def test_dates_export_points_at_a_script_that_loads_its_file(tmp_path, capsys, fmt):
    import minigrad
    from transformer.files.checkpoint import save_checkpoint
    from transformer.models.config import ModelConfig
    from transformer.commands.export import main
    from transformer.models.encoder_decoder import Transformer
    minigrad.manual_seed(0)
    model = Transformer(ModelConfig(d_model=8, num_heads=2, num_encoder_layers=1, num_decoder_layers=1, d_ff=16))
    save_checkpoint(str(tmp_path / "model.npz"), model.state_dict(), {}, {"model_config": model.config.to_dict()})
    assert main(["--checkpoint", str(tmp_path / "model.npz")]) == 0
    out = capsys.readouterr().out
    assert "safetensors.torch.load_file(" in out and "model.safetensors" in out      # the file, loaded in PyTorch
    assert "examples/compare_with_pytorch.py" in out and "--exported" in out     # the script that builds the model
    script = open(os.path.join(REPO, "examples", "compare_with_pytorch.py"), encoding="utf-8").read()
    assert '"--exported"' in script and "def load_exported" in script and "load_state_dict(load_file(" in script
