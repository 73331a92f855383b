"""The explorer in headless Chromium, one browser per test (the training view's own tests share one
in test_explore_training_browser.py): the date page opens on the head whose weights changed most,
computed from the snapshots file apart from the page; on the served page a typed sentence changes
the prediction, the graph and every head's weights, and bad input shows its message; at 1280 x 800
the probe menu shows its options whole and a long message leaves the box its width; and a page on
another site cannot make the browser run a step on the server."""
import contextlib
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from explore_runs import dates_run, next_word_run, served
from test_explore_server_guards import SENTENCE, in_this_process
from test_explore_training_browser import grid_pixels, most_changed
from viz.explorer.server import Handler
from transformer.training.snapshots import SNAPSHOTS_NAME
from transformer.files.trained_model import load_model
from viz.browser import SKIP_REASON, open_page
from viz.explorer.build import write_explorer

pytestmark = [pytest.mark.skipif(SKIP_REASON is not None, reason=str(SKIP_REASON)), pytest.mark.slow]


def test_the_date_page_opens_on_the_head_that_changed_most(tmp_path):
    checkpoint = dates_run(tmp_path, steps=12, every=4)
    module, head = most_changed(tmp_path / SNAPSHOTS_NAME)
    page_path = tmp_path / "page.html"
    write_explorer(load_model(checkpoint), str(page_path), "1845-01-05", "decoder-self", 0, check=False,
                   snapshots=str(tmp_path / SNAPSHOTS_NAME))
    with open_page(page_path, width=1280, height=800) as opened:
        focused = opened.page.locator("#grid canvas.cell.focused")
        assert (focused.get_attribute("data-module"), int(focused.get_attribute("data-head"))) == (module, head)
        assert opened.page.locator("#grid canvas.cell").count() == 3 * 2
        opened.page.select_option("#att-module", label="cross, layer 0")
        assert opened.page.locator("#shifted").is_visible()      # a decoder row reads the shifted answer


@pytest.fixture(scope="module")
def next_word_checkpoint(tmp_path_factory):
    return next_word_run(tmp_path_factory.mktemp("next-word-run"), steps=12, every=4)


def test_the_served_page_redraws_a_typed_sentence(next_word_checkpoint):
    checkpoint = next_word_checkpoint
    with served("--checkpoint", checkpoint, "--ladder-steps", "2", "--no-check") as (_, url):
        with open_page(url, width=1280, height=800) as opened:
            page = opened.page
            assert page.locator("#ask").is_visible()
            page.select_option("#source", "input")
            before = {"prediction": page.inner_text("#prediction"), "grid": grid_pixels(page)}
            page.fill("#ask-text", "ida went to the butcher and bought a")
            page.click("#ask-run")
            page.wait_for_selector("body[data-loads='1']", state="attached", timeout=60000)
            after = {"prediction": page.inner_text("#prediction"), "grid": grid_pixels(page)}
            assert page.inner_text("#title").endswith("on ida went to the butcher and bought a")
            assert after["prediction"] != before["prediction"]
            assert all(after["grid"][k] != before["grid"][k] for k in before["grid"])
            assert page.locator("g.node.tensor").count() > 20                 # the graph is drawn again
            page.fill("#ask-text", "once upon a time")
            page.click("#ask-run")
            page.wait_for_selector("#ask-status[data-error=true]", state="attached", timeout=60000)
            assert "'once' is not a word of the language" in page.inner_text("#ask-status")
            assert page.inner_text("#prediction") == after["prediction"]      # the last good input stays
            assert opened.errors == [] or all("400" in e for e in opened.errors)


# the width the probe menu needs to show its longest option whole: the same menu sized by its options
NEEDED_WIDTH = """() => {
  const menu = document.getElementById('source'), copy = menu.cloneNode(true);
  copy.removeAttribute('id');
  copy.style.cssText = 'position: absolute; left: -10000px; width: auto; min-width: 0; max-width: none; flex: none';
  menu.parentNode.appendChild(copy);
  const needed = copy.getBoundingClientRect().width;
  copy.remove();
  return needed;
}"""


def width(page, selector):
    return page.locator(selector).bounding_box()["width"]


def test_at_1280_by_800_the_probe_menu_and_the_box_keep_their_text(next_word_checkpoint):
    with served("--checkpoint", next_word_checkpoint, "--ladder-steps", "0", "--no-check") as (_, url):
        with open_page(url, width=1280, height=800) as opened:
            page = opened.page
            assert page.locator("#source option").count() > 1                    # the probes are there
            assert width(page, "#source") >= page.evaluate(NEEDED_WIDTH)
            box = width(page, "#ask-text")
            page.fill("#ask-text", "once upon a time")
            page.click("#ask-run")
            page.wait_for_selector("#ask-status[data-error=true]", state="attached", timeout=60000)
            assert len(page.inner_text("#ask-status")) > 100                     # a long message ...
            assert width(page, "#ask-text") == box                               # ... beside an unchanged box
            status = page.locator("#ask-status").bounding_box()
            assert status["x"] + status["width"] <= 1280                         # wrapped, not cut at the edge


class Recording(Handler):
    """The server's handler, noting each request's (method, Origin, media type) as it arrives."""
    seen = []

    def parse_request(self):
        parsed = super().parse_request()
        if parsed:
            self.seen.append((self.command, self.headers.get("Origin"), self.headers.get_content_type()))
        return parsed


ATTACK = """<!DOCTYPE html><html><body>
<iframe name="sink"></iframe>
<form id="forged" method="post" action="{target}" enctype="text/plain" target="sink">
  <input name='{{"text": "{sentence}", "x": "' value='"}}'></form>
<script>
const target = "{target}", body = JSON.stringify({{text: "{sentence}"}});
const sandboxed = new Promise(resolve => {{
  window.addEventListener("message", resolve);
  const frame = document.createElement("iframe");
  frame.sandbox = "allow-scripts";                   // its requests say Origin: null
  frame.srcdoc = "<script>fetch('" + target + "', {{method: 'POST', mode: 'no-cors', " +
                 "headers: {{'Content-Type': 'text/plain'}}, body: '" + body + "'}})" +
                 ".finally(() => parent.postMessage('done', '*'))</" + "script>";
  document.body.appendChild(frame);
}});
const form = new Promise(resolve => {{
  document.querySelector("iframe[name=sink]").addEventListener("load", resolve);
  document.getElementById("forged").submit();
}});
Promise.allSettled([
  fetch(target, {{method: "POST", mode: "no-cors", headers: {{"Content-Type": "text/plain"}}, body: body}}),
  fetch(target, {{method: "POST", mode: "no-cors", body: new URLSearchParams({{text: "{sentence}"}})}}),
  fetch(target, {{method: "POST", headers: {{"Content-Type": "application/json"}}, body: body}}),
  sandboxed, form,
]).then(results => {{ document.body.dataset.done = results.map(r => r.status).join(" "); }});
</script></body></html>"""


@contextlib.contextmanager
def page_elsewhere(html: str):
    """``html`` served at / of another port: another site's page, as far as the browser can tell."""
    class Page(BaseHTTPRequestHandler):
        def do_GET(self):
            body = html.encode("utf-8")
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Page)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_a_page_on_another_site_cannot_run_a_step():
    """Chromium on another origin's page sends what needs no permission (text/plain and form
    POSTs, a form's text/plain JSON, from itself and from a sandboxed frame as Origin: null) and
    asks a preflight for JSON; the server sees them all and runs none."""
    with in_this_process() as live:
        Recording.seen = []
        live.server.RequestHandlerClass = Recording
        with page_elsewhere(ATTACK.format(target=f"http://127.0.0.1:{live.port}/step", sentence=SENTENCE)) as elsewhere:
            with open_page(elsewhere + "/", width=800, height=600, ready="body[data-done]"):
                pass
        posts = [(origin, kind) for method, origin, kind in Recording.seen if method == "POST"]
        assert sorted(posts) == sorted([(elsewhere, "text/plain")] * 2 + [
            (elsewhere, "application/x-www-form-urlencoded"), ("null", "text/plain")]), Recording.seen
        preflights = [origin for method, origin, _ in Recording.seen if method == "OPTIONS"]
        assert preflights == [elsewhere]                                     # the JSON POST's, refused
        assert live.inputs == []
