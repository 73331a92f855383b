"""Assemble the explorer's one self-contained HTML page: data, styles and scripts inline.

The page lays the graph out itself, in the browser, with the vendored dagre
(``viz/vendor``), so it needs neither Graphviz's ``dot`` nor a network.
"""
import html
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
VENDOR = os.path.join(os.path.dirname(HERE), "vendor")


def _read(path) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()


def _inline_script(code: str) -> str:
    """Script text safe inside <script>: no '</' that would end the element, no source-map
    comment (which would make a browser's developer tools look for a file on the network)."""
    lines = [line for line in code.splitlines() if not line.startswith("//# sourceMappingURL=")]
    return "\n".join(lines).replace("</", "<\\/")


def page_html(data: dict, title: str) -> str:
    """The page for ``data`` (what ``explorer.build_page_data`` returns)."""
    payload = json.dumps(data, separators=(",", ":"), allow_nan=False).replace("</", "<\\/")
    template = _read(os.path.join(HERE, "page.html"))
    return (template.replace("{{title}}", html.escape(title))
            .replace("{{style}}", _read(os.path.join(HERE, "explorer.css")))
            .replace("{{data}}", payload)
            .replace("{{dagre}}", _inline_script(_read(os.path.join(VENDOR, "dagre.min.js"))))
            .replace("{{script}}", _inline_script(_read(os.path.join(HERE, "explorer.js")))))
