"""Drive the system's Chromium headlessly with Playwright: the browser tests of the HTML pages viz
writes, and the README's screenshot of dates-explore (examples/make_readme_images.py).

Playwright cannot download its own browsers on every machine, so it is pointed at
Debian's ``chromium`` (``apt-get install chromium``), with a fresh profile and no
background network (``MINIGRAD_CHROMIUM=/path/to/chromium`` picks another binary).
``SKIP_REASON`` is None when a page can be opened.
"""
import contextlib
import os
import shutil
import tempfile

CHROMIUM = os.environ.get("MINIGRAD_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def _skip_reason():
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "Playwright for Python is not installed (pip install -e '.[test]')"
    if not os.path.exists(CHROMIUM):
        return "no Chromium browser installed (apt-get install chromium)"
    return None


SKIP_REASON = _skip_reason()


class OpenPage:
    """A page with the file at ``path`` loaded; ``errors`` collects console errors and uncaught exceptions."""

    def __init__(self, page):
        self.page, self.errors = page, []


@contextlib.contextmanager
def open_page(path, width=1400, height=860, ready="body[data-ready=true]"):
    """Yield an ``OpenPage`` for the local file ``path`` (or a served page's http:// URL), once the
    element ``ready`` exists."""
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as profile, sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            profile, executable_path=CHROMIUM, args=FLAGS, headless=True,
            viewport={"width": width, "height": height})
        try:
            page = context.new_page()
            opened = OpenPage(page)
            page.on("console", lambda message: opened.errors.append(message.text) if message.type == "error" else None)
            page.on("pageerror", lambda error: opened.errors.append(str(error)))
            page.goto(str(path) if str(path).startswith("http://") else "file://" + os.path.abspath(path))
            page.wait_for_selector(ready, state="attached", timeout=15000)
            yield opened
        finally:
            context.close()
