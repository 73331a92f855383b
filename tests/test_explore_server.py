"""The explorer's local server (``--serve``), spoken to over HTTP without a browser: it answers
127.0.0.1 / localhost only and its own page's requests only, runs a typed input on the checkpoint,
answers bad input with 400 and one line, serves requests at once, and ends on Ctrl-C or SIGTERM in
one line with exit 130. (``test_explore_server_guards.py`` tries the refusals in this process,
where it can count the steps the engine ran.)"""
import http.client
import json
import signal
import socket
import threading

import pytest

from explore_runs import dates_run, next_word_run, served
from processes import alive, wait_until_gone
from test_explore_server_guards import REFUSED

pytestmark = pytest.mark.slow
SENTENCE = "ann is at the mill and lea is at the fort . lea is at the"


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return next_word_run(tmp_path_factory.mktemp("next-word-run"), steps=6, every=3)


@pytest.fixture(scope="module")
def server(checkpoint):
    with served("--checkpoint", checkpoint, "--ladder-steps", "2", "--no-check") as (process, url):
        yield process, url


def request(url, method="GET", path="/", body=None, host=None, headers=None):
    """(status, parsed JSON or the page's text) of one request to the server at ``url``; a POST
    says its body is JSON, as the page does, unless ``headers`` has a Content-Type (None: none)."""
    port = int(url.rstrip("/").rsplit(":", 1)[1])
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        connection.putrequest(method, path, skip_host=True)
        connection.putheader("Host", f"127.0.0.1:{port}" if host is None else host)
        headers = {**({"Content-Type": "application/json"} if method == "POST" else {}), **(headers or {})}
        for name, value in headers.items():
            if value is not None:
                connection.putheader(name, value)
        data = body.encode("utf-8") if isinstance(body, str) else body
        if data is not None:
            connection.putheader("Content-Length", str(len(data)))
        connection.endheaders(data)
        response = connection.getresponse()
        payload = response.read().decode("utf-8")
        kind = response.getheader("Content-Type", "")
        return response.status, json.loads(payload) if kind.startswith("application/json") else payload
    finally:
        connection.close()


def test_it_binds_the_loopback_address_only(server):
    _, url = server
    assert url.startswith("http://127.0.0.1:")


@pytest.mark.parametrize("host", ["evil.example:{port}", "127.0.0.1", "localhost:1", "192.168.1.2:{port}", ""])
def test_a_foreign_host_header_is_refused(server, host):
    _, url = server
    port = url.rstrip("/").rsplit(":", 1)[1]
    status, answer = request(url, host=host.format(port=port))
    assert status == 403 and "127.0.0.1 and localhost only" in answer["error"]
    status, answer = request(url, "POST", "/step", json.dumps({"text": SENTENCE}), host=host.format(port=port))
    assert status == 403


@pytest.mark.parametrize("host", ["127.0.0.1:{port}", "localhost:{port}"])
def test_the_page_is_served_to_a_local_host(server, host):
    _, url = server
    port = url.rstrip("/").rsplit(":", 1)[1]
    status, page = request(url, host=host.format(port=port))
    assert status == 200 and '"live":{"endpoint":"/step"' in page


@pytest.mark.parametrize("path", ["/../../etc/passwd", "/model.npz", "/explorer.js", "/step?file=model.npz"])
def test_no_path_names_a_file(server, path):
    _, url = server
    assert request(url, path=path)[0] == 404


def test_a_typed_sentence_runs_on_the_checkpoint(server, checkpoint):
    from transformer.files.trained_model import load_model
    from viz.explorer.subject import SentenceSubject
    _, url = server
    status, data = request(url, "POST", "/step", json.dumps({"text": SENTENCE}))
    assert status == 200
    assert data["input"] == {"kind": "sentence", "text": SENTENCE}
    assert data["step"]["module"] == "decoder.layers.1.self_attn" and "check" not in data
    assert [m["module"] for m in data["attention"]] == ["decoder.layers.0.self_attn", "decoder.layers.1.self_attn"]
    assert data["attention"][0]["queries"] == ["<bos>"] + SENTENCE.split()
    expected = SentenceSubject(SENTENCE.split()).prediction(load_model(checkpoint, task="next-word"))
    assert data["prediction"] == expected                      # the checkpoint's own next word
    assert [r["name"] for r in data["ladder"]["rungs"]] == [r.name for r in __import__(
        "transformer.ladder.rungs", fromlist=["RUNGS"]).RUNGS]
    status, checked = request(url, "POST", "/step", json.dumps({"text": SENTENCE, "check": True}))
    assert status == 200 and checked["check"] and all(c["ok"] for c in checked["check"].values())


@pytest.mark.parametrize("body, message", [
    ('{"text": "once upon a"}', "'once' is not a word of the language"),
    ('{"text": "' + "ann " * 2500 + '"}', "at most 4,096"),
    ('{"text": "' + "ann " * 60 + '"}', "at most 200"),
    ('{"text": "' + "ann " * 40 + '"}', "this model reads at most 31"),
    ('{"text": "ann is at the', "is not JSON"),
    ("[1, 2]", "needs a text"),
    ('{"text": 3}', "needs a text"),
    ('{"text": "   "}', "type a sentence of the language"),
    (b"\xff\xfe", "is not JSON"),
    ("[" * 2000 + "]" * 2000, "nested too deeply"),              # 4,000 bytes: deeper than Python's decoder
])
def test_bad_input_gets_400_and_one_line(server, body, message):
    _, url = server
    status, answer = request(url, "POST", "/step", body)
    assert status == 400 and message in answer["error"] and "\n" not in answer["error"]


def test_a_request_without_a_length_gets_400(server):
    _, url = server
    assert request(url, "POST", "/step")[0] == 400


@pytest.mark.parametrize("variant", REFUSED)
def test_a_post_the_page_would_not_send_is_refused(server, variant):
    """What a page on another site can make a browser send: refused before the body is read."""
    _, url = server
    headers, status = REFUSED[variant]
    headers = {"Content-Type": None, **headers}
    answer = request(url, "POST", "/step", json.dumps({"text": SENTENCE}), headers=headers)
    assert answer[0] == status and "prediction" not in answer[1], answer


def test_requests_are_served_at_once(server):
    """A connection that sends nothing does not hold up the others (each has its own thread)."""
    _, url = server
    port = int(url.rstrip("/").rsplit(":", 1)[1])
    idle = socket.create_connection(("127.0.0.1", port))
    try:
        results = []
        threads = [threading.Thread(target=lambda: results.append(
            request(url, "POST", "/step", json.dumps({"text": SENTENCE}))[0])) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
        assert results == [200] * 4
    finally:
        idle.close()


@pytest.mark.parametrize("signal_name", ["SIGINT", "SIGTERM"])
def test_ctrl_c_or_sigterm_ends_it_in_one_line(checkpoint, signal_name):
    with served("--checkpoint", checkpoint, "--ladder-steps", "0", "--no-check") as (process, url):
        assert request(url)[0] == 200
        assert request(url, "POST", "/step", "[" * 2000 + "]" * 2000)[0] == 400     # no traceback either
        process.send_signal(getattr(signal, signal_name))
        assert process.wait(timeout=60) == 130
        err = process.stderr.read()
        assert err.strip().splitlines()[-1] == "interrupted" and "Traceback" not in err, err
        port = int(url.rstrip("/").rsplit(":", 1)[1])
        with pytest.raises(OSError):                      # nothing left listening
            socket.create_connection(("127.0.0.1", port), timeout=5).close()


def test_dates_explore_serves_a_typed_date(tmp_path):
    checkpoint = dates_run(tmp_path, steps=4, every=2)
    with served("--checkpoint", checkpoint, "--no-check", script="dates_commands:explore") as (_, url):
        status, data = request(url, "POST", "/step", json.dumps({"text": "2001-09-11"}))
        assert status == 200 and data["input"] == {"kind": "date", "text": "2001-09-11"}
        assert data["attention"][0]["queries"][:3] == ["<sos>", "2", "0"] or data["attention"][0]["keys"][:3] == \
            ["<sos>", "2", "0"]
        status, answer = request(url, "POST", "/step", json.dumps({"text": "2001-13-45"}))
        assert status == 400 and "\n" not in answer["error"]


def test_a_killed_caller_takes_its_server_along(checkpoint, tmp_path):
    """kill -9 of the process that started the server (a test, examples/benchmark_explorer.py):
    none of its code runs, and the server ends all the same (the kernel kills it with its parent)."""
    import os
    import subprocess
    import sys

    script = ("import sys, time; from viz.served import served; "
              f"cm = served('--checkpoint', {checkpoint!r}, '--ladder-steps', '0', '--no-check'); "
              "process, url = cm.__enter__(); print(process.pid, flush=True); time.sleep(600)")
    caller = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, cwd=tmp_path,
                              env=dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [
                                  os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                  os.environ.get("PYTHONPATH")]))))
    server_pid = None
    try:
        server_pid = int(caller.stdout.readline())
        os.kill(server_pid, 0)                                       # serving
        caller.kill()
        caller.wait(timeout=30)
        assert wait_until_gone([server_pid], 30) == [], "the server outlived the process that started it"
    finally:
        caller.kill()
        caller.wait(timeout=30)
        caller.stdout.close()
        if server_pid is not None and alive(server_pid):                 # the failure: leave nothing behind
            os.kill(server_pid, 9)
