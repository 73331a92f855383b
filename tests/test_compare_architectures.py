"""examples/compare_architectures.py prints a markdown table on stdout and nothing else: the
runs' progress lines (evaluations, the cool-down) go to stderr, so `> table.md` is the table."""
from functools import partial

from transformer.models.config import DecoderOnlyConfig, ModelConfig
from transformer.training.trainer import TrainConfig

from examples_loader import load_example


def test_stdout_is_the_table_and_progress_goes_to_stderr(capsys, monkeypatch):
    example = load_example("compare_architectures")
    tiny = dict(d_model=16, num_heads=2, d_ff=32)
    monkeypatch.setattr(example, "ARCHITECTURES", {"encoder-decoder": partial(ModelConfig, num_encoder_layers=1,
                                                                              num_decoder_layers=1, **tiny),
                                                   "decoder-only": partial(DecoderOnlyConfig, num_layers=1, **tiny)})
    monkeypatch.setattr(example, "TrainConfig", lambda seed: TrainConfig(seed=seed, steps=2, batch_size=8,
                                                                         eval_every=1, target_accuracy=0.5))
    assert example.main([]) == 0
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert len(lines) == 4 and all(line.startswith("|") and line.endswith("|") for line in lines), out
    assert "held-out exact match" in err            # the evaluation lines of both runs, on stderr
