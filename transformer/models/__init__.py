"""The models: an encoder-decoder (``encoder_decoder.Transformer``) and a decoder-only
(``decoder_only.DecoderOnlyTransformer``, GPT-style), built from the same attention."""
from transformer.models.config import DecoderOnlyConfig
from transformer.models.decoder_only import DecoderOnlyTransformer
from transformer.models.encoder_decoder import Transformer


def build_model(config):
    """A fresh model of the architecture ``config`` describes (ModelConfig or DecoderOnlyConfig)."""
    return DecoderOnlyTransformer(config) if isinstance(config, DecoderOnlyConfig) else Transformer(config)
