"""What every picture starts from: a model (checkpoint or fresh and seeded) and one date.
(The options that choose them: ``transformer/commands/model_options.py``.)

The commands draw the trained model in ``runs/dates/model.npz`` (where
``dates-train`` writes it) unless told otherwise; without one, or with
``--untrained`` or a fresh model's shape (``--d-model`` ...), they draw a fresh
model and say so in one line and in every title. A fresh model is what you get
before training: ``minigrad.manual_seed(seed)`` then ``Transformer(config)``,
so the same seed always draws the same weights.

A decoder-only checkpoint (``dates-train --architecture decoder-only``) is drawn too: its
one input is the date's characters, ``<sos>`` and the answer (``model_inputs``), and its only
attention is masked self-attention, the kind ``decoder-self`` (``attention_kinds``).
"""
import os
import sys
from dataclasses import dataclass

import numpy as np

import minigrad
from transformer.models.config import ModelConfig
from transformer.tasks.dates import EOS, SOS, VOCAB, encode, parse_iso_date, translate_reference
from transformer.models.decoder_only import DecoderOnlyTransformer
from transformer.decoding import greedy_decode
from transformer.files.run_dir import default_checkpoint as newest_checkpoint
from transformer.models.encoder_decoder import Transformer


DEFAULT_CHECKPOINT = os.path.join("runs", "dates", "model.npz")
UNTRAINED = "untrained model"

# A decorator for the picture commands' mains: run on the kernels' numpy twins. A command runs
# the model once or twice on one date, where the Numba kernels gain nothing, while loading
# them costs ~0.3 s and compiling them on a cold cache 6-7 s (dates-explain: 0.7 s vs 7.9 s).
on_numpy_twins = minigrad.kernels.use_backend("numpy")


@dataclass
class ChosenModel:
    """The model a command draws, and how to say which one it is in titles."""
    model: Transformer
    trained: bool
    source: str             # the checkpoint's path, or 'fresh, seed 0'

    @property
    def title_note(self) -> str:
        """'' for a trained model, ' (untrained model)' for a fresh one: appended to figure titles."""
        return "" if self.trained else f" ({UNTRAINED})"


def choose_model(checkpoint=None, untrained=False, seed=None, d_model=None, heads=None, layers=None,
                 default_checkpoint=None, say=None) -> ChosenModel:
    """The checkpoint given; else ``default_checkpoint`` (default: the newest finished run's,
    ``run_dir.default_checkpoint``) if it exists and no fresh model was asked for; else a fresh
    seeded model, announced in one line (``say``, default: print to stderr).

    Raises transformer.files.checkpoint.CheckpointError for a bad checkpoint, and
    ValueError when a checkpoint and --untrained are both given.
    """
    say = say or (lambda line: print(line, file=sys.stderr))
    for option, value, least in (("--seed", seed, 0), ("--d-model", d_model, 1), ("--heads", heads, 1),
                                 ("--layers", layers, 1)):
        if value is not None and value < least:
            raise ValueError(f"{option} must be at least {least}, got {value}")
    fresh_options = [name for name, value in (("--seed", seed), ("--d-model", d_model), ("--heads", heads),
                                              ("--layers", layers)) if value is not None]
    if checkpoint:
        if untrained:
            raise ValueError("--checkpoint and --untrained contradict each other: give one of them")
        return ChosenModel(load_or_create_model(checkpoint, 0, d_model, heads, layers), True, checkpoint)
    if not untrained and not fresh_options:
        default_checkpoint = default_checkpoint or newest_checkpoint(say=say)
        if os.path.exists(default_checkpoint):
            return ChosenModel(load_or_create_model(default_checkpoint), True, default_checkpoint)
    seed = 0 if seed is None else seed
    model = load_or_create_model(None, seed, d_model, heads, layers)
    if untrained or fresh_options:
        why = "--untrained" if untrained else " / ".join(fresh_options)
        say(f"note: drawing an {UNTRAINED} (fresh, seed {seed}, d_model {model.config.d_model}), as {why} asks")
    else:
        say(f"note: no checkpoint at {default_checkpoint}: drawing an {UNTRAINED} (fresh, seed {seed}); "
            "train one with dates-train, or pass --checkpoint PATH")
    return ChosenModel(model, False, f"fresh, seed {seed}")


def load_or_create_model(checkpoint=None, seed=0, d_model=None, heads=None, layers=None) -> Transformer:
    """The checkpoint's model, or a fresh one seeded with ``seed``, in eval mode."""
    if checkpoint:
        if any(v is not None for v in (d_model, heads, layers)):
            print("note: --d-model/--heads/--layers apply to a fresh model; the checkpoint's shape is used",
                  file=sys.stderr)
        from transformer.files.trained_model import load_model
        return load_model(checkpoint)
    minigrad.manual_seed(seed)
    return Transformer(fresh_config(d_model, heads, layers)).eval()


def fresh_config(d_model=None, heads=None, layers=None) -> ModelConfig:
    """The shape of a fresh model: the defaults, with what is given (the commands check its size
    against their limits before anything is allocated)."""
    defaults = ModelConfig()
    d_model = d_model or defaults.d_model
    heads = heads or _default_heads(d_model, defaults.num_heads)
    layers = layers or defaults.num_encoder_layers
    return ModelConfig(d_model=d_model, num_heads=heads, num_encoder_layers=layers,
                       num_decoder_layers=layers, d_ff=4 * d_model)


def _default_heads(d_model, heads):
    """The default head count, or fewer when it does not divide d_model."""
    while d_model % heads:
        heads -= 1
    return heads


def source_ids(date: str) -> np.ndarray:
    """'1676-11-30' -> (1, 12) ids; raises transformer.tasks.dates.DateError for a bad date."""
    parse_iso_date(date)
    return encode(date)[None, :].astype(np.int64)


def decoder_input_from_greedy(model, src: np.ndarray) -> np.ndarray:
    """(1, T) ids: <sos> followed by the model's greedy output up to (not including) <eos>.

    Feeding these back teacher-forced reproduces the greedy run, so position t of
    the decoder is the one that produced output character t.
    """
    out = greedy_decode(model, src)[0]
    stop = np.flatnonzero(out == EOS)
    produced = out[: stop[0]] if len(stop) else out
    limit = model.config.max_len - 1 - (src.shape[1] - 2 if is_decoder_only(model) else 0)
    return np.concatenate([[SOS], produced[:limit]])[None, :].astype(np.int64)


def decoder_input_from_reference(date: str) -> np.ndarray:
    """(1, T) ids: <sos> followed by the correct answer ('January 5, 1845'), without <eos>."""
    answer = encode(translate_reference(date))
    return answer[None, :-1].astype(np.int64)


def token_labels(ids) -> list:
    """Tick/row labels: '<sos>', '1', '-', ... (a space is shown as '␣')."""
    return ["␣" if VOCAB[i] == " " else VOCAB[i] for i in np.asarray(ids).reshape(-1)]


# ------------------------------------------------------------ either architecture
ATTENTION_KINDS = ("encoder-self", "decoder-self", "cross")


def is_decoder_only(model) -> bool:
    return isinstance(model, DecoderOnlyTransformer)


def attention_kinds(model) -> tuple:
    """The attention kinds ``model`` has: all three, or a decoder-only model's masked self-attention."""
    return ("decoder-self",) if is_decoder_only(model) else ATTENTION_KINDS


def check_kind(model, kind: str):
    """ValueError in one line when ``model`` has no attention of this kind."""
    if kind not in attention_kinds(model):
        raise ValueError(f"this is a decoder-only model: its only attention is masked self-attention "
                         f"(--kind decoder-self); it has no {kind} attention")


def model_inputs(model, src: np.ndarray, tgt_in: np.ndarray) -> tuple:
    """The arguments to call ``model`` with: (src, tgt_in), or for a decoder-only model its one
    sequence, the date's characters followed by tgt_in (<sos> + answer)."""
    if is_decoder_only(model):
        return (np.concatenate([src[:, 1:-1], tgt_in], axis=1),)
    return src, tgt_in


def reference_inputs(model, date: str) -> tuple:
    """``model_inputs`` teacher-forced on the correct answer for ``date``."""
    return model_inputs(model, source_ids(date), decoder_input_from_reference(date))


def axis_labels(model, inputs: tuple, kind: str) -> tuple:
    """(query labels, key labels) of an attention kind for the model's ``inputs``."""
    if is_decoder_only(model):
        sequence = token_labels(inputs[0])
        return sequence, sequence
    source, target = token_labels(inputs[0]), token_labels(inputs[1])
    return (source if kind == "encoder-self" else target), (target if kind == "decoder-self" else source)


def require_encoder_decoder(model, command: str):
    """ValueError in one line for a command that only knows the encoder-decoder."""
    if is_decoder_only(model):
        raise ValueError(f"{command} walks through the encoder-decoder; this checkpoint holds a decoder-only "
                         "model (dates-explore --kind decoder-self shows its attention)")
