"""The model's shape, in one dataclass (saved with every checkpoint as JSON).

``ModelConfig`` checks its values when made, so a bad stored config (``num_heads = 0``,
``max_len = 5``) is one clear error before any weight is allocated, and
``num_parameters()`` says how big the model would be without building it.
"""
from dataclasses import asdict, dataclass, fields

from .dates import SRC_LEN, TGT_LEN, VOCAB_SIZE

MAX_POSITIONS = 4096          # max_len cap: the sinusoidal table is max_len x d_model


@dataclass
class ModelConfig:
    d_model: int = 64          # width of every token vector
    num_heads: int = 4         # attention heads; d_model must divide evenly among them
    num_encoder_layers: int = 2
    num_decoder_layers: int = 2
    d_ff: int = 256            # hidden width of the position-wise feed-forward
    dropout: float = 0.0       # the date task is clean and plentiful: dropout only slows it
    positional: str = "sinusoidal"  # or "learned" (a trained position embedding)
    vocab_size: int = VOCAB_SIZE
    max_len: int = max(SRC_LEN, TGT_LEN)

    def __post_init__(self):
        for name in ("d_model", "num_heads", "num_encoder_layers", "num_decoder_layers", "d_ff",
                     "vocab_size", "max_len"):
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
        if self.vocab_size != VOCAB_SIZE:
            raise ValueError(f"vocab_size must be {VOCAB_SIZE} (the date vocabulary), got {self.vocab_size}")
        needed = max(SRC_LEN, TGT_LEN)
        if not needed <= self.max_len <= MAX_POSITIONS:
            raise ValueError(f"max_len must be in {needed}..{MAX_POSITIONS} (the dates need {needed} positions), "
                             f"got {self.max_len}")

    def num_parameters(self) -> int:
        """The parameter count of ``Transformer(self)``, computed without building it."""
        d, f, v = self.d_model, self.d_ff, self.vocab_size
        attention = 4 * (d * d + d)
        feed_forward = d * f + f + f * d + d
        norm = 2 * d
        encoder_layer = attention + feed_forward + 2 * norm
        decoder_layer = 2 * attention + feed_forward + 3 * norm
        positions = 2 * self.max_len * d if self.positional == "learned" else 0
        return (2 * v * d + positions + self.num_encoder_layers * encoder_layer
                + self.num_decoder_layers * decoder_layer + d * v + v)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, values: dict) -> "ModelConfig":
        if not isinstance(values, dict):
            raise ValueError(f"the model config must be a JSON object, got {type(values).__name__}")
        known = {f.name for f in fields(cls)}
        unknown = set(values) - known
        if unknown:
            raise ValueError(f"unknown model config keys: {', '.join(sorted(unknown))}")
        return cls(**values)
