"""One attention head, step by step: tokens -> embeddings -> positions -> Q -> QKᵀ -> softmax, as tables.

    python examples/explain.py 1676-11-30 --d-model 16      # small enough to read: 12 tokens x 16 dims
    python examples/explain.py 1845-01-05 --checkpoint runs/dates/model.npz --head 2 --markdown

For ONE head of the first encoder layer it prints, as aligned tables (4 decimals):
token ids; embedding rows; the rows scaled by sqrt(d_model) (the model does
this before adding positions, as in the paper); the positional encoding and
the sum X; Q, K, V = X W + b for the head; Q Kᵀ; Q Kᵀ / sqrt(d_k); the softmax
weights; and the head's output, weights @ V.

Every number comes from the model's own modules (``src_embed``,
``src_positions``, ``w_qkv`` and ``split``, ``split_heads``,
``scaled_dot_product_attention``), and the weights are checked against the
``last_weights`` the encoder recorded in a real forward pass.
"""
import math
from dataclasses import dataclass

import numpy as np

from minigrad import Tensor
from transformer.models.attention import padding_mask, scaled_dot_product_attention
from transformer.tasks.dates import PAD
from transformer.decoding import inference
from transformer.models.decoder_only import sinusoidal_encoding

from .inputs import require_encoder_decoder, source_ids, token_labels

DEFAULT_DATE = "1676-11-30"
SPECIAL_TOKENS = ("<sos>", "<eos>", "<pad>")


@dataclass
class Walkthrough:
    """The steps for one date and one head of encoder layer 0 (arrays for batch row 0)."""
    date: str
    head: int
    d_model: int
    d_k: int
    tokens: list            # '<sos>', '1', '6', ...
    ids: np.ndarray         # (T,)
    embedding: np.ndarray   # (T, d_model) rows of src_embed.weight
    scaled: np.ndarray      # (T, d_model) embedding * sqrt(d_model)
    positional: np.ndarray  # (T, d_model) what src_positions adds
    x: np.ndarray           # (T, d_model) scaled + positional: the encoder's input
    q: np.ndarray           # (T, d_k) this head's queries
    k: np.ndarray
    v: np.ndarray
    scores: np.ndarray      # (T, T) Q Kᵀ
    scaled_scores: np.ndarray   # (T, T) Q Kᵀ / sqrt(d_k)
    weights: np.ndarray     # (T, T) softmax over keys (padding keys masked)
    output: np.ndarray      # (T, d_k) weights @ V
    model_weights_diff: float   # max |weights - the model's own last_weights|
    model_note: str = ""        # ' (untrained model)' in the heading when it is


def compute_walkthrough(model, date: str = DEFAULT_DATE, head: int = 0) -> Walkthrough:
    require_encoder_decoder(model, "dates-explain")
    attention = model.encoder.layers[0].self_attn
    if not 0 <= head < attention.num_heads:
        raise ValueError(f"head {head} does not exist: the model has heads 0..{attention.num_heads - 1}")
    src = source_ids(date)
    d_model = model.config.d_model
    with inference(model):
        embedding = model.src_embed(src)                              # (1, T, D)
        scaled = embedding * math.sqrt(d_model)
        x = model.src_positions(scaled)
        positional = model.src_positions(Tensor(np.zeros_like(scaled.data)))
        q, k, v = (attention.split_heads(t) for t in attention.split(attention.w_qkv(x), 3))  # (1, h, T, d_k)
        scores = q @ k.swapaxes(-1, -2)
        mask = padding_mask(src, PAD)
        output, weights = scaled_dot_product_attention(q, k, v, mask)
        model.encode(src)                                             # the real pass, for the check
    own_weights = attention.last_weights[0, head]
    pick = lambda t: t.data[0, head]  # noqa: E731  (one head of batch row 0)
    return Walkthrough(
        date=date, head=head, d_model=d_model, d_k=attention.d_k, tokens=token_labels(src[0]), ids=src[0],
        embedding=embedding.data[0], scaled=scaled.data[0], positional=positional.data[0], x=x.data[0],
        q=pick(q), k=pick(k), v=pick(v), scores=pick(scores),
        scaled_scores=pick(scores) / math.sqrt(attention.d_k), weights=pick(weights), output=pick(output),
        model_weights_diff=float(np.abs(pick(weights) - own_weights).max()))


# ------------------------------------------------------------------ formatting
def format_table(matrix, row_labels, col_labels, markdown=False) -> str:
    """Rows 'pos | token | numbers to 4 decimals'; ``markdown`` gives a real pipe table."""
    rows = [[str(i), label] + [f"{value:.4f}" for value in row]
            for i, (label, row) in enumerate(zip(row_labels, np.asarray(matrix)))]
    return _format_cells(["pos", "token"] + list(col_labels), rows, markdown)


def markdown_safe(text: str) -> str:
    """'<sos>' -> '`<sos>`' (and <eos>, <pad>): a markdown renderer would take them for HTML tags."""
    for token in SPECIAL_TOKENS:
        text = text.replace(token, f"`{token}`")
    return text


def _format_cells(header, rows, markdown) -> str:
    if markdown:
        header = [markdown_safe(c) for c in header]
        rows = [[markdown_safe(c) for c in row] for row in rows]
    widths = [max(len(r[c]) for r in [header] + rows) for c in range(len(header))]
    if markdown:
        line = lambda cells: "| " + " | ".join(c.rjust(w) for c, w in zip(cells, widths)) + " |"  # noqa: E731
        rule = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    else:
        line = lambda cells: "  ".join(c.rjust(w) for c, w in zip(cells, widths))  # noqa: E731
        rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(header), rule] + [line(r) for r in rows])


def format_walkthrough(w: Walkthrough, markdown=False, max_dims=16) -> str:
    keys = [f"{i}:{t}" for i, t in enumerate(w.tokens)]
    lo, hi = w.head * w.d_k, (w.head + 1) * w.d_k
    parts = [_heading(f"Walkthrough of {w.date}: encoder layer 0, head {w.head} "
                      f"(d_model {w.d_model}, d_k {w.d_k}){w.model_note}", markdown, level=2),
             _tokens_section(w, markdown)]

    def section(title, note, matrix, columns=None):
        """``columns=None``: the columns are dims, of which the first ``max_dims`` are shown."""
        parts.append(_heading(title, markdown))
        if note:
            parts.append(markdown_safe(note) if markdown else note)
        if columns is None:
            width = matrix.shape[1]
            if width > max_dims:
                parts.append(f"(first {max_dims} of {width} dims; --max-dims to change)")
            matrix, columns = matrix[:, :max_dims], [f"dim {i + 1}" for i in range(min(width, max_dims))]
        parts.append(format_table(matrix, w.tokens, columns, markdown))

    section("Token embeddings", "rows of src_embed.weight for the ids above", w.embedding)
    section(f"Scaled embeddings (× √d_model = × {math.sqrt(w.d_model):.4f})",
            "the model multiplies embeddings by sqrt(d_model) before adding positions", w.scaled)
    section("Positional encoding", "PE(pos, 2i) = sin(pos / 10000^(2i/d_model)), PE(pos, 2i+1) = cos(...)"
            if _is_sinusoidal(w) else "learned position vectors", w.positional)
    section("X = scaled embeddings + positional encoding", "the encoder's input (no dropout in eval mode)", w.x)
    for block, (name, matrix) in enumerate((("Q", w.q), ("K", w.k), ("V", w.v))):
        first = block * w.d_model         # w_qkv's output holds Q, K and V side by side
        section(f"{name} = X · W_{name.lower()} + b_{name.lower()}, head {w.head}",
                f"columns {first + lo}..{first + hi - 1} of w_qkv's output (Q | K | V side by side)", matrix)
    section("Q · Kᵀ", "row i, column j: how strongly query i matches key j", w.scores, keys)
    section(f"Q · Kᵀ / √d_k  (÷ {math.sqrt(w.d_k):.4f})", None, w.scaled_scores, keys)
    section("softmax(Q · Kᵀ / √d_k): attention weights", "each row sums to 1; <pad> keys would get 0",
            w.weights, keys)
    section("Head output = weights · V", None, w.output)
    parts.append(f"check: these weights equal the model's own encoder.layers.0.self_attn.last_weights"
                 f"[0, {w.head}] from a real forward pass (max |difference| {w.model_weights_diff:.1e})")
    return "\n\n".join(parts) + "\n"


def _is_sinusoidal(w: Walkthrough) -> bool:
    return np.allclose(w.positional, sinusoidal_encoding(len(w.ids), w.d_model), atol=1e-5)


def _heading(text, markdown, level=3) -> str:
    return f"{'#' * level} {text}" if markdown else f"{text}\n{'=' * len(text)}"


def _tokens_section(w: Walkthrough, markdown) -> str:
    ids = ", ".join(str(i) for i in w.ids)
    text = "".join(w.tokens)
    flow = f"`{w.date}` -> `{text}` -> `[{ids}]`" if markdown else f"{w.date} -> {text} -> [{ids}]"
    rows = [[str(i), token, str(token_id)] for i, (token, token_id) in enumerate(zip(w.tokens, w.ids))]
    return "\n\n".join([_heading("Token ids", markdown), flow, _format_cells(["pos", "token", "id"], rows, markdown)])
