"""How big a model or batch a command accepts: a one-line error naming the limit, not a
MemoryError (or minutes of swapping) after the work has begun.

The limits are far above anything the date task needs (its model has 0.2 M parameters,
d_model 64, 2 layers, batches of 128) and low enough that what passes fits in a few GB:
  - each size on its own (``MAX_SIZES``), checked by argparse (``at_most``);
  - the parameter count, computed from the config before anything is allocated
    (``MAX_PARAMETERS``: 50 M float32 parameters are 0.8 GB with their gradients and Adam's
    two moments);
  - a training batch's largest activations (``MAX_ACTIVATION_FLOATS``: batch x target length
    x feed-forward width x layers, 2**28 floats = 1 GB).

A resumed run's stored sizes meet the same limits (``check_stored_sizes``): a checkpoint is a
file anyone can hand over, and its stored batch size is as much a request for memory as the option.
"""
import argparse

from transformer.tasks.dates import TGT_LEN

MAX_SIZES = {"--d-model": 4096, "--d-ff": 16384, "--heads": 256, "--layers": 64, "--batch-size": 16384}
MAX_PARAMETERS = 50_000_000
MAX_ACTIVATION_FLOATS = 2 ** 28


def at_most(option: str):
    """argparse type: an integer no larger than ``MAX_SIZES[option]`` (the lower bound is the
    config's own check, which names the field)."""
    limit = MAX_SIZES[option]

    def parse(text: str) -> int:
        value = int(text)
        if value > limit:
            raise argparse.ArgumentTypeError(f"must be at most {limit:,}, got {text}")
        return value
    parse.__name__ = "int"              # argparse's "invalid int value" message for non-numbers
    return parse


def check_model_size(config, batch_size: int = None, stored: bool = False):
    """ValueError naming the limit when ``config`` (a ModelConfig or DecoderOnlyConfig) has too many parameters, or
    a training batch of ``batch_size`` would need too much memory for its activations. ``stored``: the sizes
    come from a checkpoint, so the message names no option to lower."""
    parameters = config.num_parameters()
    if parameters > MAX_PARAMETERS:
        raise ValueError(f"the model would have {parameters:,} parameters, more than the limit of "
                         f"{MAX_PARAMETERS:,}" + ("" if stored else ": lower --d-model, --d-ff or --layers"))
    if batch_size is not None:
        if config.architecture == "decoder-only":        # one sequence of max_len positions
            layers, length = config.num_layers, config.max_len
        else:
            layers, length = config.num_encoder_layers + config.num_decoder_layers, TGT_LEN
        floats = batch_size * length * max(config.d_ff, config.d_model) * layers
        if floats > MAX_ACTIVATION_FLOATS:
            raise ValueError(f"a batch of {batch_size} would need {floats:,} floats for one kind of activation, "
                             f"more than the limit of {MAX_ACTIVATION_FLOATS:,}" +
                             ("" if stored else ": lower --batch-size, --d-ff or --layers"))


# each option's field in a stored config (ModelConfig, DecoderOnlyConfig) or TrainConfig
STORED_FIELDS = {"--d-model": ("d_model",), "--d-ff": ("d_ff",), "--heads": ("num_heads",),
                 "--layers": ("num_layers", "num_encoder_layers", "num_decoder_layers"),
                 "--batch-size": ("batch_size",)}


def check_stored_sizes(model_config, train_config):
    """A resumed run meets the limits a new run's command line does: ValueError naming the stored
    value and the limit of its option, checked before the first step."""
    for option, names in STORED_FIELDS.items():
        for name in names:
            value = getattr(train_config if name == "batch_size" else model_config, name, None)
            if value is not None and value > MAX_SIZES[option]:
                raise ValueError(f"stores {name} {value:,}, more than the limit of {MAX_SIZES[option]:,} "
                                 f"that {option} has")
    check_model_size(model_config, train_config.batch_size, stored=True)
