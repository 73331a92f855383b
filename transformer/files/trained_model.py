"""The trained model in a checkpoint, checked before it is built, for the commands that use one."""
from transformer.files.checkpoint import CheckpointError, load_checkpoint
from transformer.models import build_model
from transformer.models.config import model_config_from_dict


def check_task(path, config, task: str):
    """CheckpointError in one line when the checkpoint's model was trained on another task."""
    trained_on = getattr(config, "task", "dates")
    if trained_on != task:
        command = {"dates": "dates-train", "next-word": "next-word-train"}[trained_on]
        raise CheckpointError(f"checkpoint {path} holds a {trained_on} model (written by {command}); "
                              f"this command needs a {task} model")


def load_model(path: str, task: str = "dates"):
    """The trained model in a checkpoint, ready for decoding (checked before it is built): a
    ``Transformer`` or a ``DecoderOnlyTransformer``, as its config's ``architecture`` says,
    trained on ``task`` ("dates", or "next-word")."""
    model_state, _, meta = load_checkpoint(path)
    try:
        config = model_config_from_dict(meta["model_config"])
        check_task(path, config, task)
        model = build_model(config)
        model.load_state_dict(model_state)
    except (KeyError, ValueError, TypeError) as error:
        raise CheckpointError(f"checkpoint {path} does not fit the model it describes ({error})") from None
    return model.eval()
