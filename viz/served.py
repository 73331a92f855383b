"""An explorer's ``--serve`` in a subprocess, killed however its caller ends: the explorer's tests
and ``examples/benchmark_explorer.py`` start ``next-word-explore`` / ``dates-explore`` this way."""
import contextlib
import os
import queue
import subprocess
import sys
import threading

NEXT_WORD_EXPLORE = "dates_commands:next_word_explore"
DATES_EXPLORE = "dates_commands:explore"


def command(module_function, *args):
    """A console script's main run by this Python (no PATH needed), in a process that ends with
    this one however this one ends (``transformer/parallel/children.py``: kill -9 included)."""
    module, function = module_function.split(":")
    return [sys.executable, "-c", f"import sys; from transformer.parallel.children import die_with_parent; "
            f"die_with_parent({os.getpid()}); from {module} import {function} as m; sys.exit(m())", *args]


@contextlib.contextmanager
def served(*args, script=NEXT_WORD_EXPLORE, wait=180):
    """Start ``script --serve --port 0 args``; yield (process, url) once it prints its URL.
    The process is killed on the way out, whatever happened."""
    process = subprocess.Popen(command(script, "--serve", "--port", "0", *args), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    try:
        lines = queue.Queue()
        threading.Thread(target=lambda: [lines.put(line) for line in process.stdout] + [lines.put("")],
                         daemon=True).start()
        try:
            line = lines.get(timeout=wait)
        except queue.Empty:
            raise AssertionError(f"no URL from the server in {wait} s") from None
        assert line, f"the server ended: {process.wait(timeout=30)} {process.stderr.read()}"
        assert line.startswith("serving the explorer at http://127.0.0.1:"), line + process.stderr.read()
        yield process, line.split()[4]
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=30)
        for stream in (process.stdout, process.stderr):
            stream.close()
