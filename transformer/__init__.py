"""An "Attention Is All You Need" encoder-decoder built only on minigrad, and the
date task it learns: ``1845-01-05`` -> ``January 5, 1845``; beside it a decoder-only model,
on the same task and on next-word prediction in a generated language.

    models/    the models a learner reads: decoder_only.py (the GPT-style model in one file: its
               config, attention, block, positions, next-token loss, cached generation),
               encoder_decoder.py (Transformer: its config and blocks, encode, decode, cached
               decode_step), attention.py (scaled dot-product attention, masks), config.py
    tasks/     the data: dates.py (the 68-token vocabulary, the date data set), language.py
               (the generated language of the next-word model)
    training/  trainer.py (the loop: Adam + warm-up, schedule, checkpoints, resume), dates.py and
               next_word.py (the two tasks' trainers), stopping, evaluation, snapshots, session, interrupt
    parallel/  how a step's gradients are computed: the batch's fixed pieces on threads (data_parallel.py) or MPI ranks (ranks.py),
               how many threads (threads.py)
    decoding.py  greedy, beam search, temperature / top-k sampling
    ladder/    the attention ladder: one model per idea (rungs.py) and the experiment over seeds
    files/     atomic checkpoints read without pickle and validated, run folders, output files
    commands/  the console scripts: dates-*, next-word-*, attention-ladder, dates-export

Nothing here imports ``viz/``; the commands that draw live there.
"""
from transformer.models.attention import (CrossAttention, MultiHeadAttention, SelfAttention, causal_mask, padding_mask,
                        scaled_dot_product_attention)
from transformer.models.config import DecoderOnlyConfig, ModelConfig, model_config_from_dict
from transformer.decoding import beam_search, greedy_decode, sample_decode
from transformer.models.decoder_only import DecoderOnlyLayer, DecoderOnlyTransformer, FeedForward, sinusoidal_encoding
from transformer.models.encoder_decoder import DecoderLayer, EncoderLayer, Transformer
