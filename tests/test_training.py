"""Tests for transformer.training.trainer and transformer.files.checkpoint: one training step, the run
loop and its log, checkpoints (round trip, pickle-free, atomic, clear errors on corrupt
files) and that a resumed run continues exactly as the uninterrupted run, plus one slow
end-to-end test that the model actually learns the date task.
"""
import json
import os

import numpy as np
import pytest

import minigrad
from transformer.files.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from transformer.models.config import ModelConfig
from transformer.tasks.dates import PAD
from transformer.training.trainer import TrainConfig
from transformer.training.dates import DateTrainer
from transformer.files.trained_model import load_model

TINY = dict(d_model=16, num_heads=2, num_encoder_layers=1, num_decoder_layers=1, d_ff=32)


def tiny_trainer(out_dir, **train_overrides):
    values = dict(steps=12, batch_size=16, lr=3e-3, warmup=4, eval_every=0, checkpoint_every=0)
    values.update(train_overrides)
    model_values = dict(TINY, dropout=values.pop("dropout", 0.0))
    return DateTrainer(ModelConfig(**model_values), TrainConfig(**values), out_dir=str(out_dir))


def params_of(trainer):
    return trainer.model.state_dict()


def assert_same_state(a, b):
    """Two trainers hold bit-identical weights, optimizer buffers, schedules and RNGs."""
    pa, pb = params_of(a), params_of(b)
    assert list(pa) == list(pb)
    for name in pa:
        assert pa[name].dtype == pb[name].dtype
        np.testing.assert_array_equal(pa[name], pb[name], err_msg=name)
    sa, sb = a.optimizer.state_dict(), b.optimizer.state_dict()
    assert sorted(sa) == sorted(sb)
    for key in sa:
        if isinstance(sa[key], np.ndarray):
            np.testing.assert_array_equal(sa[key], sb[key], err_msg=key)
        else:
            assert sa[key] == sb[key], key
    assert a.schedule.state_dict() == b.schedule.state_dict()
    assert a.optimizer.lr == b.optimizer.lr
    assert a.step == b.step
    assert a.data_rng.bit_generator.state == b.data_rng.bit_generator.state


@pytest.fixture
def limited_evaluation(monkeypatch):
    """Trainer.run evaluates on the 2,000 held-out dates; 100 are enough here."""
    full = DateTrainer.evaluate
    monkeypatch.setattr(DateTrainer, "evaluate", lambda self, limit=None, show_wrong=5: full(self, 100, show_wrong))


@pytest.fixture
def saved(tmp_path):
    """A trainer after 3 steps and the checkpoint it saved."""
    trainer = tiny_trainer(tmp_path, dropout=0.1)
    for _ in range(3):
        trainer.train_step()
    path = str(tmp_path / "model.npz")
    trainer.save(path)
    return trainer, path


# ---------------------------------------------------------------------- config
@pytest.mark.parametrize("bad, message", [
    (dict(schedule="linear"), "schedule must be one of"),
    (dict(steps=0), "steps must be an integer >= 1"),
    (dict(batch_size=0), "batch_size must be an integer >= 1"),
    (dict(warmup=-1), "warmup must be an integer >= 0"),
    (dict(eval_every=-1), "eval_every must be an integer >= 0"),
    (dict(cooldown=0), "cooldown must be an integer >= 1"),
    (dict(seed=-3), "seed must be an integer >= 0"),
    (dict(steps=2.5), "steps must be an integer"),
    (dict(lr=float("nan")), "lr must be a finite number"),
    (dict(lr=float("inf")), "lr must be a finite number"),
    (dict(lr=-1e-3), "lr must be a finite number in"),
    (dict(lr=0.0), "lr must be positive"),
    (dict(clip=float("nan")), "clip must be a finite number"),
    (dict(clip=-1.0), "clip must be"),
    (dict(label_smoothing=1.5), "label_smoothing must be"),
    (dict(target_accuracy=1.01), "target_accuracy must be"),
    (dict(target_accuracy=float("nan")), "target_accuracy must be"),
    (dict(betas=(0.9, 1.0)), "betas must be"),
])
def test_train_config_rejects_bad_values(bad, message):
    with pytest.raises(ValueError, match=message):
        TrainConfig(**bad)


# ------------------------------------------------------------------------ steps
def test_train_step_record_and_warmup_learning_rate(tmp_path):
    trainer = tiny_trainer(tmp_path, lr=2e-3, warmup=4, schedule="cosine")
    records = [trainer.train_step() for _ in range(5)]
    assert [r["step"] for r in records] == [1, 2, 3, 4, 5]
    np.testing.assert_allclose([r["lr"] for r in records[:4]], [5e-4, 1e-3, 1.5e-3, 2e-3])
    assert records[4]["lr"] < 2e-3                      # cosine decay after warm-up
    for r in records:
        assert np.isfinite(r["loss"]) and r["loss"] > 0
        assert 16 * 11 <= r["tokens"] <= 16 * 19         # every target has 11..19 tokens incl. <eos>
        assert r["grad_norm"] > 0
    assert trainer.optimizer.step_count == 5 and trainer.schedule.last_step == 5


def test_train_step_loss_is_teacher_forced_cross_entropy_without_padding(tmp_path):
    """The reported loss: mean -log p(next token) over target positions up to <eos>, <pad> left out."""
    trainer = tiny_trainer(tmp_path)
    replay = np.random.default_rng()
    replay.bit_generator.state = trainer.data_rng.bit_generator.state
    src, tgt = trainer.data.sample_batch(replay, trainer.config.batch_size)
    logits = trainer.model(src, tgt[:, :-1]).data.astype(np.float64)
    logp = logits - logits.max(axis=-1, keepdims=True)
    logp -= np.log(np.exp(logp).sum(axis=-1, keepdims=True))
    targets = tgt[:, 1:]
    picked = np.take_along_axis(logp, targets[..., None], axis=-1)[..., 0]
    expected = -picked[targets != PAD].mean()
    record = trainer.train_step()
    assert record["loss"] == pytest.approx(expected, rel=1e-5)
    assert record["tokens"] == int((targets != PAD).sum())


def test_a_few_steps_lower_the_loss_on_a_fixed_batch(tmp_path):
    """Overfitting one batch: the same batch's loss must fall."""
    trainer = tiny_trainer(tmp_path, lr=1e-2, warmup=1, schedule="constant")
    src, tgt = trainer.data.sample_batch(np.random.default_rng(0), 16)
    trainer.data.sample_batch = lambda rng, size: (src, tgt)
    losses = [trainer.train_step()["loss"] for _ in range(15)]
    assert losses[-1] < 0.6 * losses[0]


def test_run_writes_log_checkpoints_and_history(tmp_path, limited_evaluation):
    trainer = tiny_trainer(tmp_path, steps=6, eval_every=3, checkpoint_every=4)
    summary = trainer.run(progress=False)
    assert summary["steps"] == 6 and summary["checkpoint"] == str(tmp_path / "model.npz")
    lines = [json.loads(line) for line in open(tmp_path / "train_log.jsonl")]
    assert [r["step"] for r in lines] == [1, 2, 3, 4, 5, 6]
    assert "exact_match" in lines[2] and "exact_match" not in lines[3]
    assert [h["step"] for h in trainer.history] == [3, 6]
    assert summary["exact_match"] == trainer.history[-1]["exact_match"]
    assert sorted(os.listdir(tmp_path)) == ["model.npz", "train_log.jsonl"]
    assert load_checkpoint(str(tmp_path / "model.npz"))[2]["step"] == 6


# ------------------------------------------------------------------ checkpoints
def test_checkpoint_round_trip(saved):
    trainer, path = saved
    rng_at_save = minigrad.get_rng_state()               # nothing has drawn since the save
    trainer.history = [{"step": 3, "exact_match": 0.25, "char_accuracy": 0.5, "loss": 1.0}]
    trainer.save(path)
    minigrad.manual_seed(12345)
    resumed = DateTrainer.resume(path)
    assert_same_state(trainer, resumed)
    assert resumed.model_config == trainer.model_config
    assert resumed.config == trainer.config
    assert resumed.history == trainer.history
    assert minigrad.get_rng_state() == rng_at_save
    assert resumed.out_dir == os.path.dirname(path)


def test_checkpoint_is_a_pickle_free_npz(saved):
    trainer, path = saved
    with np.load(path, allow_pickle=False) as archive:
        names = set(archive.files)
        meta = json.loads(archive["meta.json"].tobytes().decode("utf-8"))
        for name, value in trainer.model.state_dict().items():
            np.testing.assert_array_equal(archive[f"model/{name}"], value)
    assert "optim/m.0" in names and "optim/v.0" in names
    assert meta["step"] == 3 and meta["model_config"]["d_model"] == 16
    assert meta["train_config"]["batch_size"] == 16


def test_load_model_gives_the_trained_weights_in_eval_mode(saved):
    trainer, path = saved
    model = load_model(path)
    assert not model.training
    for name, value in trainer.model.state_dict().items():
        np.testing.assert_array_equal(dict(model.named_parameters())[name].data, value)


def test_save_leaves_no_temporary_files(saved, tmp_path):
    trainer, path = saved
    trainer.save(path)                                   # overwrite in place
    trainer.save(str(tmp_path / "sub" / "other.npz"))    # a new folder is created
    assert sorted(os.listdir(tmp_path)) == ["model.npz", "sub"]
    assert os.listdir(tmp_path / "sub") == ["other.npz"]


@pytest.mark.parametrize("error", [OSError("No space left on device"), KeyboardInterrupt()])
def test_failed_save_keeps_the_previous_checkpoint(saved, tmp_path, monkeypatch, error):
    trainer, path = saved
    before = open(path, "rb").read()
    trainer.train_step()                                 # new weights that will not get saved

    def broken_savez(file, **arrays):
        file.write(b"PK\x03\x04 half a zip")
        raise error

    monkeypatch.setattr(np, "savez", broken_savez)
    with pytest.raises(type(error)):
        trainer.save(path)
    monkeypatch.undo()
    assert open(path, "rb").read() == before
    assert os.listdir(tmp_path) == ["model.npz"]
    assert load_checkpoint(path)[2]["step"] == 3


def write_bytes(path, data):
    with open(path, "wb") as f:
        f.write(data)
    return str(path)


def corrupt_random_bytes(tmp_path, good):
    return write_bytes(tmp_path / "bad.npz", np.random.default_rng(0).bytes(3000))


def corrupt_empty(tmp_path, good):
    return write_bytes(tmp_path / "bad.npz", b"")


def corrupt_truncated(tmp_path, good):
    data = open(good, "rb").read()
    return write_bytes(tmp_path / "bad.npz", data[: len(data) // 2])


def corrupt_no_meta(tmp_path, good):
    np.savez(tmp_path / "bad.npz", **{"model/w": np.zeros(3)})
    return str(tmp_path / "bad.npz")


def corrupt_meta_not_json(tmp_path, good):
    np.savez(tmp_path / "bad.npz", **{"meta.json": np.frombuffer(b"\xff{not json", dtype=np.uint8)})
    return str(tmp_path / "bad.npz")


def corrupt_meta_not_an_object(tmp_path, good):
    np.savez(tmp_path / "bad.npz", **{"meta.json": np.frombuffer(b"[1, 2, 3]", dtype=np.uint8)})
    return str(tmp_path / "bad.npz")


def corrupt_wrong_version(tmp_path, good):
    meta = json.dumps({"format_version": 99}).encode()
    np.savez(tmp_path / "bad.npz", **{"meta.json": np.frombuffer(meta, dtype=np.uint8)})
    return str(tmp_path / "bad.npz")


def corrupt_pickled_object(tmp_path, good):
    np.savez(tmp_path / "bad.npz", **{"meta.json": np.array([{"evil": 1}], dtype=object)})
    return str(tmp_path / "bad.npz")


def corrupt_directory(tmp_path, good):
    (tmp_path / "adir.npz").mkdir()
    return str(tmp_path / "adir.npz")


def corrupt_missing(tmp_path, good):
    return str(tmp_path / "nope" / "model.npz")


@pytest.mark.parametrize("make, message", [
    (corrupt_random_bytes, "corrupt or not a minigrad checkpoint"),
    (corrupt_empty, "corrupt or not a minigrad checkpoint"),
    (corrupt_truncated, "corrupt or not a minigrad checkpoint"),
    (corrupt_no_meta, "no meta.json"),
    (corrupt_meta_not_json, "unreadable metadata"),
    (corrupt_meta_not_an_object, "meta"),
    (corrupt_wrong_version, "format version 99"),
    (corrupt_pickled_object, "corrupt or not a minigrad checkpoint"),
    (corrupt_directory, "corrupt or not a minigrad checkpoint"),
    (corrupt_missing, "does not exist"),
], ids=lambda v: v.__name__.replace("corrupt_", "") if callable(v) else "")
def test_bad_checkpoints_raise_checkpoint_error(saved, tmp_path, make, message):
    _, good = saved
    path = make(tmp_path, good)
    for load in (load_checkpoint, load_model, DateTrainer.resume):
        with pytest.raises(CheckpointError, match=message) as info:
            load(path)
        assert path in str(info.value) and "\n" not in str(info.value)


def test_checkpoint_that_does_not_fit_its_model_config(saved, tmp_path):
    trainer, path = saved
    model_state, optimizer_state, meta = load_checkpoint(path)
    meta["model_config"]["d_model"] = 32
    meta["model_config"]["d_ff"] = 64
    wrong = str(tmp_path / "wrong.npz")
    save_checkpoint(wrong, model_state, optimizer_state, meta)
    for load in (load_model, DateTrainer.resume, load_checkpoint):       # checked before building anything
        with pytest.raises(CheckpointError, match="does not fit the model it describes"):
            load(wrong)
    del meta["schedule"]
    meta["model_config"] = trainer.model_config.to_dict()
    save_checkpoint(wrong, model_state, optimizer_state, meta)
    with pytest.raises(CheckpointError, match="schedule"):
        DateTrainer.resume(wrong)


# ----------------------------------------------------------------------- resume
@pytest.mark.parametrize("dropout, schedule", [(0.0, "cosine"), (0.1, "inverse_sqrt")])
def test_resume_equals_uninterrupted(tmp_path, dropout, schedule):
    """12 steps straight == 6 steps, save, resume, 6 more: same weights and losses, bit for bit."""
    straight = tiny_trainer(tmp_path / "a", dropout=dropout, schedule=schedule)
    straight_losses = [straight.train_step()["loss"] for _ in range(12)]

    first = tiny_trainer(tmp_path / "b", dropout=dropout, schedule=schedule)
    losses = [first.train_step()["loss"] for _ in range(6)]
    first.save(str(tmp_path / "b" / "model.npz"))
    del first
    minigrad.manual_seed(999)                            # resume must restore the RNG, not rely on it
    resumed = DateTrainer.resume(str(tmp_path / "b" / "model.npz"))
    assert resumed.step == 6
    losses += [resumed.train_step()["loss"] for _ in range(6)]

    assert losses == straight_losses
    assert_same_state(straight, resumed)


def test_resumed_run_continues_the_log_and_matches(tmp_path, limited_evaluation):
    """Trainer.run to step 6, then DateTrainer.resume(steps=12).run() equals one run of 12 steps
    (a schedule that does not depend on the total, so extending the run changes nothing)."""
    straight = tiny_trainer(tmp_path / "a", steps=12, schedule="constant", dropout=0.1)
    straight.run(progress=False)
    first = tiny_trainer(tmp_path / "b", steps=6, schedule="constant", dropout=0.1)
    first.run(progress=False)
    resumed = DateTrainer.resume(str(tmp_path / "b" / "model.npz"), steps=12)
    assert resumed.config.steps == 12 and resumed.step == 6
    resumed.run(progress=False)
    for name, value in params_of(straight).items():
        np.testing.assert_array_equal(params_of(resumed)[name], value, err_msg=name)
    log_a = [json.loads(line) for line in open(tmp_path / "a" / "train_log.jsonl")]
    log_b = [json.loads(line) for line in open(tmp_path / "b" / "train_log.jsonl")]
    assert [r["step"] for r in log_b] == list(range(1, 13))
    assert [r["loss"] for r in log_b] == [r["loss"] for r in log_a]
    assert [h["step"] for h in resumed.history] == [6, 12]


# -------------------------------------------------------------------- end to end
@pytest.mark.slow
def test_training_learns_the_date_task(tmp_path):
    """d_model 32, 4 heads, 1+1 layers, 300 steps of 64. Measured while writing this test
    (Numba kernels; the numpy backend gives the same numbers): held-out exact match on the
    first 500 test dates 84.6%, per character 98.0%, loss 4.47 -> 0.057 (-98.7%), 15-45 s
    depending on machine load. (250 steps gave only 37.6%: keep 300.)"""
    trainer = DateTrainer(ModelConfig(d_model=32, num_heads=4, num_encoder_layers=1, num_decoder_layers=1, d_ff=64),
                      TrainConfig(steps=300, batch_size=64, lr=3e-3, warmup=50, eval_every=0, checkpoint_every=0),
                      out_dir=str(tmp_path))
    losses = [trainer.train_step()["loss"] for _ in range(trainer.config.steps)]
    first, last = np.mean(losses[:5]), np.mean(losses[-10:])
    assert last < 0.2 * first, f"loss fell only from {first:.3f} to {last:.3f}"
    result = trainer.evaluate(limit=500, show_wrong=0)
    assert result["count"] == 500
    assert result["exact_match"] > 0.5, f"held-out exact match {result['exact_match']:.1%}"
    assert result["char_accuracy"] > 0.9
