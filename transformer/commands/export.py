"""Export a trained date model's weights under PyTorch's parameter names, to load them into PyTorch.

    dates-export                                   # runs/dates/model.npz -> runs/dates/model.safetensors
                                                   # (the newest finished run's: runs/dates-2 ... too)
    dates-export --checkpoint X/model.npz --out X/weights.safetensors

The names are those of the same model built from PyTorch's own layers
(``examples/compare_with_pytorch.py`` builds it, and its ``load_exported`` loads this file):

    src_embed, tgt_embed           torch.nn.Embedding(68, d_model)
    src_positions, tgt_positions   torch.nn.Embedding(max_len, d_model), only for learned positions
                                   (the sinusoidal table has no parameters)
    encoder                        torch.nn.TransformerEncoder of TransformerEncoderLayer(d_model, heads,
                                   d_ff, dropout, batch_first=True): post-norm, ReLU, no final norm
    decoder                        torch.nn.TransformerDecoder of TransformerDecoderLayer(...), the same
    output                         torch.nn.Linear(d_model, 68)

A decoder-only checkpoint (``dates-train --architecture decoder-only``) exports as

    embedding                      torch.nn.Embedding(68, d_model)
    positions                      torch.nn.Embedding(max_len, d_model), only for learned positions
    decoder                        torch.nn.TransformerEncoder of TransformerEncoderLayer(...) run with a
                                   causal mask (its blocks are the encoder's, masked)
    output                         torch.nn.Linear(d_model, 68)

so ``encoder.layers.0.self_attn.in_proj_weight`` is minigrad's ``w_qkv.weight`` transposed
(PyTorch's Linear weights are (out, in), minigrad's (in, out)); a decoder layer's cross-attention
``multihead_attn.in_proj_weight`` stacks minigrad's ``w_q`` and ``w_kv``. The model then takes
embeddings times sqrt(d_model) plus the positions, and boolean masks where True means *masked
out*, PyTorch's convention for ``nn.MultiheadAttention`` (minigrad's is True = may attend).

The file is written with the ``safetensors`` package's numpy API (no pickle, no torch needed);
its metadata holds the model config as JSON. ``--format npz`` writes the same arrays to a
numpy ``.npz`` instead.
"""
import json
import os
import sys
from collections import OrderedDict

import numpy as np

from transformer.models.config import ModelConfig
from transformer.commands.console import Parser, console_script, path_argument
from transformer.files.output_file import EXPORTED_NPZ, SAFETENSORS, add_force_option, atomic_output, check_output

DEFAULT_CHECKPOINT = os.path.join("runs", "dates", "model.npz")
FORMATS = ("safetensors", "npz")
KINDS_BY_FORMAT = {"safetensors": SAFETENSORS, "npz": EXPORTED_NPZ}


def torch_names(minigrad_arrays, config: ModelConfig) -> "OrderedDict[str, np.ndarray]":
    """minigrad-named arrays (a ``state_dict()``, or gradients by the same names) -> PyTorch-named ones.

    Linear weights are transposed to PyTorch's (out, in); a cross-attention's ``w_q`` and ``w_kv``
    become one ``in_proj`` (q, k, v stacked). Every array is float32 and C-contiguous.
    """
    arrays = {name: np.asarray(value) for name, value in minigrad_arrays.items()}
    out = OrderedDict()

    def put(name, value):
        out[name] = np.ascontiguousarray(value, dtype=np.float32)

    def linear(torch_prefix, minigrad_prefix):
        put(f"{torch_prefix}.weight", arrays[f"{minigrad_prefix}.weight"].T)
        put(f"{torch_prefix}.bias", arrays[f"{minigrad_prefix}.bias"])

    def norm(torch_prefix, minigrad_prefix):
        put(f"{torch_prefix}.weight", arrays[f"{minigrad_prefix}.weight"])
        put(f"{torch_prefix}.bias", arrays[f"{minigrad_prefix}.bias"])

    if config.architecture == "decoder-only":
        embeddings, stacks = ("embedding", "positions"), (("decoder", config.num_layers, 2),)
    else:
        embeddings = ("src_embed", "src_positions", "tgt_embed", "tgt_positions")
        stacks = (("encoder", config.num_encoder_layers, 2), ("decoder", config.num_decoder_layers, 3))
    for embedding, positions in zip(embeddings[::2], embeddings[1::2]):
        put(f"{embedding}.weight", arrays[f"{embedding}.weight"])
        if config.positional == "learned":
            put(f"{positions}.weight", arrays[f"{positions}.embedding.weight"])
    for stack, count, norms in stacks:
        for i in range(count):
            layer = f"{stack}.layers.{i}"
            put(f"{layer}.self_attn.in_proj_weight", arrays[f"{layer}.self_attn.w_qkv.weight"].T)
            put(f"{layer}.self_attn.in_proj_bias", arrays[f"{layer}.self_attn.w_qkv.bias"])
            linear(f"{layer}.self_attn.out_proj", f"{layer}.self_attn.w_o")
            if norms == 3:                          # the encoder-decoder's decoder: cross-attention
                cross = f"{layer}.cross_attn"
                put(f"{layer}.multihead_attn.in_proj_weight",
                    np.concatenate([arrays[f"{cross}.w_q.weight"], arrays[f"{cross}.w_kv.weight"]], axis=1).T)
                put(f"{layer}.multihead_attn.in_proj_bias",
                    np.concatenate([arrays[f"{cross}.w_q.bias"], arrays[f"{cross}.w_kv.bias"]]))
                linear(f"{layer}.multihead_attn.out_proj", f"{cross}.w_o")
            linear(f"{layer}.linear1", f"{layer}.feed_forward.linear1")
            linear(f"{layer}.linear2", f"{layer}.feed_forward.linear2")
            for n in range(1, norms + 1):
                norm(f"{layer}.norm{n}", f"{layer}.norm{n}")
    linear("output", "output")
    return out


def export_weights(model, path, fmt="safetensors", metadata=None, force=True) -> str:
    """Write ``model``'s weights under PyTorch's names to ``path`` (atomically); returns the path.

    An existing file there is replaced only if it is an earlier export and ``force`` is set; a
    checkpoint, a log or anything else is never replaced (``output_file.check_output``).
    """
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
    arrays = torch_names(model.state_dict(), model.config)
    info = {"format": f"minigrad {model.config.architecture} Transformer, PyTorch parameter names",
            "model_config": json.dumps(model.config.to_dict()), **(metadata or {})}
    path = os.fspath(path)
    check_output(path, force, kind=KINDS_BY_FORMAT[fmt])
    with atomic_output(path) as temporary:
        if fmt == "safetensors":
            from safetensors.numpy import save_file
            save_file(dict(arrays), temporary, metadata=info)
        else:
            with open(temporary, "wb") as f:
                np.savez(f, **arrays, **{"metadata.json": np.frombuffer(json.dumps(info).encode(), np.uint8)})
    return path


@console_script
def main(argv=None) -> int:
    parser = Parser(prog="dates-export", description=__doc__.split("\n")[0])
    parser.add_argument("--checkpoint", default=None, type=path_argument,
                        help=f"the dates-train checkpoint to export (default: the newest finished run's, "
                             f"{DEFAULT_CHECKPOINT} or runs/dates-N/model.npz; one line names it when there are several)")
    parser.add_argument("--out", type=path_argument, help="output file (default: the checkpoint's path with .safetensors or "
                                      "-torch.npz in place of .npz)")
    parser.add_argument("--format", choices=FORMATS, default="safetensors",
                        help="safetensors (read with safetensors.torch.load_file) or a numpy .npz "
                             "(default: %(default)s)")
    add_force_option(parser)
    args = parser.parse_args(argv)
    from transformer.files.checkpoint import CheckpointError
    from transformer.files.run_dir import default_checkpoint
    from transformer.files.trained_model import load_model
    args.checkpoint = args.checkpoint or default_checkpoint()
    stem = args.checkpoint[:-4] if args.checkpoint.endswith(".npz") else args.checkpoint
    out = args.out or (stem + (".safetensors" if args.format == "safetensors" else "-torch.npz"))
    try:
        if not os.path.exists(args.checkpoint):
            raise ValueError(f"no checkpoint at {args.checkpoint}: train one with dates-train, "
                             "or name one with --checkpoint")
        if os.path.abspath(out) == os.path.abspath(args.checkpoint):
            raise ValueError(f"--out {out} is the checkpoint itself; choose another file")
        check_output(out, args.force, kind=KINDS_BY_FORMAT[args.format])   # before the model is loaded
        model = load_model(args.checkpoint)
        written = export_weights(model, out, args.format, {"source": os.path.basename(args.checkpoint)},
                                 force=args.force)
    except (ValueError, OSError, CheckpointError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    count = sum(p.size for p in model.parameters())
    print(f"wrote {written}  ({count:,} parameters under PyTorch's names)\n" + how_to_load(written, args.format))
    return 0


def how_to_load(path, fmt) -> str:
    """Two lines on reading ``path`` in PyTorch that hold for every install: a pip-installed
    package has no examples/ folder, so the script that builds the matching model is named as
    part of the source repository, not as a command to run here."""
    model = ("the torch.nn model it fits is built by examples/compare_with_pytorch.py in the minigrad source "
             "repository (not part of an installed package)")
    if fmt == "safetensors":
        load = f"state_dict = safetensors.torch.load_file({path!r})"
        model += ", whose --exported option translates with the file"
    else:
        load = (f"state_dict = {{name: torch.from_numpy(array) for name, array in numpy.load({path!r}).items() "
                f"if name != 'metadata.json'}}")
    return f"in PyTorch: {load}\n{model}"
