"""What a graph node says on hover, and the mask nodes that ``draw_graph`` adds to masking ops.

Tooltips (graphviz's ``tooltip`` attribute, shown when the mouse rests on a
node of the rendered SVG) carry what would clutter a label: shape, dtype,
the first few values, the value's norm and the gradient's norm.

A mask is not a Tensor input of ``MaskedFill``: the op keeps it as the boolean
array ``fn.mask`` (True = this entry is filled: attention passes ``~mask``). Without a node
for it the one idea that tells decoder self-attention from the others would be
missing from the picture, so ``mask_of(fn)`` finds it and ``mask_label`` draws
its pattern as a small grid of cells, in the project's convention (PyTorch SDPA's):
the attention mask, dark = True = may attend, so MaskedFill fills the light cells.
"""
import numpy as np

from .graph_text import escape, number, shape_text

NOT_ARRIVED = "∇: has not arrived yet (backward has not reached this tensor)"
TOOLTIP_VALUES = 6          # how many values a tooltip lists
MAX_GRID = 32               # rows/columns of a mask pattern drawn in a label
TRUE_CELL, FALSE_CELL = "#343a40", "#f1f3f5"


# -------------------------------------------------------------------- tooltips
def tooltip_text(text: str) -> str:
    """Plain text -> a DOT tooltip value (an escString) that shows exactly that text.

    Backslashes become '∖' because dot expands ``\\N``, ``\\G``, ``\\l``... in
    tooltips; newlines become ``\\n``; quotes are escaped.
    """
    text = "".join(ch if ch.isprintable() or ch == "\n" else f"\\x{ord(ch):02x}" for ch in str(text))
    return text.replace("\\", "∖").replace('"', '\\"').replace("\n", "\\n")


def norm(array) -> float:
    return float(np.sqrt(np.sum(np.square(array, dtype=np.float64))))


def first_values(data: np.ndarray, count=TOOLTIP_VALUES) -> str:
    flat = np.asarray(data).reshape(-1)
    shown = ", ".join(number(v.item()) for v in flat[:count])
    more = f", … ({flat.size} values)" if flat.size > count else ""
    return f"[{shown}{more}]"


def tensor_tooltip(tensor, name, backward_ran=True) -> str:
    """Several lines: name, shape and dtype, the first values, ‖value‖, ‖grad‖, or why there is none.

    ``backward_ran`` False: the drawing was made without a backward pass (``show_grad=False``)."""
    name = name if len(name or "") <= 120 else name[:119] + "…"     # dot breaks on very long strings
    lines = value_lines(tensor, name)
    if tensor.grad is not None:
        lines.append(f"‖grad‖ {number(norm(tensor.grad))}, grad " + first_values(tensor.grad, 3))
    elif not tensor.requires_grad:
        lines.append("no grad (constant)")
    elif not backward_ran:
        lines.append("∇: backward was not run for this drawing (--backward, or show_grad=True after backward)")
    elif tensor.grad_fn is not None and not tensor._retains_grad:
        lines.append("∇: not kept (an intermediate keeps .grad only after .retain_grad(), as in PyTorch)")
    else:
        lines.append(NOT_ARRIVED)
    return tooltip_text("\n".join(lines))


def value_lines(tensor, name) -> list:
    """The tooltip's lines about the value (plain text): name, shape and dtype, first values, ‖value‖."""
    lines = [name or "(unnamed tensor)", f"shape {shape_text(tensor.shape)}, dtype {tensor.dtype}"]
    if tensor.data.dtype.kind in "fiub":
        lines.append("values " + first_values(tensor.data))
        lines.append(f"‖value‖ {number(norm(tensor.data))}")
    return lines


# ----------------------------------------------------------------------- masks
def mask_of(fn):
    """The boolean array a masking op keeps (MaskedFill's ``mask``, Where's ``condition``), or None."""
    for attribute in ("mask", "condition"):
        value = getattr(fn, attribute, None)
        if isinstance(value, np.ndarray) and value.dtype == np.bool_:
            return attribute, value
    return None


def mask_pattern(mask: np.ndarray) -> np.ndarray:
    """The (rows, columns) pattern of the first batch element and head, as a 2-D bool array."""
    mask = np.asarray(mask)
    if mask.ndim == 0:
        return mask.reshape(1, 1)
    if mask.ndim == 1:
        return mask[None, :]
    return mask[(0,) * (mask.ndim - 2)]


def mask_kind(filled: np.ndarray) -> str:
    """'padding', 'causal', 'causal + padding' or 'custom' from MaskedFill's mask (True = filled).

    causal: every key after its query is filled (the upper triangle); padding:
    whole key columns are filled, the same for every query.
    """
    pattern = mask_pattern(filled)
    rows, columns = pattern.shape
    if rows == columns and rows > 1:
        future = np.triu(np.ones((rows, columns), dtype=bool), k=1)
        if (pattern[future]).all():
            rest = pattern & ~future
            if not rest.any():
                return "causal"
            # padding columns are filled from the first row on (the rest is in the future)
            if (rest == (rest.any(axis=0) & ~future)).all():
                return "causal + padding"
    if (pattern == pattern[:1]).all():
        return "padding"
    return "custom"


def pattern_text(mask: np.ndarray, limit=MAX_GRID) -> str:
    """The pattern as lines of '■' (True) and '·' (False)."""
    pattern = mask_pattern(mask)[:limit, :limit]
    return "\n".join("".join("■" if v else "·" for v in row) for row in pattern)


def convention(attribute: str, mask: np.ndarray):
    """(the pattern to show, what dark means): MaskedFill's ``mask`` (True = filled) is shown as the
    attention mask it was made from, ``~mask`` (True = may attend); any other as it is."""
    if attribute == "mask":
        return ~np.asarray(mask), "dark = True = may attend; MaskedFill fills the light cells"
    return np.asarray(mask), f"dark = True ({attribute})"


def mask_label(attribute: str, mask: np.ndarray, kind: str = None) -> str:
    """An HTML-like label: 'mask: causal + padding', its shape, and the pattern as a grid of cells."""
    kind = kind or mask_kind(mask)
    shown_mask, meaning = convention(attribute, mask)
    pattern = mask_pattern(shown_mask)
    shown = pattern[:MAX_GRID, :MAX_GRID]
    cell = '<TD FIXEDSIZE="TRUE" WIDTH="6" HEIGHT="6" BGCOLOR="{}"></TD>'
    grid_rows = "".join("<TR>" + "".join(cell.format(TRUE_CELL if v else FALSE_CELL) for v in row) + "</TR>"
                        for row in shown)
    grid = f'<TABLE BORDER="0" CELLBORDER="0" CELLSPACING="1" CELLPADDING="0">{grid_rows}</TABLE>'
    cut = " (first 32)" if pattern.shape != shown.shape else ""
    where = f"batch 0, head 0{cut}: " if mask.ndim > 2 else ""
    rows = [f"<B>{escape(f'{attribute}: {kind}')}</B>",
            escape(f"{shape_text(mask.shape)} bool"),
            escape(f"{where}{meaning}", limit=80)]
    text = "".join(f"<TR><TD>{row}</TD></TR>" for row in rows)
    size = f'WIDTH="{7 * shown.shape[1] + 5}" HEIGHT="{7 * shown.shape[0] + 5}"'
    grid_cell = f'<TD FIXEDSIZE="TRUE" {size}>{grid}</TD>'  # keeps the cells square
    return f'<<TABLE BORDER="0" CELLSPACING="0" CELLPADDING="1">{text}<TR>{grid_cell}</TR></TABLE>>'


def mask_tooltip(attribute: str, mask: np.ndarray, kind: str = None) -> str:
    kind = kind or mask_kind(mask)
    shown_mask, meaning = convention(attribute, mask)
    if attribute == "mask":
        lines = [f"attention mask of the op (it keeps {attribute} = ~attention mask): {kind}",
                 f"shape {shape_text(mask.shape)}, dtype bool",
                 f"{int(shown_mask.sum())} of {mask.size} entries True = may attend; the other "
                 f"{int(mask.sum())} are filled", "rows = queries, columns = keys; ■ = may attend, · = filled"]
    else:
        lines = [f"{attribute} of the op: {kind}", f"shape {shape_text(mask.shape)}, dtype bool",
                 f"{int(mask.sum())} of {mask.size} entries True", "rows, columns; ■ = True, · = False"]
    lines.append(pattern_text(shown_mask))
    return tooltip_text("\n".join(lines))
