"""The explorer's server against what is not its own page, in this process with an engine that
counts its inputs (what is refused must not cost a step): another site's "simple" POSTs, a JSON
body nested too deep for Python's decoder, a client that leaves before its answer, and one that
trickles its request a byte at a time. None of them leaves a traceback on the server's stderr."""
import contextlib
import http.client
import json
import select
import socket
import struct
import threading
import time

import pytest

from viz.explorer.server import Explorer, ExplorerServer

SENTENCE = "ann is at the mill"
EVIL = "http://evil.example"

# (headers of a POST of a valid input, the status it gets): what a page elsewhere can send without
# the server's permission (text/plain, a form, no type at all, from any origin or a sandboxed
# frame's "null"), and JSON from another origin
REFUSED = {
    "text/plain": ({"Content-Type": "text/plain"}, 415),
    "form-encoded": ({"Content-Type": "application/x-www-form-urlencoded"}, 415),
    "no Content-Type": ({}, 415),
    "text/plain from evil": ({"Content-Type": "text/plain", "Origin": EVIL}, 403),
    "JSON from evil": ({"Content-Type": "application/json", "Origin": EVIL}, 403),
    "JSON from a sandboxed frame": ({"Content-Type": "application/json", "Origin": "null"}, 403),
    "JSON from another port": ({"Content-Type": "application/json", "Origin": "http://127.0.0.1:1"}, 403),
}


class Served:
    """An ``ExplorerServer`` on a thread of this process; ``inputs`` are those its engine ran."""

    def __init__(self, request_deadline):
        self.inputs = []
        self.engine_may_answer = threading.Event()
        self.engine_may_answer.set()
        self.server = ExplorerServer(Explorer("<p>the explorer</p>", self._step), 0, request_deadline)
        self.server.daemon_threads = False      # server_close() then waits for every request's thread
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05})

    def _step(self, text, check):
        self.inputs.append(text)
        assert self.engine_may_answer.wait(timeout=60)
        return {"input": {"text": text}}

    def close(self):
        """Stop, once every request's thread has ended (what it printed is then all printed)."""
        self.engine_may_answer.set()
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=60)


@contextlib.contextmanager
def in_this_process(request_deadline=10):
    live = Served(request_deadline)
    live.thread.start()
    try:
        yield live
    finally:
        live.close()


def post(port, body, headers):
    """(status, the answer's JSON) of one POST /step."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        connection.request("POST", "/step", body=body, headers=headers)
        response = connection.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


def a_valid_request(port, body=json.dumps({"text": SENTENCE}).encode()):
    return (f"POST /step HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode() + body


@pytest.mark.parametrize("variant", REFUSED)
def test_a_post_the_page_would_not_send_is_refused_before_any_step(variant, capfd):
    headers, status = REFUSED[variant]
    with in_this_process() as live:
        answer = post(live.port, json.dumps({"text": SENTENCE}), headers)
        assert answer[0] == status and "\n" not in answer[1]["error"], answer
        assert live.inputs == []
        # the page's own request (its Origin, JSON) and a script's (no Origin) still run
        own = {"Content-Type": "application/json", "Origin": f"http://127.0.0.1:{live.port}"}
        assert post(live.port, json.dumps({"text": "own page"}), own)[0] == 200
        assert post(live.port, json.dumps({"text": "a script"}), {"Content-Type": "application/json"})[0] == 200
        assert live.inputs == ["own page", "a script"]
    assert "Traceback" not in capfd.readouterr().err


def test_a_cors_preflight_is_not_granted():
    with in_this_process() as live:
        connection = http.client.HTTPConnection("127.0.0.1", live.port, timeout=60)
        connection.request("OPTIONS", "/step", headers={"Origin": EVIL, "Access-Control-Request-Method": "POST",
                                                        "Access-Control-Request-Headers": "content-type"})
        response = connection.getresponse()
        assert response.status == 403 and response.getheader("Access-Control-Allow-Origin") is None
        connection.close()


def test_json_nested_too_deep_gets_400_and_no_traceback(capfd):
    body = "[" * 2000 + "]" * 2000                     # 4,000 bytes: under the body's bound
    with in_this_process() as live:
        status, answer = post(live.port, body, {"Content-Type": "application/json"})
        assert status == 400 and "nested too deeply" in answer["error"]
        assert live.inputs == []
    assert "Traceback" not in capfd.readouterr().err


@pytest.mark.parametrize("leaving", ["reset", "closed"])
def test_a_client_that_leaves_before_its_answer_leaves_no_traceback(leaving, capfd):
    with in_this_process() as live:
        live.engine_may_answer.clear()
        client = socket.create_connection(("127.0.0.1", live.port), timeout=60)
        client.sendall(a_valid_request(live.port))
        deadline = time.monotonic() + 60
        while not live.inputs and time.monotonic() < deadline:       # the engine has it
            time.sleep(0.01)
        assert live.inputs == [SENTENCE]
        if leaving == "reset":                                         # RST, as a killed tab's socket
            client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        client.close()
        live.engine_may_answer.set()              # the answer now goes to a client that is not there
    err = capfd.readouterr().err                  # every request's thread has ended (close() waited)
    assert "Traceback" not in err and "Error" not in err, err


def test_a_request_trickled_a_byte_at_a_time_is_cut_off_at_the_deadline(capfd):
    """A timeout for each read would let this client hold its thread for as long as it trickles;
    the whole request has one deadline."""
    bound = 1.0
    with in_this_process(request_deadline=bound) as live:
        client = socket.create_connection(("127.0.0.1", live.port), timeout=60)
        started, closed_after = time.monotonic(), None
        endless = f"POST /step HTTP/1.1\r\nHost: 127.0.0.1:{live.port}\r\nX-Slow: ".encode() + b"a" * 600
        try:
            for byte in endless:                                     # one byte every 0.05 s: ~40 s at most
                readable, _, _ = select.select([client], [], [], 0.05)
                if readable and client.recv(1024) == b"":
                    closed_after = time.monotonic() - started
                    break
                client.send(bytes([byte]))
        except (BrokenPipeError, ConnectionResetError):
            closed_after = time.monotonic() - started
        finally:
            client.close()
        assert closed_after is not None, "the server kept reading the trickle"
        assert bound <= closed_after < bound + 20                     # the upper bound only for a busy machine
        assert live.inputs == []
        # a request sent at once on a new connection is answered as before
        assert post(live.port, json.dumps({"text": SENTENCE}), {"Content-Type": "application/json"})[0] == 200
    assert "Traceback" not in capfd.readouterr().err
