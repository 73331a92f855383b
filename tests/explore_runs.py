"""Shared by the explorer's tests: small real training runs with their attention snapshots (the
files the trainers write, never hand-made ones), and an explorer server in a subprocess that is
killed however the test ends."""
import contextlib
import queue
import subprocess
import sys
import threading

from transformer.models.config import ModelConfig
from transformer.training.next_word import NextWordTrainer, default_model_config, default_train_config
from transformer.training.dates import DateTrainer
from transformer.training.trainer import TrainConfig

TINY = dict(d_model=16, num_heads=2, d_ff=32)
TINY_TRAIN = dict(batch_size=8, lr=1e-2, warmup=1, schedule="constant", target_accuracy=0)


def next_word_run(folder, steps=12, every=4) -> str:
    """A next-word run of ``steps`` steps recording snapshots every ``every``: its checkpoint's path."""
    trainer = NextWordTrainer(default_model_config(num_layers=2, **TINY),
                              default_train_config(steps=steps, snapshot_every=every, **TINY_TRAIN), out_dir=str(folder))
    trainer.run(progress=False)
    return str(folder / "model.npz")


def dates_run(folder, steps=12, every=4) -> str:
    trainer = DateTrainer(ModelConfig(num_encoder_layers=1, num_decoder_layers=1, **TINY),
                      TrainConfig(steps=steps, snapshot_every=every, **TINY_TRAIN), out_dir=str(folder))
    trainer.run(progress=False)
    return str(folder / "model.npz")


def command(module_function, *args):
    """A console script's main run by this Python (no PATH needed)."""
    module, function = module_function.split(":")
    return [sys.executable, "-c", f"import sys; from {module} import {function} as m; sys.exit(m())", *args]


@contextlib.contextmanager
def served(*args, script="dates_commands:next_word_explore", wait=180):
    """Start ``script --serve --port 0 args``; yield (process, url) once it prints its URL.
    The process is killed on the way out, whatever happened."""
    process = subprocess.Popen(command(script, "--serve", "--port", "0", *args), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    try:
        lines = queue.Queue()
        threading.Thread(target=lambda: [lines.put(line) for line in process.stdout] + [lines.put("")],
                         daemon=True).start()
        try:
            line = lines.get(timeout=wait)
        except queue.Empty:
            raise AssertionError(f"no URL from the server in {wait} s") from None
        assert line, f"the server ended: {process.wait(timeout=30)} {process.stderr.read()}"
        assert line.startswith("serving the explorer at http://127.0.0.1:"), line + process.stderr.read()
        yield process, line.split()[4]
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=30)
        for stream in (process.stdout, process.stderr):
            stream.close()
