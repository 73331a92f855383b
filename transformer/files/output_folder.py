"""Create the folder an output goes to, or say in one line why it cannot be made.

``os.makedirs`` alone says ``[Errno 17] File exists: '/etc/passwd'`` for ``--out /etc/passwd/x``;
``make_output_folder`` names the file in the way and the option to change. The viz commands
and ``dates-export`` use it (``dates-train``'s run folder has its own checks in ``run_dir.py``).
"""
import os


def make_output_folder(folder, option="--out"):
    """Create ``folder`` and its parents; ValueError (one line) if it cannot be. "" is the current folder."""
    folder = os.fspath(folder)
    if not folder:
        return
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as error:
        blocking = folder
        while blocking and not os.path.exists(blocking):
            parent = os.path.dirname(blocking.rstrip(os.sep))
            blocking = parent if parent != blocking else ""
        reason = (f"{blocking} is a file, not a folder" if blocking and not os.path.isdir(blocking)
                  else error.strerror or str(error))
        raise ValueError(f"cannot write the output under {folder}: {reason}; choose another {option}") from None
