"""The model's shape, in one dataclass (saved with every checkpoint as JSON)."""
from dataclasses import asdict, dataclass, fields

from .dates import SRC_LEN, TGT_LEN, VOCAB_SIZE


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
        if self.d_model % self.num_heads:
            raise ValueError(f"d_model {self.d_model} is not divisible by num_heads {self.num_heads}")
        if self.positional not in ("sinusoidal", "learned"):
            raise ValueError(f"positional must be 'sinusoidal' or 'learned', got {self.positional!r}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout}")

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, values: dict) -> "ModelConfig":
        known = {f.name for f in fields(cls)}
        unknown = set(values) - known
        if unknown:
            raise ValueError(f"unknown model config keys: {', '.join(sorted(unknown))}")
        return cls(**values)
