"""The model's shape, in one dataclass per architecture (saved with every checkpoint as JSON).

    ModelConfig        the encoder-decoder (``model.Transformer``), the date model of every release
    DecoderOnlyConfig  the decoder-only model (``decoder_only.DecoderOnlyTransformer``), on the date
                       task or on the generated language of next-word prediction (``task``)

Each records its ``architecture`` in its dict, and ``model_config_from_dict`` builds the right
one from a stored dict; a dict without the key (every checkpoint written before the decoder-only
model existed) is an encoder-decoder's. A config checks its values when made, so a bad stored
config (``num_heads = 0``, ``max_len = 5``) is one clear error before any weight is allocated,
and ``num_parameters()`` says how big the model would be without building it.
"""
from dataclasses import asdict, dataclass, fields

from transformer.tasks.dates import DECODER_ONLY_LEN, SRC_LEN, TGT_LEN, VOCAB_SIZE

MAX_POSITIONS = 4096          # max_len cap: the sinusoidal table is max_len x d_model
MAX_VOCAB = 100_000           # vocab_size cap of a decoder-only model (the embedding is vocab x d_model)
ARCHITECTURES = ("encoder-decoder", "decoder-only")
DECODER_ONLY_TASKS = ("dates", "next-word")


class _Shape:
    """What both configs share: their checks, their dict form and the parameter count of one block."""

    def _check_sizes(self, names):
        for name in names:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if self.d_model % self.num_heads:
            raise ValueError(f"d_model {self.d_model} is not divisible by num_heads {self.num_heads}")
        if self.positional not in ("sinusoidal", "learned"):
            raise ValueError(f"positional must be 'sinusoidal' or 'learned', got {self.positional!r}")
        if isinstance(self.dropout, bool) or not isinstance(self.dropout, (int, float)) \
                or not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout!r}")

    def _check_architecture(self, expected):
        if self.architecture != expected:
            raise ValueError(f"architecture must be {expected!r} for {type(self).__name__}, "
                             f"got {self.architecture!r}")

    def _check_max_len(self, needed, why):
        if not needed <= self.max_len <= MAX_POSITIONS:
            raise ValueError(f"max_len must be in {needed}..{MAX_POSITIONS} ({why}), got {self.max_len}")

    def _attention_block_parameters(self, attentions, norms) -> int:
        """One block: ``attentions`` attention modules (w_qkv or w_q + w_kv, and w_o: 4 d x d
        matrices and biases), the feed-forward and ``norms`` layer norms."""
        d, f = self.d_model, self.d_ff
        return attentions * 4 * (d * d + d) + (d * f + f + f * d + d) + norms * 2 * d

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, values: dict):
        if not isinstance(values, dict):
            raise ValueError(f"the model config must be a JSON object, got {type(values).__name__}")
        known = {f.name for f in fields(cls)}
        unknown = set(values) - known
        if unknown:
            raise ValueError(f"unknown model config keys: {', '.join(sorted(unknown))}")
        return cls(**values)


@dataclass
class ModelConfig(_Shape):
    d_model: int = 64          # width of every token vector
    num_heads: int = 4         # attention heads; d_model must divide evenly among them
    num_encoder_layers: int = 2
    num_decoder_layers: int = 2
    d_ff: int = 256            # hidden width of the position-wise feed-forward
    dropout: float = 0.0       # the date task is clean and plentiful: dropout only slows it
    positional: str = "sinusoidal"  # or "learned" (a trained position embedding)
    vocab_size: int = VOCAB_SIZE
    max_len: int = max(SRC_LEN, TGT_LEN)
    architecture: str = "encoder-decoder"

    def __post_init__(self):
        self._check_architecture("encoder-decoder")
        self._check_sizes(("d_model", "num_heads", "num_encoder_layers", "num_decoder_layers", "d_ff",
                           "vocab_size", "max_len"))
        if self.vocab_size != VOCAB_SIZE:
            raise ValueError(f"vocab_size must be {VOCAB_SIZE} (the date vocabulary), got {self.vocab_size}")
        needed = max(SRC_LEN, TGT_LEN)
        self._check_max_len(needed, f"the dates need {needed} positions")

    def num_parameters(self) -> int:
        """The parameter count of ``Transformer(self)``, computed without building it."""
        d, v = self.d_model, self.vocab_size
        positions = 2 * self.max_len * d if self.positional == "learned" else 0
        return (2 * v * d + positions + self.num_encoder_layers * self._attention_block_parameters(1, 2)
                + self.num_decoder_layers * self._attention_block_parameters(2, 3) + d * v + v)


@dataclass
class DecoderOnlyConfig(_Shape):
    d_model: int = 64
    num_heads: int = 4
    num_layers: int = 2        # blocks of causal self-attention + feed-forward
    d_ff: int = 256
    dropout: float = 0.0
    positional: str = "sinusoidal"
    vocab_size: int = VOCAB_SIZE
    max_len: int = DECODER_ONLY_LEN   # the date task's sequence: 10 characters + <sos> + answer + <eos>
    task: str = "dates"        # "dates" (the 68-token vocabulary) or "next-word" (the generated language)
    architecture: str = "decoder-only"

    def __post_init__(self):
        self._check_architecture("decoder-only")
        self._check_sizes(("d_model", "num_heads", "num_layers", "d_ff", "vocab_size", "max_len"))
        if self.task not in DECODER_ONLY_TASKS:
            raise ValueError(f"task must be one of {', '.join(DECODER_ONLY_TASKS)}, got {self.task!r}")
        if self.task == "dates":
            if self.vocab_size != VOCAB_SIZE:
                raise ValueError(f"vocab_size must be {VOCAB_SIZE} (the date vocabulary), got {self.vocab_size}")
            self._check_max_len(DECODER_ONLY_LEN, f"a date and its answer take {DECODER_ONLY_LEN} positions")
        else:
            if self.vocab_size > MAX_VOCAB:
                raise ValueError(f"vocab_size must be at most {MAX_VOCAB:,}, got {self.vocab_size}")
            self._check_max_len(2, "a context and the word after it")

    def num_parameters(self) -> int:
        """The parameter count of ``DecoderOnlyTransformer(self)``, computed without building it."""
        d, v = self.d_model, self.vocab_size
        positions = self.max_len * d if self.positional == "learned" else 0
        return v * d + positions + self.num_layers * self._attention_block_parameters(1, 2) + d * v + v


def model_config_from_dict(values: dict):
    """The config a stored dict describes: its ``architecture`` decides the class (none: encoder-decoder)."""
    if not isinstance(values, dict):
        raise ValueError(f"the model config must be a JSON object, got {type(values).__name__}")
    architecture = values.get("architecture", "encoder-decoder")
    if architecture not in ARCHITECTURES:
        raise ValueError(f"architecture must be one of {', '.join(ARCHITECTURES)}, got {architecture!r}")
    return (ModelConfig if architecture == "encoder-decoder" else DecoderOnlyConfig).from_dict(values)
