"""Write the frames of ``backward_animation`` as an animated GIF and a self-contained HTML slider.

Every frame is laid out by Graphviz's ``dot`` once, writing SVG and PNG together.
The GIF (Pillow) pads frames to the largest so all have one size, scaled down to at most
``MAX_GIF_HEIGHT`` px tall (an attention step is 2,464 px at 72 dpi); the HTML page
holds every SVG inline with its ids prefixed per frame, a slider, prev/next/play
buttons and a few lines of inline script: no server, no network, no external file.
"""
import html
import io
import json
import os
import re
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor

from transformer.files.output_file import atomic_output, check_outputs, write_output

from .render import RenderedPaths, dot_missing_message, have_dot

FRAME_MS, LAST_FRAME_MS = 1200, 3000
MAX_GIF_HEIGHT = 1000       # px: a page shows it whole; the HTML page keeps every frame at full size


def animation_paths(out_stem, formats=("gif", "html")) -> list:
    """The files ``write_animation`` writes: one per format, or the frames' .dot without Graphviz."""
    return [f"{os.fspath(out_stem)}.{fmt}" for fmt in (formats if have_dot() else ("dot",))]


def write_animation(frames, out_stem, formats=("gif", "html"), dpi=72, frame_ms=FRAME_MS, quiet=False,
                    force=True, max_height=MAX_GIF_HEIGHT) -> list:
    """Render every frame with dot once (SVG and PNG together) and write ``<out_stem>.gif``/``.html``.

    Returns the paths written. Without Graphviz's ``dot`` it writes ``<out_stem>.dot`` instead (every
    frame's graph, one after another: ``dot -Tsvg -O`` renders them) and, as ``render`` does, says
    how to install it (on stderr unless ``quiet``, and as the returned list's ``.message``).
    Each file is written atomically; one that exists is replaced only with ``force`` and only if
    it is of the same kind (``transformer.files.output_file``).
    """
    if not frames:
        raise ValueError("no frames: backward processed no op (is the root a leaf?)")
    unknown = set(formats) - {"gif", "html"}
    if unknown:
        raise ValueError(f"unknown format(s) {', '.join(sorted(unknown))}; choose gif and/or html")
    out_stem = os.fspath(out_stem)
    check_outputs(animation_paths(out_stem, formats), force)
    if not have_dot():
        return _write_frame_sources(frames, out_stem + ".dot", quiet)
    svgs, pngs = _render_all(frames, dpi, want_png="gif" in formats)
    written = RenderedPaths()
    if "gif" in formats:
        written.append(write_gif(pngs, out_stem + ".gif", frame_ms, max_height))
    if "html" in formats:
        written.append(write_html(svgs, [f.caption for f in frames], out_stem + ".html", frame_ms))
    return written


def _write_frame_sources(frames, dot_path, quiet):
    write_output(dot_path, "".join(f"// frame {frame.number}: {frame.caption}\n{frame.digraph.source}\n"
                                   for frame in frames), force=True)
    return RenderedPaths([dot_path]).note(dot_missing_message(dot_path), quiet)


def _render_all(frames, dpi, want_png):
    """(SVG texts, PNG bytes) per frame; one ``dot`` process per frame, as many at once as CPUs."""
    with tempfile.TemporaryDirectory() as tmp:
        with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:   # dot runs outside the GIL
            rendered = list(pool.map(lambda frame: _render_one(frame, dpi, want_png, tmp), frames))
    return [svg for svg, _ in rendered], [png for _, png in rendered]


def _render_one(frame, dpi, want_png, directory):
    stem = os.path.join(directory, f"frame{frame.number}")
    command = ["dot", f"-Gdpi={dpi}", "-Tsvg", "-o", stem + ".svg"] + (["-Tpng", "-o", stem + ".png"] * want_png)
    done = subprocess.run(command, input=frame.digraph.source.encode("utf-8"), capture_output=True)
    if done.returncode != 0:
        raise RuntimeError(f"dot failed on frame {frame.number} (a bug in viz: please report it): "
                           f"{done.stderr.decode(errors='replace').strip()}")
    with open(stem + ".svg", encoding="utf-8") as f:
        svg = f.read()
    if not want_png:
        return svg, None
    with open(stem + ".png", "rb") as f:
        return svg, f.read()


def write_gif(pngs, path, frame_ms=FRAME_MS, max_height=MAX_GIF_HEIGHT) -> str:
    """PNG frames -> one looping GIF; frames of different sizes are padded (white) to the largest,
    and all scaled by one factor when the largest is taller than ``max_height`` px."""
    from PIL import Image

    images = [Image.open(io.BytesIO(data)).convert("RGB") for data in pngs]
    width, height = max(i.width for i in images), max(i.height for i in images)
    scale = min(1.0, max_height / height)
    padded = []
    for image in images:
        canvas = Image.new("RGB", (width, height), "white")
        canvas.paste(image, ((width - image.width) // 2, 0))
        if scale < 1:
            canvas = canvas.resize((max(1, round(width * scale)), max(1, round(height * scale))), Image.LANCZOS)
        padded.append(canvas.quantize(colors=128, method=Image.Quantize.FASTOCTREE))  # 10x MEDIANCUT's speed
    durations = [frame_ms] * (len(padded) - 1) + [LAST_FRAME_MS]
    with atomic_output(path) as tmp:
        padded[0].save(tmp, save_all=True, append_images=padded[1:], duration=durations, loop=0,
                       optimize=False, disposal=1)
    return path


HTML_PAGE = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>{title}</title>
<style>
html, body {{ margin: 0; height: 100%; font-family: Helvetica, Arial, sans-serif; }}
body {{ display: flex; flex-direction: column; }}
header {{ padding: 0.5em 1em; border-bottom: 1px solid #dee2e6; background: #f8f9fa; }}
h2 {{ margin: 0 0 0.3em 0; font-size: 17px; }}
#frames {{ flex: 1; min-height: 0; overflow: hidden; }}
#frames.actual {{ overflow: auto; }}
.frame {{ display: none; width: 100%; height: 100%; }} .frame.shown {{ display: block; }}
#frames:not(.actual) .frame svg {{ width: 100%; height: 100%; }}
.legend span {{ padding: 1px 4px; margin-right: 6px; font-size: 13px; }}
#caption {{ font-size: 15px; margin: 0.3em 0; min-height: 1.3em; }}
input[type=range] {{ width: 50%; vertical-align: middle; }}
</style></head><body>
<header>
<h2>{title}</h2>
<div><button id="prev">&#9664;</button> <input type="range" id="step" min="1" max="{count}" value="1">
<button id="next">&#9654;</button> <button id="play">play</button> <span id="number"></span>
<label><input type="checkbox" id="actual"> actual size (scrolls to the op)</label></div>
<div id="caption"></div>
<div class="legend"><span style="background:#ff8787">the op being processed</span>
<span style="border:2px solid #c92a2a">its output: the gradient coming in</span>
<span style="border:2px solid #1c7ed6">inputs it sends a gradient to</span>
<span style="background:#ffd8a8">a tensor used more than once: ∇ = g1 + g2</span>
&nbsp;hover a box for its values; ← / → step</div>
</header>
<div id="frames">
{frames}
</div>
<script>
// One screen: the controls stay on top and each frame is fitted to the window below them, so the
// slider and the highlighted op are always in view ("actual size" scrolls the op into view instead).
var captions = {captions};
var slider = document.getElementById("step"), play = document.getElementById("play"), timer = null;
var frames = document.getElementById("frames");
function stop() {{ if (timer) {{ clearInterval(timer); timer = null; }} play.textContent = "play"; }}
function show(n) {{
  n = Math.max(1, Math.min(captions.length, n));
  slider.value = n;
  document.querySelectorAll(".frame").forEach(function (f, i) {{
    f.className = i + 1 == n ? "frame shown" : "frame";
  }});
  document.getElementById("caption").textContent = captions[n - 1];
  document.getElementById("number").textContent = n + " / " + captions.length;
  var current = document.querySelector('.frame.shown [fill="#ff8787"]');
  if (current && frames.classList.contains("actual"))
    current.scrollIntoView({{block: "center", inline: "center"}});
}}
slider.oninput = function () {{ stop(); show(+slider.value); }};
document.getElementById("prev").onclick = function () {{ stop(); show(+slider.value - 1); }};
document.getElementById("next").onclick = function () {{ stop(); show(+slider.value + 1); }};
document.getElementById("actual").onchange = function () {{
  frames.classList.toggle("actual", this.checked); show(+slider.value);
}};
document.addEventListener("keydown", function (event) {{
  if (event.key == "ArrowRight") {{ stop(); show(+slider.value + 1); }}
  if (event.key == "ArrowLeft") {{ stop(); show(+slider.value - 1); }}
}});
play.onclick = function () {{
  if (timer) {{ stop(); return; }}
  this.textContent = "pause";
  if (+slider.value == captions.length) show(1);
  timer = setInterval(function () {{
    show(+slider.value + 1);
    if (+slider.value == captions.length) stop();     // the last frame: the timer ends with the pass
  }}, {frame_ms});
}};
show(1);
document.body.dataset.ready = "true";
</script></body></html>
"""


def write_html(svgs, captions, path, frame_ms=FRAME_MS, title="The backward pass, one op at a time") -> str:
    """One page: every SVG frame inline (ids made unique per frame), a slider, prev/next/play."""
    blocks = [f'<div class="frame" id="frame{i + 1}">{_inline_svg(svg, f"f{i + 1}_")}</div>'
              for i, svg in enumerate(svgs)]
    page = HTML_PAGE.format(title=html.escape(title), count=len(svgs), frames="\n".join(blocks),
                            captions=json.dumps(captions).replace("</", "<\\/"), frame_ms=frame_ms)
    return write_output(path, page, force=True)


def _inline_svg(svg: str, prefix: str) -> str:
    """dot's SVG file -> an element for inline use: no XML prologue/doctype, ids prefixed, and the
    size in pt kept only for "actual size" (CSS fits it to the window; its viewBox keeps the shape)."""
    svg = svg[svg.index("<svg"):]
    return re.sub(r'\bid="', f'id="{prefix}', svg)
