"""Write a graphviz graph to disk: the .dot always, then SVG (or other formats) when Graphviz's
``dot`` program is installed; without it, one line says how to install it."""
import os
import shutil
import sys

import graphviz

INSTALL_HINT = ("install Graphviz (apt-get install graphviz | brew install graphviz | "
                "conda install -c conda-forge python-graphviz)")


def dot_missing_message(dot_path) -> str:
    return (f"Graphviz's `dot` program is not on PATH, so only {dot_path} was written; "
            f"{INSTALL_HINT}, or paste the .dot into an online Graphviz viewer")


def render(digraph, path_stem, formats=("svg",), quiet=False) -> list:
    """Write ``<path_stem>.dot``, then ``<path_stem>.<format>`` for each format if ``dot`` exists.

    Returns the paths written, the .dot first. Without Graphviz's ``dot`` the
    .dot is still written and one line says how to install it (on stderr unless
    ``quiet``); the message is also attached to the returned list as ``.message``.
    """
    path_stem = os.fspath(path_stem)
    directory = os.path.dirname(path_stem)
    if directory:
        os.makedirs(directory, exist_ok=True)
    dot_path = path_stem + ".dot"
    with open(dot_path, "w", encoding="utf-8") as f:
        f.write(digraph.source)
    written = RenderedPaths([dot_path])
    if shutil.which("dot") is None:
        return written.note(dot_missing_message(dot_path), quiet)
    for fmt in formats:
        try:
            data = digraph.pipe(format=fmt)
        except graphviz.ExecutableNotFound:
            return written.note(dot_missing_message(dot_path), quiet)
        except graphviz.CalledProcessError as error:
            raise RuntimeError(f"dot failed on {dot_path} (a bug in viz: please report it with that file):"
                               f" {error.stderr.decode(errors='replace') if error.stderr else error}") from None
        out_path = f"{path_stem}.{fmt}"
        with open(out_path, "wb") as f:
            f.write(data)
        written.append(out_path)
    return written


class RenderedPaths(list):
    """The list of written paths, plus ``message`` when something could not be rendered."""

    message = None

    def note(self, message, quiet):
        self.message = message
        if not quiet:
            print(message, file=sys.stderr)
        return self
