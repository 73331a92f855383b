"""Text in graph labels: escaping any string for graphviz's HTML-like labels, and short summaries
of shapes, numbers, values and gradients."""
import html
import unicodedata

import numpy as np

MAX_LABEL_CHARS = 48


# --------------------------------------------------------------------- escaping
def escape(text, limit=MAX_LABEL_CHARS) -> str:
    """Any string -> safe text for an HTML-like label (one line per input line).

    Long strings are cut with an ellipsis (DOT strings over 16 KB break dot);
    control characters are shown as \\xNN; ``& < > "`` become entities, and
    backslashes are doubled because dot reads ``\\\\`` as one backslash even
    inside HTML labels.
    """
    text = str(text)
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    lines = text.split("\n")
    return "<BR/>".join(escape_line(line) for line in lines)


def escape_line(line: str) -> str:
    visible = "".join(f"\\x{ord(ch):02x}" if unicodedata.category(ch) in ("Cc", "Cs") else ch
                      for ch in line)
    return html.escape(visible, quote=True).replace("\\", "\\\\")


def html_label(*rows) -> str:
    """An HTML-like label from already-escaped rows (the <...> tells graphviz it is HTML)."""
    return "<" + "<BR/>".join(row for row in rows if row) + ">"


# ------------------------------------------------------------------- summaries
def shape_text(shape) -> str:
    return "(" + ", ".join(str(n) for n in shape) + ("," if len(shape) == 1 else "") + ")"


def number(x) -> str:
    return f"{x:.4g}"


def value_summary(data: np.ndarray) -> str:
    if data.size == 0:
        return "empty"
    if data.size == 1:
        return "= " + number(data.reshape(-1)[0].item())
    if data.dtype.kind not in "fiub":
        return ""
    finite = data[np.isfinite(data)] if data.dtype.kind == "f" else data
    if finite.size == 0:
        return "all non-finite"
    return (f"min {number(finite.min())} max {number(finite.max())} "
            f"mean {number(finite.astype(np.float64).mean())}")


def grad_summary(tensor) -> str:
    grad = tensor.grad
    if grad is None:
        return "grad: not kept" if tensor.requires_grad else ""
    norm = float(np.sqrt(np.sum(np.square(grad, dtype=np.float64))))
    return f"∇ {shape_text(grad.shape)} ‖∇‖ {number(norm)}"
