"""``--serve``: the explorer's page on a local web server, where the learner types their own input.

    GET  /          the page, built as the written one is, with a box to type a date or sentence
    POST /step      {"text": "...", "check": false} -> the page's data for that input (200),
                    or {"error": "one line"} (400), which the page shows under the box

The standard library's ``ThreadingHTTPServer``: nothing to install, and a learner's one or
two tabs are all it serves. Its rules, those of the local servers learners already run
(TensorBoard, Jupyter):

- it binds 127.0.0.1 only, so nothing off the machine reaches it;
- it answers only requests whose Host header is 127.0.0.1:PORT or localhost:PORT (403
  otherwise): a web page elsewhere cannot reach it through a DNS name that points here;
- a POST runs only if it is what the page itself sends: an ``Origin`` (when there is one: a
  browser always sends it on a POST) that is the page's own, else 403, and ``Content-Type:
  application/json``, else 415. A page on another site can still send a browser's "simple"
  cross-site POST (text/plain or a form, ``Origin: http://evil.example`` or ``null``), which
  needs no permission, but it is refused before anything is read or run; a cross-site JSON POST
  needs a CORS preflight, which is never granted (OPTIONS gets 403);
- a request never names a file: the page is built in memory, the one path is /step;
- every request body is bounded (``MAX_BODY``), its line, headers and body must all arrive within
  ``REQUEST_DEADLINE`` (a client trickling a byte at a time is cut off there), and anything that
  is not a JSON object with a short text gets 400 and one line;
- a client that leaves before its answer (reset, closed) costs nothing but its thread: no
  traceback on the terminal;
- each request runs on its own thread, so several tabs are served at once; the engine's
  work (the model's forward and backward, which set attributes on the modules) takes one
  lock, one input at a time;
- Ctrl-C or SIGTERM stops it: the command prints one line and exits with 130.
"""
import io
import json
import math
import sys
import threading
import time
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from .subject import InputError

HOST = "127.0.0.1"
MAX_BODY = 4096            # bytes: a date or a sentence with room to spare
REQUEST_DEADLINE = 10      # seconds a connection may take to send a whole request (line, headers, body)
WRITE_TIMEOUT = 10         # seconds one send of an answer may wait for a client that stopped reading


class Explorer:
    """The engine side: ``answer(text, check)`` -> the page's data for that input, one at a time."""

    def __init__(self, page: str, run_step):
        self.page = page.encode("utf-8")
        self._run_step = run_step          # (text, check) -> dict; InputError for bad input
        self._lock = threading.Lock()

    def answer(self, text, check: bool) -> dict:
        with self._lock:
            return self._run_step(text, check)


class _ReadingBefore(io.RawIOBase):
    """A connection's reading side that gives up at ``deadline`` (time.monotonic()): each receive
    waits only for the time left, so a client that trickles a byte at a time cannot hold its
    thread past the deadline, as it could with a timeout for each read."""

    def __init__(self, connection, write_timeout):
        self._connection, self._write_timeout = connection, write_timeout
        self.deadline = math.inf

    def readable(self):
        return True

    def readinto(self, buffer):
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the request did not arrive in time")
        self._connection.settimeout(left)
        try:
            return self._connection.recv_into(buffer)
        finally:
            self._connection.settimeout(self._write_timeout)      # the answer's sends: their own timeout


class Handler(BaseHTTPRequestHandler):
    server_version = "minigrad-explorer"
    timeout = WRITE_TIMEOUT

    def log_message(self, format, *args):          # a quiet terminal: the URL and Ctrl-C only
        pass

    def setup(self):
        super().setup()
        self.rfile.close()                             # the plain reader setup() made, for one with a deadline
        self._reading = _ReadingBefore(self.connection, self.timeout)
        self.rfile = io.BufferedReader(self._reading)

    def handle_one_request(self):
        # the deadline counts from the wait for the request line: an idle kept-alive connection ends
        # there too (http.server's handler closes the connection on the TimeoutError, quietly)
        self._reading.deadline = time.monotonic() + self.server.request_deadline
        super().handle_one_request()

    def _host_is_local(self) -> bool:
        port = self.server.server_address[1]
        return self.headers.get("Host", "") in (f"{HOST}:{port}", f"localhost:{port}")

    def _send(self, status, body: bytes, content_type: str):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.end_headers()
        self.wfile.write(body)

    def _json(self, status, value):
        self._send(status, json.dumps(value, separators=(",", ":"), allow_nan=False).encode("utf-8"),
                   "application/json")

    def _error(self, status, message):
        self._json(status, {"error": message})

    def do_GET(self):
        if not self._host_is_local():
            return self._error(HTTPStatus.FORBIDDEN, "this server answers 127.0.0.1 and localhost only")
        if self.path == "/favicon.ico":               # what every browser asks for: none, and no error
            self.send_response(HTTPStatus.NO_CONTENT)
            self.end_headers()
            return None
        if self.path not in ("/", "/index.html"):
            return self._error(HTTPStatus.NOT_FOUND, "the page is at /")
        self._send(HTTPStatus.OK, self.server.explorer.page, "text/html; charset=utf-8")

    def do_OPTIONS(self):
        """A CORS preflight: never granted, so another site's page cannot send JSON here."""
        self.close_connection = True
        self._error(HTTPStatus.FORBIDDEN, "this server answers its own page only")

    def do_POST(self):
        refusal = self._refusal()
        if refusal is not None:
            self.close_connection = True               # its body is not read: it must not be taken for a request
            return self._error(*refusal)
        try:
            request = self._read_request()
            data = self.server.explorer.answer(request["text"], request["check"])
        except InputError as error:
            return self._error(HTTPStatus.BAD_REQUEST, str(error))
        self._json(HTTPStatus.OK, data)

    def _refusal(self):
        """(status, one line) for a POST that the page itself would not send, checked before its
        body is read; None for one to answer."""
        if not self._host_is_local():
            return HTTPStatus.FORBIDDEN, "this server answers 127.0.0.1 and localhost only"
        if self.path != "/step":
            return HTTPStatus.NOT_FOUND, "inputs go to /step"
        origin = self.headers.get("Origin")             # absent: not a browser (curl, a script)
        if origin is not None and origin != f"http://{self.headers['Host']}":
            return HTTPStatus.FORBIDDEN, f"this server answers its own page only, not a page of {origin}"
        if self.headers.get_content_type() != "application/json":
            return (HTTPStatus.UNSUPPORTED_MEDIA_TYPE,
                    "send the input as Content-Type: application/json, {\"text\": \"...\"}")
        return None

    def _read_request(self) -> dict:
        """The body as {"text": str, "check": bool}; InputError in one line otherwise."""
        try:
            length = int(self.headers.get("Content-Length", ""))
        except ValueError:
            raise InputError("the request has no Content-Length") from None
        if not 0 <= length <= MAX_BODY:
            self.close_connection = True               # the unread body must not be taken for a request
            raise InputError(f"the request is {length:,} bytes; at most {MAX_BODY:,} (a date or one sentence)")
        body = self.rfile.read(length)
        try:
            request = json.loads(body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            raise InputError("the request is not JSON: send {\"text\": \"...\"}") from None
        except RecursionError:                        # [[[[... : deeper than Python's decoder goes
            raise InputError("the request is nested too deeply: send {\"text\": \"...\"}") from None
        if not isinstance(request, dict) or not isinstance(request.get("text"), str):
            raise InputError("the request needs a text: {\"text\": \"...\"}")
        return {"text": request["text"], "check": request.get("check") is True}


class ExplorerServer(ThreadingHTTPServer):
    daemon_threads = True              # a tab left open does not keep the command alive after Ctrl-C
    allow_reuse_address = True

    def __init__(self, explorer: Explorer, port: int = 0, request_deadline: float = REQUEST_DEADLINE):
        self.explorer = explorer
        self.request_deadline = request_deadline
        super().__init__((HOST, port), Handler)

    def handle_error(self, request, client_address):
        """A request that failed on the server's side: socketserver prints a traceback. A client
        that left (reset, closed, timed out) needs nothing said; anything else is one line."""
        error = sys.exc_info()[1]
        if isinstance(error, (ConnectionError, TimeoutError)):
            return
        print(f"error: a request from {client_address[0]} failed: {type(error).__name__}: {error}",
              file=sys.stderr, flush=True)

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.server_address[1]}/"


def serve(explorer: Explorer, port: int, say=print) -> None:
    """Serve until Ctrl-C (KeyboardInterrupt, left to the caller's one line; the commands turn
    SIGTERM into one too), then close the socket."""
    server = ExplorerServer(explorer, port)
    try:
        say(f"serving the explorer at {server.url}  (open it in a browser; Ctrl-C stops the server)")
        server.serve_forever(poll_interval=0.2)
    finally:
        server.server_close()
