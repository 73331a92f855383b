"""Benchmark: minigrad's Numba kernels against their numpy twins, float32.

    python examples/benchmark_kernels.py            # full run (~2 minutes, most of it compiling)
    python examples/benchmark_kernels.py --quick    # fewer repetitions

Prints one table and returns the rows from ``run_kernel_benchmarks()`` as a
list of dicts (examples/benchmark.py calls it). Timings are medians of many
calls with p10/p90; the kernel and numpy are timed in alternating rounds so
that a busy machine slows both alike. The matmul rows are the products the
date model runs, with the operands' real layouts (the heads are strided views),
and say which model path runs them and which path ``kernels.matmul`` takes.
Then, in fresh processes: the first-call compile time with an empty Numba
cache and the warm start-up (import + first calls with the cache present).
"""
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

from minigrad import kernels  # noqa: E402
from minigrad.kernels import matmul_kernels  # noqa: E402


# --------------------------------------------------------------------------- timing
def _time_alternating(calls, repeats, rounds=25):
    """Time several calls in alternating rounds; returns one array of seconds per call.
    Many short rounds: a shared machine's speed drifts within seconds, and every
    call must see the same mix of phases."""
    for call in calls:
        call()  # compile / warm up
    times = [[] for _ in calls]
    per_round = max(1, repeats // rounds)
    for _ in range(rounds):
        for call, sink in zip(calls, times):
            for _ in range(per_round):
                start = time.perf_counter()
                call()
                sink.append(time.perf_counter() - start)
    return [np.array(t) for t in times]


def _stats(seconds):
    us = seconds * 1e6
    return {"median_us": float(np.median(us)), "p10_us": float(np.percentile(us, 10)),
            "p90_us": float(np.percentile(us, 90))}


def _row(group, name, kernel_call, numpy_call, repeats, flops=None, extra_call=None):
    """kernel vs numpy (and, with extra_call, a third call timed in the same rounds)."""
    calls = [kernel_call, numpy_call] + ([extra_call] if extra_call else [])
    times = _time_alternating(calls, repeats)
    row = {"group": group, "name": name, "kernel": _stats(times[0]), "numpy": _stats(times[1])}
    if extra_call:
        row["extra"] = _stats(times[2])
    row["speedup"] = row["numpy"]["median_us"] / row["kernel"]["median_us"]
    if flops:
        row["kernel_gflops"] = flops / row["kernel"]["median_us"] / 1e3
        row["numpy_gflops"] = flops / row["numpy"]["median_us"] / 1e3
    return row


# --------------------------------------------------------------------------- the machine
def machine_info():
    cpu = platform.processor() or "unknown cpu"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    import numba
    blas = "unknown BLAS"
    try:
        config = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
        blas = f"{config.get('name', '?')} {config.get('version', '')}".strip()
    except Exception:  # the layout of show_config differs between numpy versions
        pass
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return {"cpu": cpu, "cores": os.cpu_count(), "python": platform.python_version(), "numpy": np.__version__,
            "numba": numba.__version__, "blas": blas,
            "OPENBLAS_NUM_THREADS": os.environ.get("OPENBLAS_NUM_THREADS", "unset"),
            "vector_bits": kernels.lanes(np.empty(0, np.float32)) * 32, "load_average_1min": load}


# --------------------------------------------------------------------------- the cases
def _random(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _heads(batch, length, seed):
    """(batch, 4 heads, length, 16) as MultiHeadAttention.split_heads makes it: a strided view."""
    return _random((batch, length, 4, 16), seed).transpose(0, 2, 1, 3)


def model_matmul_cases(batch=128):
    """(name, model path, a, b): every batched product of the date model's attention, op by op
    (``MultiHeadAttention.fused = False``: dates-attention-graph, training with attention
    dropout), at its three shapes, forward and backward, then decoding with a key/value cache
    and two Linear-layer products."""
    cases = []
    for kind, t, s in (("encoder self", 12, 12), ("decoder self", 19, 19), ("cross", 19, 12)):
        q, k, v, g = _heads(batch, t, 1), _heads(batch, s, 2), _heads(batch, s, 3), _heads(batch, t, 4)
        p = _random((batch, 4, t, s), 5)
        shape = f"({batch},4,{t},{s})"
        cases += [(f"{kind} Q@K^T -> {shape}", "op by op, forward", q, k.swapaxes(-1, -2)),
                  (f"{kind} P@V", "op by op, forward", p, v),
                  (f"{kind} dS@K (dQ)", "op by op, backward", p, k),
                  (f"{kind} Q^T@dS (dK^T)", "op by op, backward", q.swapaxes(-1, -2), p),
                  (f"{kind} g@V^T (dP)", "op by op, backward", g, v.swapaxes(-1, -2)),
                  (f"{kind} P^T@g (dV)", "op by op, backward", p.swapaxes(-1, -2), g)]
    for b in (128, 1):
        q, k = _random((b, 4, 1, 16), 6), _heads(b, 12, 7)
        cases += [(f"decoding q@K^T, batch {b}, 12 keys", "op by op, decoding", q, k.swapaxes(-1, -2)),
                  (f"decoding p@V, batch {b}, 12 keys", "op by op, decoding", _random((b, 4, 1, 12), 8), k)]
    cases += [("Linear (128,19,64)@(64,256)", "every step", _random((batch, 19, 64), 9), _random((64, 256), 10)),
              ("Linear weight grad (64,2432)@(2432,256)", "every step", _random((2432, 64), 11).T,
               _random((2432, 256), 12))]
    return cases


def matmul_rows(repeats):
    """kernels.matmul vs np.matmul on the model's products; for the batched ones also the Numba
    kernel called directly, whatever the dispatch rule says (column "kernel")."""
    rows = []
    for name, model_path, a, b in model_matmul_cases():
        batch = int(np.prod(np.broadcast_shapes(a.shape[:-2], b.shape[:-2])))
        flops = 2.0 * batch * a.shape[-2] * a.shape[-1] * b.shape[-1]
        reps = max(25, min(repeats, int(repeats * 2e7 / flops)))  # fewer repetitions for the big ones
        forced = (lambda: matmul_kernels._matmul_batched(a, b)) if a.ndim > 2 and b.ndim > 2 else None
        row = _row("matmul", name, lambda: kernels.matmul(a, b), lambda: np.matmul(a, b), reps, flops, forced)
        row["path"] = "numba" if matmul_kernels._use_numba_matmul(a, b) else "BLAS"
        row["model_path"] = model_path
        rows.append(row)
    return rows


def row_kernel_rows(repeats):
    rows = []
    for shape in [(512, 20, 20), (2432, 68)]:
        x = _random(shape, 11) * 3
        if x.ndim == 3:
            x[::7, :, -3:] = -np.inf  # some masked attention positions
        grad = _random(shape, 12)
        y, log_y = kernels.softmax(x), kernels.log_softmax(x)
        tag = "x".join(map(str, shape))
        rows += [
            _row("softmax", f"softmax forward {tag}", lambda: kernels.softmax(x),
                 lambda: kernels.softmax_numpy(x), repeats),
            _row("softmax", f"softmax backward {tag}", lambda: kernels.softmax_backward(y, grad),
                 lambda: kernels.softmax_backward_numpy(y, grad), repeats),
            _row("softmax", f"log_softmax forward {tag}", lambda: kernels.log_softmax(x),
                 lambda: kernels.log_softmax_numpy(x), repeats),
            _row("softmax", f"log_softmax backward {tag}", lambda: kernels.log_softmax_backward(log_y, grad),
                 lambda: kernels.log_softmax_backward_numpy(log_y, grad), repeats),
        ]
    x, w, b, grad = _random((2560, 64), 13), _random(64, 14), _random(64, 15), _random((2560, 64), 16)
    _, mean, rstd = kernels.layer_norm(x, w, b, 1e-5)
    rows += [
        _row("layer_norm", "layer_norm forward 2560x64", lambda: kernels.layer_norm(x, w, b, 1e-5),
             lambda: kernels.layer_norm_numpy(x, w, b, 1e-5), repeats),
        _row("layer_norm", "layer_norm backward 2560x64", lambda: kernels.layer_norm_backward(grad, x, w, mean, rstd),
             lambda: kernels.layer_norm_backward_numpy(grad, x, w, mean, rstd), repeats),
    ]
    return rows


def fused_kernel_rows(repeats):
    """The fused multi-head attention (vs its numpy twin: split heads, two batched
    products, softmax, merge) at the model's three shapes, and ReLU."""
    rows = []
    batch, heads, width = 128, 4, 64
    cases = [("encoder self", 12, 12, np.ones((batch, 1, 1, 12), bool)),
             ("decoder self", 19, 19, np.tril(np.ones((19, 19), bool))),
             ("cross", 19, 12, np.ones((batch, 1, 1, 12), bool))]
    for name, q_len, k_len, mask in cases:
        qkv, kv = _random((batch, q_len, 3 * width), 21), _random((batch, k_len, 3 * width), 22)
        columns = (0, width, 2 * width)
        out, weights = kernels.attention(qkv, kv, kv, mask, heads, width, columns)
        grad = _random(out.shape, 23)
        parts = [qkv[..., :width], kv[..., width:2 * width], kv[..., 2 * width:]]
        d_qkv, d_kv = np.zeros_like(qkv), np.zeros_like(kv)
        tag = f"{name} {batch}x{heads}x{q_len}x{k_len}"
        rows += [
            _row("attention", f"attention forward, {tag}",
                 lambda: kernels.attention(qkv, kv, kv, mask, heads, width, columns),
                 lambda: kernels.attention_numpy(*parts, mask, heads), repeats),
            _row("attention", f"attention backward, {tag}",
                 lambda: kernels.attention_backward(grad, qkv, kv, kv, weights, heads, d_qkv, d_kv, d_kv, columns),
                 lambda: kernels.attention_backward_numpy(grad, *parts, weights, heads), repeats),
        ]
    x, grad = _random((128, 19, 256), 24), _random((128, 19, 256), 25)
    y = kernels.relu(x)
    rows += [_row("attention", "relu forward 128x19x256", lambda: kernels.relu(x), lambda: kernels.relu_numpy(x),
                  repeats),
             _row("attention", "relu backward 128x19x256", lambda: kernels.relu_backward(y, grad),
                  lambda: kernels.relu_backward_numpy(y, grad), repeats)]
    return rows


# --------------------------------------------------------------------------- fresh processes
_FIRST_CALLS = """
import json, time
t0 = time.perf_counter()
import numpy as np
from minigrad import kernels as K
t1 = time.perf_counter()
r = np.random.default_rng(0)
f = lambda *s: r.standard_normal(s).astype(np.float32)
x, g = f(512, 20, 20), f(512, 20, 20)
calls = {
    "matmul": lambda: K.matmul(f(128, 4, 19, 19), f(128, 4, 19, 16)),
    "softmax": lambda: K.softmax(x),
    "softmax_backward": lambda: K.softmax_backward(x, g),
    "log_softmax": lambda: K.log_softmax(x),
    "log_softmax_backward": lambda: K.log_softmax_backward(x, g),
    "layer_norm": lambda: K.layer_norm(f(64, 32), f(32), f(32), 1e-5),
    "layer_norm_backward": lambda: K.layer_norm_backward(f(64, 32), f(64, 32), f(32), f(64), f(64)),
    "attention": lambda: K.attention(f(2, 5, 64), f(2, 7, 64), f(2, 7, 64), np.ones((2, 1, 1, 7), bool), 4),
    "attention_backward": lambda: K.attention_backward(f(2, 5, 64), f(2, 5, 64), f(2, 7, 64), f(2, 7, 64),
                                                       f(2, 4, 5, 7), 4, *(np.zeros((2, n, 64), np.float32)
                                                                            for n in (5, 7, 7))),
    "relu": lambda: K.relu(x),
    "relu_backward": lambda: K.relu_backward(x, g),
}
first = {}
for name, call in calls.items():
    start = time.perf_counter(); call(); first[name] = time.perf_counter() - start
print(json.dumps({"import_s": t1 - t0, "first_calls_s": first, "total_s": time.perf_counter() - t0}))
"""


def _run_fresh(code, env):
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, env={**os.environ, **env},
                            capture_output=True, text=True, timeout=1200)
    if result.returncode != 0:
        raise RuntimeError(result.stderr)
    return json.loads(result.stdout.strip().splitlines()[-1])


def startup_rows():
    """Cold (empty cache) and warm (cache present) start in fresh processes, float32."""
    with tempfile.TemporaryDirectory() as cache:
        cold = _run_fresh(_FIRST_CALLS, {"NUMBA_CACHE_DIR": cache})
        warm = [_run_fresh(_FIRST_CALLS, {"NUMBA_CACHE_DIR": cache}) for _ in range(3)]
    warm = min(warm, key=lambda run: run["total_s"])
    return [{"group": "startup", "name": name, "cold": cold, "warm": warm} for name in ["import + first calls"]]


# --------------------------------------------------------------------------- the report
def _format_us(stats):
    return f"{stats['median_us']:9.1f} [{stats['p10_us']:7.1f}-{stats['p90_us']:7.1f}]"


def print_report(info, rows):
    print(f"machine: {info['cpu']}, {info['cores']} cores, {info['vector_bits']}-bit vectors, "
          f"load average {info['load_average_1min']:.2f}")
    print(f"python {info['python']}, numpy {info['numpy']} ({info['blas']}, "
          f"OPENBLAS_NUM_THREADS={info['OPENBLAS_NUM_THREADS']}), numba {info['numba']}; serial kernels")
    print("times in microseconds: median [p10-p90]; speed-up = numpy median / minigrad median; float32")
    print("matmul: 'minigrad' = kernels.matmul, which takes 'path' (its dispatch rule); 'kernel' = the Numba "
          "kernel called directly, whatever the rule says")
    for group in ("matmul", "softmax", "layer_norm", "attention"):
        print()
        if group == "matmul":
            print(f"{'matmul':42s} {'model path':19s} {'path':5s} {'minigrad':>26s} {'numpy':>26s} "
                  f"{'kernel':>9s} {'speed-up':>8s}")
        else:
            print(f"{group:62s} {'minigrad':>26s} {'numpy':>26s} {'speed-up':>8s}")
        for r in (r for r in rows if r["group"] == group):
            times = f"{_format_us(r['kernel']):>26s} {_format_us(r['numpy']):>26s}"
            if group == "matmul":
                forced = f"{r['extra']['median_us']:9.1f}" if "extra" in r else f"{'':9s}"
                print(f"{r['name']:42s} {r['model_path']:19s} {r['path']:5s} {times} {forced} {r['speedup']:7.2f}x")
            else:
                print(f"{r['name']:62s} {times} {r['speedup']:7.2f}x")
    for r in (r for r in rows if r["group"] == "startup"):
        print()
        for label, run in (("cold (empty Numba cache)", r["cold"]), ("warm (cache present)", r["warm"])):
            calls = ", ".join(f"{k} {v:.2f}" for k, v in run["first_calls_s"].items())
            print(f"start-up {label:25s}: total {run['total_s']:6.2f} s = import {run['import_s']:.2f} s"
                  f" + first calls [{calls}] s")


def run_kernel_benchmarks(quick=False):
    """Run every benchmark, print the table, return the rows as a list of dicts."""
    repeats = 100 if quick else 500
    info = machine_info()
    rows = matmul_rows(repeats) + row_kernel_rows(repeats) + fused_kernel_rows(repeats) + startup_rows()
    print_report(info, rows)
    return [{"group": "machine", **info}] + rows


if __name__ == "__main__":
    import argparse
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    parser.add_argument("--json", metavar="FILE", help="also write the rows to FILE as JSON")
    args = parser.parse_args()
    results = run_kernel_benchmarks(quick=args.quick)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
