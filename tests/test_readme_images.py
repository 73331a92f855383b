"""The recipe for the README's pictures (quoted in docs/seeing.md) is the one examples/make_readme_images.py
runs."""
import os
import re

from examples_loader import load_example

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def load_script():
    return load_example("make_readme_images")


def pages_text():
    """README.md and every docs page it links to, one after another."""
    readme = open(os.path.join(REPO, "README.md"), encoding="utf-8").read()
    pages = sorted(set(re.findall(r"\]\((docs/[\w.-]+\.md)\)", readme)))
    return "\n".join([readme] + [open(os.path.join(REPO, page), encoding="utf-8").read() for page in pages])


def readme_recipe():
    """The commands in the pages' code block that starts with make_readme_images.py."""
    text = pages_text()
    blocks = re.findall(r"```bash\n(.*?)```", text, flags=re.S)
    recipe = [block for block in blocks if block.startswith("python examples/make_readme_images.py --seed 0")]
    assert len(recipe) == 1, "the README quotes the recipe once, in a bash block starting with the script"
    return [line.split("  #")[0].strip() for line in recipe[0].splitlines()[1:] if line.strip()]


def test_the_readme_quotes_exactly_the_commands_the_script_runs():
    script = load_script()
    assert readme_recipe() == [script.training_command(0)] + script.commands(0)


def test_the_commands_draw_the_decoder_self_attention_with_gradients():
    graph_commands = [c for c in load_script().commands(0) if c.startswith("dates-attention-graph")]
    assert len(graph_commands) == 2
    assert all("--kind decoder-self --backward" in c for c in graph_commands)


def test_every_committed_image_is_one_the_script_draws_and_the_readme_shows():
    script = load_script()
    # speed_by_size.png is drawn by examples/benchmark.py --sizes --write-docs with docs/benchmarks.md;
    # blend_heads.png by examples/ladder_sources.py --picture (docs/ladder.md says so);
    # facts.json says what each picture shows (tests/test_committed_pictures.py)
    assert sorted(os.listdir(os.path.join(REPO, "docs", "images"))) == sorted(
        script.IMAGE_FILES + ("speed_by_size.png", "blend_heads.png", "facts.json"))
    commands = " ".join(script.commands(0) + [script.ladder_command(0)] + script.lesson_commands(0))
    for name in script.IMAGE_FILES:
        stem = name.rsplit(".", 1)[0]
        assert stem in commands or stem.startswith("attention_heatmap_"), name


def test_the_readme_quotes_the_ladder_command_the_script_runs():
    assert load_script().ladder_command(0) in pages_text()


def test_without_dot_the_script_stops_in_one_line_with_status_3_and_leaves_nothing(path_without_dot, tmp_path):
    import subprocess
    import sys
    before = sorted(os.listdir(os.path.join(REPO, "docs", "images")))
    env = {**os.environ, "PATH": path_without_dot}
    done = subprocess.run([sys.executable, os.path.join(REPO, "examples", "make_readme_images.py"), "--seed", "12345"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 3, done.stderr
    assert done.stderr.count("\n") == 1 and "apt-get install graphviz" in done.stderr and done.stdout == ""
    assert sorted(os.listdir(os.path.join(REPO, "docs", "images"))) == before
    assert not os.path.exists(os.path.join(REPO, "runs", "readme-seed-12345"))
