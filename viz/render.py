"""Write a graphviz graph to disk: the .dot always, then SVG (or other formats) when Graphviz's
``dot`` program is installed; without it, one line says how to install it.

Every picture command behaves the same way without ``dot``: it writes the ``.dot`` source,
prints ``dot_missing_message`` on stderr and exits with ``EXIT_DOT_MISSING`` (3), so a
script can tell "install Graphviz" from a bad argument (2). In a notebook, a ``DotGraph``
(what ``draw_graph`` returns) shows its DOT source and the same hint instead of raising.
"""
import html
import os
import shutil
import sys

import graphviz

from transformer.files.output_file import check_outputs, write_output

INSTALL_HINT = ("install Graphviz (apt-get install graphviz | brew install graphviz | "
                "conda install -c conda-forge python-graphviz)")
EXIT_DOT_MISSING = 3        # the .dot was written, nothing was rendered


def have_dot() -> bool:
    return shutil.which("dot") is not None


def dot_missing_message(dot_path) -> str:
    return (f"Graphviz's `dot` program is not on PATH, so only {dot_path} was written; "
            f"{INSTALL_HINT}, or paste the .dot into an online Graphviz viewer")


def render(digraph, path_stem, formats=("svg",), quiet=False, force=True) -> list:
    """Write ``<path_stem>.dot``, then ``<path_stem>.<format>`` for each format if ``dot`` exists.

    Returns the paths written, the .dot first. Without Graphviz's ``dot`` the
    .dot is still written and one line says how to install it (on stderr unless
    ``quiet``); the message is also attached to the returned list as ``.message``.
    Every file is written atomically; one that exists is replaced only with ``force``, and only
    if it is of the same kind (``transformer.files.output_file``): all are checked before any is written.
    """
    path_stem = os.fspath(path_stem)
    dot_path = path_stem + ".dot"
    check_outputs([dot_path] + [f"{path_stem}.{fmt}" for fmt in formats], force)
    write_output(dot_path, digraph.source, force=True)
    written = RenderedPaths([dot_path])
    if not have_dot():
        return written.note(dot_missing_message(dot_path), quiet)
    for fmt in formats:
        try:
            data = digraph.pipe(format=fmt)
        except graphviz.ExecutableNotFound:
            return written.note(dot_missing_message(dot_path), quiet)
        except graphviz.CalledProcessError as error:
            raise RuntimeError(f"dot failed on {dot_path} (a bug in viz: please report it with that file):"
                               f" {error.stderr.decode(errors='replace') if error.stderr else error}") from None
        written.append(write_output(f"{path_stem}.{fmt}", data, force=True))
    return written


class RenderedPaths(list):
    """The list of written paths, plus ``message`` when something could not be rendered."""

    message = None

    def note(self, message, quiet):
        self.message = message
        if not quiet:
            print(message, file=sys.stderr)
        return self


class DotGraph(graphviz.Digraph):
    """A ``graphviz.Digraph`` that shows itself in a notebook with or without Graphviz's ``dot``.

    With ``dot``, Jupyter shows the rendered SVG as usual. Without it, graphviz's own display
    would raise ``ExecutableNotFound`` inside the cell; this one shows the DOT source and one
    line saying how to install Graphviz (the same hint the commands print).
    """

    def _repr_mimebundle_(self, include=None, exclude=None, **kwargs):
        if have_dot():
            return super()._repr_mimebundle_(include, exclude, **kwargs)
        hint = f"Graphviz's `dot` program is not on PATH, so this graph is shown as its DOT source; {INSTALL_HINT}"
        return {"text/plain": f"{hint}\n{self.source}",
                "text/html": f"<p>{html.escape(hint)}</p><pre>{html.escape(self.source)}</pre>"}
