"""A ``minigrad.trace`` tape as straight-line Python (``Traced.code``), as ``torch.fx`` prints a
``GraphModule``: one line per forward op, one per backward rule, one per gradient sum.

    t3 = Linear(t2, w_qkv, b_qkv)                  # (2, 9, 24) float32  [matmul:kernel]
    ...
    g2, g_w_qkv, g_b_qkv = Linear.backward(g3)     # [matmul:kernel]
    g2 = g2 + g2_1

Names: ``t<i>`` is line i's output, ``g<...>`` its gradient; parameters by the names given to
``trace(names=...)`` (dots become underscores), else ``p<i>``; ``inputs[k]`` the call's k-th
argument (``inputs[k][...]`` a part of it, e.g. ``tgt[:, 1:]``); any other constant by its value
(one number) or its dtype and shape (a stored array: a cached mask, the positional rows).
"""
import numpy as np

OPTIONS_WIDTH = 60      # longer option lists are cut: the line stays one line


def tape_lines(tape, names):
    leaves = len(tape.leaves)
    value_names = [_leaf_name(leaf, i, names) for i, leaf in enumerate(tape.leaves)]
    value_names += [f"t{line.index}" for line in tape.lines]
    out = ["def step(*inputs):", "    # forward"]
    for line in tape.lines:
        args = [_fed(line.feeds[k], value_names, leaves) or line.constants[k] if source == -1 else value_names[source]
                for k, source in enumerate(line.sources)]
        options = _options_text(line.options, line.option_feeds, value_names, leaves)
        call = f"{value_names[leaves + line.index]} = {line.op.__name__}({', '.join(args + options)})"
        note = f"{tuple(line.shape)} {np.dtype(line.dtype).name}" + _kernels(line.kernels)
        out.append(f"    {call:<58}  # {note}")
    if tape.root is None:
        return out
    out.append("    # backward")
    out.append(f"    g_{value_names[tape.root]} = ones_like({value_names[tape.root]})")
    pending = {tape.root}
    for slot, line, flows in tape.plan:
        grad = f"g_{value_names[slot]}"
        if slot not in pending:
            continue
        if line is None:
            out.append(f"    {value_names[slot]}.grad += {grad}")
            continue
        targets, sums = [], []
        for k, target in enumerate(flows):
            if target is None:
                targets.append("_")
                continue
            name = f"g_{value_names[target]}"
            if target in pending:                   # a second gradient for it: summed in eager's order
                targets.append(f"{name}_{k}")
                sums.append(f"    {name} = {name} + {name}_{k}")
            else:
                targets.append(name)
                pending.add(target)
        call = f"{', '.join(targets)} = {tape.lines[line].op.__name__}.backward({grad})"
        kernels = tape.backward_kernels.get(line, ())
        out.append(f"    {call:<58}  #{_kernels(kernels)}" if kernels else f"    {call}")
        out.extend(sums)
    return out


def _leaf_name(leaf, i, names):
    name = names.get(id(leaf))
    return name.replace(".", "_") if name else f"p{i}"


def _fed(feed, value_names, leaves):
    """An input that is an earlier op's output or the call's argument, by name (else None)."""
    if feed is None:
        return None
    if feed[0] == "line":
        return value_names[leaves + feed[1]]
    if feed[0] == "arg":
        _, k, offset, shape, strides, _ = feed
        return f"inputs[{k}]" if offset == 0 and _contiguous(shape, strides) else f"inputs[{k}][...]"
    return None


def _contiguous(shape, strides):
    step = strides[-1] if strides else 0
    for n, stride in zip(reversed(shape), reversed(strides)):
        if stride != step:
            return False
        step *= n
    return True


def _options_text(options, feeds, value_names, leaves):
    parts = []
    for key, value in options.items():
        fed = _fed(feeds.get(key), value_names, leaves)
        if fed:
            text = fed
        elif callable(value) and hasattr(value, "__name__"):
            text = value.__name__
        elif isinstance(value, np.ndarray):
            text = f"const_{value.dtype}{list(value.shape)}"
        elif isinstance(value, np.random.Generator):
            text = "rng"
        elif isinstance(value, list):
            text = "[]"
        else:
            text = repr(value)
        parts.append(f"{key}={text}")
    text = ", ".join(parts)
    return [text if len(text) <= OPTIONS_WIDTH else text[:OPTIONS_WIDTH - 3] + "..."] if parts else []


def _kernels(kernels):
    return f"  [{', '.join(kernels)}]" if kernels else ""
