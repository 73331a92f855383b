"""The options every picture command shares: the date, and a checkpoint or a fresh model's shape.

The choosing itself (checkpoint, newest run or fresh seeded model) is ``viz.inputs.choose_model``;
here are its command-line options and the size limit a fresh model meets first.
"""
from transformer.commands.console import path_argument
from transformer.commands.limits import check_model_size
from viz.inputs import DEFAULT_CHECKPOINT, ChosenModel, choose_model, fresh_config


def add_model_arguments(parser, default_date="1845-01-05", date_option=True):
    if date_option:
        parser.add_argument("--date", default=default_date, help="an ISO date YYYY-MM-DD (default: %(default)s)")
    parser.add_argument("--checkpoint", metavar="PATH", type=path_argument,
                        help=f"a trained checkpoint (default: the newest finished run's, {DEFAULT_CHECKPOINT} or "
                             "runs/dates-N/model.npz, when there is one)")
    parser.add_argument("--untrained", action="store_true",
                        help="draw a fresh, untrained model even when a checkpoint exists")
    parser.add_argument("--seed", type=int, default=None, help="seed of the fresh model (default: 0)")
    parser.add_argument("--d-model", type=int, default=None, help="width of the fresh model (default: 64)")
    parser.add_argument("--heads", type=int, default=None, help="heads of the fresh model (default: 4)")
    parser.add_argument("--layers", type=int, default=None, help="encoder and decoder layers of the fresh model")


def model_from_args(args, say=None) -> ChosenModel:
    """The model the options choose. ValueError in one line for a fresh shape beyond the limits
    (``--d-model`` / ``--layers`` too large), before anything is allocated."""
    sizes = (args.d_model, args.heads, args.layers)
    # a checkpoint brings its own shape; a size below 1 gets choose_model's own message
    if not args.checkpoint and all(size is None or size >= 1 for size in sizes):
        check_model_size(fresh_config(*sizes))
    return choose_model(args.checkpoint, args.untrained, args.seed, args.d_model, args.heads, args.layers, say=say)
