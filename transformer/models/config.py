"""Which config a stored model has: ``model_config_from_dict`` picks the class by its ``architecture``.

    ModelConfig        the encoder-decoder (``encoder_decoder.Transformer``), the date model of every release
    DecoderOnlyConfig  the decoder-only model (``decoder_only.DecoderOnlyTransformer``)

Each config lives in its model's file and holds numbers only; the task that trains a model
supplies its vocabulary size and lengths, and checks a stored model fits it
(``transformer.tasks.dates.check_model_config``, the language's vocabulary on loading a
next-word checkpoint). A dict without ``architecture`` (every checkpoint written before the
decoder-only model existed) is an encoder-decoder's.
"""
from transformer.models.decoder_only import MAX_POSITIONS, MAX_VOCAB, DecoderOnlyConfig
from transformer.models.encoder_decoder import ModelConfig

ARCHITECTURES = ("encoder-decoder", "decoder-only")
__all__ = ["ARCHITECTURES", "MAX_POSITIONS", "MAX_VOCAB", "DecoderOnlyConfig", "ModelConfig", "model_config_from_dict"]


def model_config_from_dict(values: dict):
    """The config a stored dict describes: its ``architecture`` decides the class (none: encoder-decoder)."""
    if not isinstance(values, dict):
        raise ValueError(f"the model config must be a JSON object, got {type(values).__name__}")
    architecture = values.get("architecture", "encoder-decoder")
    if architecture not in ARCHITECTURES:
        raise ValueError(f"architecture must be one of {', '.join(ARCHITECTURES)}, got {architecture!r}")
    return (ModelConfig if architecture == "encoder-decoder" else DecoderOnlyConfig).from_dict(values)
