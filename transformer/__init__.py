"""An "Attention Is All You Need" encoder-decoder built only on minigrad, and the
date task it learns: ``1845-01-05`` -> ``January 5, 1845``; beside it a decoder-only model,
on the same task and on next-word prediction in a generated language.

    dates.py       the 68-token vocabulary, encode/decode, the date data set
    positional.py  sinusoidal table (the paper's formula) or learned positions
    attention.py   scaled dot-product attention, SelfAttention / CrossAttention (packed w_qkv / w_kv), masks
    layers.py      feed-forward, EncoderLayer, DecoderLayer, DecoderOnlyLayer
    model.py       Transformer: encode, decode, decode_step (cached)
    decoder_only.py  DecoderOnlyTransformer: causal blocks, next-token loss, cached generation
    decoding.py    greedy, beam search, temperature / top-k sampling
    training.py    Trainer (Adam + warm-up, checkpoints, resume), load_model
    session.py     around each step: clock, log, progress bar, checkpoint cadence, profiler hook
    stopping.py    when to evaluate, when the model is done (target, cool-down, confirmation)
    interrupt.py   Ctrl-C / SIGTERM: finish the step, save, exit 130
    run_dir.py     the run folder: overwrite refusal, lock, stale temporaries, log cut on resume
    evaluation.py  exact match and per-character accuracy
    checkpoint.py  atomic .npz checkpoints read without pickle, validated before use
    cli.py         dates-train, dates-translate, dates-evaluate
    next_word.py   next-word prediction: NextWordTrainer (per-kind held-out accuracy), complete
    next_word_cli.py  next-word-train, next-word-complete
"""
from transformer.models.attention import (CrossAttention, MultiHeadAttention, SelfAttention, causal_mask, padding_mask,
                        scaled_dot_product_attention)
from transformer.models.config import DecoderOnlyConfig, ModelConfig, model_config_from_dict
from transformer.decoding import beam_search, greedy_decode, sample_decode
from transformer.models.decoder_only import DecoderOnlyTransformer
from transformer.models.layers import DecoderLayer, DecoderOnlyLayer, EncoderLayer, FeedForward
from transformer.models.encoder_decoder import Transformer
from transformer.models.positional import sinusoidal_encoding
