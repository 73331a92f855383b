"""What a reader reads on a picture, as plain data: the facts a committed picture is checked by.

A PNG cannot be compared with today's code by its pixels (fonts and antialiasing differ between
machines), but what a reader takes from it can: the texts it prints (titles, legends, tick labels,
numbers on it, a graph's labels and hover texts) and the ranges of its axes with the points drawn
in them. ``figure_facts`` reads them from a matplotlib figure, ``graph_facts`` from a Graphviz
graph's DOT source. ``docs/images/facts.json`` holds them for every committed picture, beside
the SHA-256 of the picture they were read from and what rounded the floats of the run drawn
(``tests/test_committed_pictures.py`` draws each picture again and compares).
"""
import hashlib
import html
import json
import re

import numpy as np

from transformer.files.output_file import atomic_output

SIGNIFICANT = 4             # axis limits and plotted points, as a reader could read them (and stable)


def rounded(value) -> float:
    return float(f"{float(value):.{SIGNIFICANT}g}")


def figure_facts(fig) -> list:
    """Per axes: its title, axis labels, limits, tick labels, legend, the texts and annotations
    drawn in it, and where each annotation points (so a test can see the points lie inside)."""
    fig.canvas.draw()               # tick labels and layout exist only once drawn
    facts = []
    if getattr(fig, "_suptitle", None) is not None:
        facts.append({"suptitle": fig._suptitle.get_text()})
    for ax in fig.axes:
        legend = ax.get_legend()
        facts.append({
            "title": ax.get_title(), "xlabel": ax.get_xlabel(), "ylabel": ax.get_ylabel(),
            "xlim": [rounded(v) for v in ax.get_xlim()], "ylim": [rounded(v) for v in ax.get_ylim()],
            "xticks": [t.get_text() for t in ax.get_xticklabels() if t.get_text()],
            "yticks": [t.get_text() for t in ax.get_yticklabels() if t.get_text()],
            "legend": [t.get_text() for t in legend.get_texts()] if legend else [],
            "texts": [t.get_text() for t in ax.texts if t.get_text()],
            "points": [[t.get_text(), [rounded(v) for v in t.xy]] for t in ax.texts if hasattr(t, "xy")],
            # each curve's length and ends, each scatter's dots: where the data lies
            "lines": [[len(line.get_xdata()), *[[rounded(v) for v in point] for point in line.get_xydata()[[0, -1]]]]
                      for line in ax.get_lines() if len(line.get_xdata())],
            "dots": [[[rounded(v) for v in point] for point in collection.get_offsets()]
                     for collection in ax.collections if len(collection.get_offsets())],
        })
    return facts


def points_outside(facts) -> list:
    """The named annotation points that lie outside their axes' limits: each (title, name, point)."""
    outside = []
    for ax in facts:
        for name, (x, y) in ax.get("points", []):
            (x0, x1), (y0, y1) = sorted(ax["xlim"]), sorted(ax["ylim"])
            if not (x0 <= x <= x1 and y0 <= y <= y1):
                outside.append((ax["title"], name, (x, y)))
    return outside


ATTRIBUTE = re.compile(r'\b(label|tooltip)=("(?:[^"\\]|\\.)*"|<)')


def graph_facts(source: str) -> list:
    """Every label and hover text of a DOT source, as the text shown (HTML tags and escapes removed)."""
    texts = []
    for found in ATTRIBUTE.finditer(source):
        if found.group(2) == "<":                       # an HTML-like label: up to its matching '>'
            depth, end = 1, found.end()
            while depth:
                depth += {"<": 1, ">": -1}.get(source[end], 0)
                end += 1
            text = re.sub(r"<[^>]*>", " ", source[found.end():end - 1])
        else:
            text = found.group(2)[1:-1].replace('\\"', '"').replace("\\n", "\n")
        text = " ".join(html.unescape(text).split())
        if text:
            texts.append(text)
    return texts


def array_facts(array, decimals=2) -> list:
    """A small array a picture shows as numbers a reader can read, rounded to what is readable."""
    return np.round(np.asarray(array, dtype=np.float64), decimals).tolist()


def file_sha256(path) -> str:
    with open(path, "rb") as file:
        return hashlib.sha256(file.read()).hexdigest()


def read_facts(path) -> dict:
    with open(path, encoding="utf-8") as file:
        return json.load(file)


def write_facts(path, facts: dict) -> None:
    """Atomically: a reader never sees half a file."""
    with atomic_output(path) as temporary:
        with open(temporary, "w", encoding="utf-8") as file:
            json.dump(facts, file, indent=1, ensure_ascii=False, sort_keys=True)
            file.write("\n")
