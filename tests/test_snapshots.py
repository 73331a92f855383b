"""--snapshot-every: the attention maps of a fixed probe, recorded while a run trains.

Recorded at step 0, every N steps and at the last step, for every attention module of either
date architecture and of the next-word model; the last snapshot is the trained model's own
attention on the probe and the first the fresh model's; recording changes nothing in the run;
a resumed run continues the snapshots without duplicating a step (and drops those after its
checkpoint); the file stays small; a bad file gets one line.
"""
import json
import os
import shutil

import numpy as np
import pytest

from viz.explorer.training_steps import snapshot_probe

import minigrad
from transformer.commands import dates as cli
from transformer.commands import next_word as next_word_cli
from transformer.models.config import DecoderOnlyConfig, ModelConfig
from transformer.decoding import inference
from transformer.training.next_word import NextWordTrainer, default_model_config, default_train_config
from transformer.training.snapshots import (SNAPSHOTS_NAME, AttentionSnapshots, SnapshotError, attention_modules,
                                   load_snapshots, snapshots_beside)
from transformer.training.dates import DateTrainer
from transformer.training.trainer import TrainConfig

TINY = dict(d_model=16, num_heads=2, d_ff=32)
TINY_TRAIN = dict(batch_size=8, schedule="constant", warmup=2, target_accuracy=0)


def dates_trainer(architecture, out, steps, every, **train):
    config = DecoderOnlyConfig(num_layers=2, **TINY) if architecture == "decoder-only" else \
        ModelConfig(num_encoder_layers=1, num_decoder_layers=2, **TINY)
    return DateTrainer(config, TrainConfig(steps=steps, snapshot_every=every, **TINY_TRAIN, **train), out_dir=str(out))


def next_word_trainer(out, steps, every, **train):
    return NextWordTrainer(default_model_config(num_layers=2, **TINY),
                           default_train_config(steps=steps, snapshot_every=every, **TINY_TRAIN, **train),
                           out_dir=str(out))


TRAINERS = {"encoder-decoder": lambda *a, **k: dates_trainer("encoder-decoder", *a, **k),
            "decoder-only": lambda *a, **k: dates_trainer("decoder-only", *a, **k),
            "next-word": next_word_trainer}
# per kind of run: (modules, probe rows, query length, key length) of each module
EXPECTED = {"encoder-decoder": ([("encoder.layers.0.self_attn", 1, 12, 12), ("decoder.layers.0.self_attn", 1, 16, 16),
                                 ("decoder.layers.0.cross_attn", 1, 16, 12), ("decoder.layers.1.self_attn", 1, 16, 16),
                                 ("decoder.layers.1.cross_attn", 1, 16, 12)]),
            "decoder-only": [("decoder.layers.0.self_attn", 1, 26, 26), ("decoder.layers.1.self_attn", 1, 26, 26)],
            "next-word": [("decoder.layers.0.self_attn", 7, 18, 18), ("decoder.layers.1.self_attn", 7, 18, 18)]}


def probe_attention(trainer):
    """The model's attention on the probe now, computed apart from the recorder's own records."""
    snapshots = AttentionSnapshots(trainer, 1, os.devnull)
    with inference(trainer.model):
        trainer.model(*snapshots.inputs)
    return [np.asarray(module.last_weights) for _, _, _, module in attention_modules(trainer.model)]


@pytest.mark.slow
@pytest.mark.parametrize("run", list(TRAINERS))
def test_recorded_steps_shapes_and_values(run, tmp_path):
    minigrad.manual_seed(0)
    fresh = TRAINERS[run](tmp_path / "fresh", 7, 3)
    before = probe_attention(fresh)
    trainer = TRAINERS[run](tmp_path, 7, 3)
    trainer.run(progress=False)
    snapshots = load_snapshots(tmp_path / SNAPSHOTS_NAME, trainer.model, snapshot_probe(trainer.model))
    assert snapshots["steps"].tolist() == [0, 3, 6, 7]          # step 0, every 3, and the last
    assert np.isnan(snapshots["loss"][0]) and np.all(np.isfinite(snapshots["loss"][1:]))
    log = [json.loads(line) for line in open(tmp_path / "train_log.jsonl")]
    assert snapshots["loss"][1:].tolist() == pytest.approx([log[s - 1]["loss"] for s in (3, 6, 7)], rel=1e-6)
    heads = 2
    assert [(str(m), w.shape) for m, w in zip(snapshots["modules"], snapshots["weights"])] == \
        [(name, (4, rows, heads, q, k)) for name, rows, q, k in EXPECTED[run]]
    with np.load(tmp_path / SNAPSHOTS_NAME, allow_pickle=False) as raw:
        assert raw["weights.0"].dtype == np.float16
    for queries, keys, (_, rows, q, k) in zip(snapshots["queries"], snapshots["keys"], EXPECTED[run]):
        assert queries.shape == (rows, q) and keys.shape == (rows, k)
    after = probe_attention(trainer)
    for recorded, first, last in zip(snapshots["weights"], before, after):
        np.testing.assert_allclose(recorded[0], first, atol=1e-3)       # float16: 3 significant digits
        np.testing.assert_allclose(recorded[-1], last, atol=1e-3)
        assert not np.allclose(recorded[0], recorded[-1], atol=1e-4)    # training changed them


@pytest.mark.slow
def test_next_word_probes_pair_each_question_and_score_each_kind(tmp_path):
    """The swap and recall rows come twice, the other animal and the other name asked, so that
    a first-place shortcut and real recall give different answers; every snapshot scores each
    kind on held-out sentences, as the trainer's own evaluation does on the same sentences."""
    from transformer.tasks import language
    from transformer.training.next_word import KINDS, accuracy_by_kind
    from transformer.training.snapshots import KIND_ACCURACY_PER_KIND
    trainer = next_word_trainer(tmp_path, 4, 2)
    trainer.run(progress=False)
    snapshots = load_snapshots(tmp_path / SNAPSHOTS_NAME)
    rows = [str(row) for row in snapshots["probe"]]
    assert [row.split(":")[0] for row in rows] == list(KINDS) + ["swap", "recall"]
    recall, other = rows[KINDS.index("recall")].split(": ")[1].split(), rows[-1].split(": ")[1].split()
    assert recall[:-2] == other[:-2] and recall[-2] != other[-2]          # same facts, the other name asked
    assert {recall[-1], other[-1]} == {recall[4], recall[10]} and recall[-1] != other[-1]   # either place
    swap = KINDS.index("swap")
    assert rows[swap].split()[:9] == rows[-2].split()[:9] and rows[swap].split()[-1] != rows[-2].split()[-1]
    assert snapshots["held_out_kinds"].tolist() == list(KINDS)
    assert snapshots["held_out_accuracy"].shape == (len(snapshots["steps"]), len(KINDS))
    examples = language.Language(kinds=KINDS).evaluation_set(per_kind=KIND_ACCURACY_PER_KIND)
    now = accuracy_by_kind(trainer.model, examples)["per_kind"]
    assert snapshots["held_out_accuracy"][-1].tolist() == pytest.approx([now[k] for k in KINDS])


@pytest.mark.slow
def test_recording_changes_nothing_in_the_run(tmp_path):
    losses = []
    for every in (0, 2):
        dates_trainer("encoder-decoder", tmp_path / str(every), 6, every).run(progress=False)
        losses.append([json.loads(line)["loss"] for line in open(tmp_path / str(every) / "train_log.jsonl")])
    assert losses[0] == losses[1]
    assert not os.path.exists(tmp_path / "0" / SNAPSHOTS_NAME)


@pytest.mark.slow
def test_resume_continues_without_duplicates(tmp_path):
    whole = tmp_path / "whole"
    dates_trainer("decoder-only", whole, 8, 2).run(progress=False)
    parts = tmp_path / "parts"
    dates_trainer("decoder-only", parts, 4, 2).run(progress=False)
    shutil.copy(parts / "model.npz", parts / "step4.npz")
    resumed = DateTrainer.resume(str(parts / "model.npz"), steps=8)
    resumed.run(progress=False)
    model = resumed.model
    assert load_snapshots(parts / SNAPSHOTS_NAME, model, snapshot_probe(model))["steps"].tolist() == [0, 2, 4, 6, 8]
    # from the step-4 checkpoint again: the snapshots after step 4 are dropped, then recorded anew
    DateTrainer.resume(str(parts / "step4.npz"), steps=8).run(progress=False)
    resumed, uninterrupted = load_snapshots(parts / SNAPSHOTS_NAME, model, snapshot_probe(model)), load_snapshots(whole / SNAPSHOTS_NAME, model, snapshot_probe(model))
    assert resumed["steps"].tolist() == uninterrupted["steps"].tolist() == [0, 2, 4, 6, 8]
    for a, b in zip(resumed["weights"], uninterrupted["weights"]):
        np.testing.assert_array_equal(a, b)
    # into another folder: the snapshots come from the checkpoint's folder
    DateTrainer.resume(str(parts / "step4.npz"), out_dir=str(tmp_path / "elsewhere"), steps=6).run(progress=False)
    assert load_snapshots(tmp_path / "elsewhere" / SNAPSHOTS_NAME, model, snapshot_probe(model))["steps"].tolist() == [0, 2, 4, 6]


def test_a_default_run_stays_small(tmp_path):
    """A default date run at --snapshot-every 10 records at most 61 steps (0 to 600): every
    array uncompressed stays under 1 MB, and so does the file."""
    trainer = DateTrainer(out_dir=str(tmp_path))
    recorder = AttentionSnapshots(trainer, 10, str(tmp_path / SNAPSHOTS_NAME))
    rng = np.random.default_rng(0)
    for step in range(0, trainer.config.steps + 1, 10):
        for p in trainer.model.parameters():          # other weights each time: no free compression
            p.data[...] = rng.standard_normal(p.shape).astype(p.data.dtype) * 0.3
        trainer.step = step
        recorder.record(1.0, 0.5)
    recorder.write()
    with np.load(tmp_path / SNAPSHOTS_NAME, allow_pickle=False) as raw:
        stored = sum(raw[name].nbytes for name in raw.files)
    assert stored < 1e6 and os.path.getsize(tmp_path / SNAPSHOTS_NAME) < 1e6


def test_a_bad_file_gets_one_line(tmp_path):
    bad = tmp_path / SNAPSHOTS_NAME
    bad.write_bytes(b"not a zip")
    model = dates_trainer("decoder-only", tmp_path, 1, 1).model
    with pytest.raises(SnapshotError, match="not a readable attention snapshots file"):
        load_snapshots(bad, model, snapshot_probe(model))
    assert snapshots_beside(str(tmp_path / "model.npz")) == str(bad)
    assert snapshots_beside(str(tmp_path / "elsewhere" / "model.npz")) is None


@pytest.mark.parametrize("main", [cli.train_main, next_word_cli.train_main])
def test_snapshot_every_must_not_be_negative(main, tmp_path, capsys):
    assert main(["--snapshot-every", "-1", "--out", str(tmp_path / "run")]) == 2
    assert "snapshot_every must be an integer >= 0, got -1" in capsys.readouterr().err


def test_dates_explore_names_a_next_word_checkpoint_in_one_line(tmp_path, capsys):
    from transformer.commands.explore import dates_main as explore_main
    trainer = next_word_trainer(tmp_path, 1, 1)
    trainer.save(str(tmp_path / "model.npz"))
    assert explore_main(["--checkpoint", str(tmp_path / "model.npz"), "--out", str(tmp_path / "page.html")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "holds a next-word model" in err and "needs a dates model" in err
