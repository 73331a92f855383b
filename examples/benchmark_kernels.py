"""Benchmark: minigrad's Numba kernels against their numpy twins, float32.

    python examples/benchmark_kernels.py            # full run (~2 minutes, most of it compiling)
    python examples/benchmark_kernels.py --quick    # fewer repetitions, no threading comparison

Prints one table and returns the rows from ``run_kernel_benchmarks()`` as a
list of dicts (examples/benchmark.py calls it). Timings are medians of many
calls with p10/p90; the kernel and numpy are timed in alternating rounds so
that a busy machine slows both alike. The matmul table ends with a "memory
floor" for each attention shape: a kernel that only reads A and B and writes
C, the bound no matmul kernel can pass on one core. Then, measured in fresh processes:
the first-call compile time with an empty Numba cache, the warm start-up
(import + first calls with the cache present) and, for the record, what a
``prange`` over the batch would cost with each threading layer (the kernels
are serial because of it).
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
from minigrad.kernels.jit import jit  # noqa: E402
from minigrad.kernels.simd import flat, lanes, vload, vsplat, vstore  # noqa: E402


# --------------------------------------------------------------------------- timing
def _time_pair(kernel_call, numpy_call, repeats, rounds=25):
    """Time two calls in alternating rounds; returns two arrays of seconds.
    Many short rounds: this VM's speed drifts by up to ~1.7x within seconds
    (a neighbour's load), and both sides must see the same mix of phases."""
    kernel_call(), numpy_call()  # compile / warm up
    times = ([], [])
    per_round = max(1, repeats // rounds)
    for _ in range(rounds):
        for call, sink in ((kernel_call, times[0]), (numpy_call, times[1])):
            for _ in range(per_round):
                start = time.perf_counter()
                call()
                sink.append(time.perf_counter() - start)
    return np.array(times[0]), np.array(times[1])


def _stats(seconds):
    us = seconds * 1e6
    return {"median_us": float(np.median(us)), "p10_us": float(np.percentile(us, 10)),
            "p90_us": float(np.percentile(us, 90))}


def _row(group, name, kernel_call, numpy_call, repeats, flops=None):
    kernel_s, numpy_s = _time_pair(kernel_call, numpy_call, repeats)
    row = {"group": group, "name": name, "kernel": _stats(kernel_s), "numpy": _stats(numpy_s)}
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
            "NUMBA_THREADING_LAYER": os.environ.get("NUMBA_THREADING_LAYER", "unset"),
            "kernel_threading": "serial kernels (no prange): no threading layer is loaded",
            "load_average_1min": load}


# --------------------------------------------------------------------------- the cases
def _random(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def matmul_rows(repeats):
    q, k = _random((512, 20, 16), 0), _random((512, 20, 16), 1)
    p, g = _random((512, 20, 20), 2), _random((512, 20, 16), 3)
    k_t = np.ascontiguousarray(k.swapaxes(-1, -2))
    cases = [
        ("(512,20,16)@(512,16,20) Q@K^T, K^T contiguous", q, k_t),
        ("(512,20,20)@(512,20,16) attention P@V", p, g),
        ("(512,20,16)@(512,20,16).swapaxes  Q@K^T as a view", q, k.swapaxes(-1, -2)),
        ("(512,20,16)@(512,20,16).swapaxes  backward g@V^T", g, k.swapaxes(-1, -2)),
        ("(512,20,20).swapaxes@(512,20,16)  backward P^T@g", p.swapaxes(-1, -2), g),
        ("(512,16,20).swapaxes@(512,20,20)  backward Q^T@g", _random((512, 20, 16), 4).swapaxes(-1, -2), p),
        ("(128,20,64)@(64,256) batch x shared weight", _random((128, 20, 64), 5), _random((64, 256), 6)),
        ("(2560,64)@(64,256) 2-D projection", _random((2560, 64), 7), _random((64, 256), 8)),
        ("(1024,1024)@(1024,1024)", _random((1024, 1024), 9), _random((1024, 1024), 10)),
    ]
    rows = []
    for name, a, b in cases:
        batch = int(np.prod(np.broadcast_shapes(a.shape[:-2], b.shape[:-2])))
        flops = 2.0 * batch * a.shape[-2] * a.shape[-1] * b.shape[-1]
        reps = max(25, min(repeats, int(repeats * 2e7 / flops)))  # fewer repetitions for the big ones
        row = _row("matmul", name, lambda: kernels.matmul(a, b), lambda: np.matmul(a, b), reps, flops)
        row["path"] = "numba" if matmul_kernels._use_numba_matmul(a, b) else "BLAS"
        rows.append(row)
    rows += memory_floor_rows(repeats, [(cases[0][0], q, k_t), (cases[1][0], p, g)])
    return rows


# --------------------------------------------------------------------------- the memory floor
@jit()
def _move_bytes(a, b, out):
    """Per matrix: read every element of A and B (a lane-wise sum) and write every element of C."""
    af, bf, cf = flat(a), flat(b), flat(out)
    size_a, size_b, size_c = a.shape[1] * a.shape[2], b.shape[1] * b.shape[2], out.shape[1] * out.shape[2]
    step, zero = lanes(out), out.dtype.type(0)
    for p in range(out.shape[0]):
        total = vsplat(zero)
        for i in range(0, size_a, step):
            total = total + vload(af, p * size_a + i, size_a - i, zero)
        for i in range(0, size_b, step):
            total = total + vload(bf, p * size_b + i, size_b - i, zero)
        for i in range(0, size_c, step):
            vstore(cf, p * size_c + i, size_c - i, total)


def memory_floor_rows(repeats, cases):
    """What no A @ B kernel can beat here: the time to move the bytes.

    A kernel with no arithmetic at all reads A and B and writes a freshly
    allocated C (as kernels.matmul does) at each attention shape; its
    "speed-up" over np.matmul is the most any matmul kernel could reach on
    this machine without a second core. On the 2-vCPU VM the README quotes,
    2.1 MB per P @ V call does not fit the 1 MB L2, so it streams from L3."""
    rows = []
    for name, a, b in cases:
        out_shape = a.shape[:-1] + b.shape[-1:]
        row = _row("matmul", name.split(" ", 1)[0] + " memory floor (no arithmetic)",
                   lambda: _move_bytes(a, b, np.empty(out_shape, a.dtype)), lambda: np.matmul(a, b), repeats)
        row["path"] = "floor"
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
    "matmul": lambda: K.matmul(f(512, 20, 16), f(512, 20, 16).swapaxes(-1, -2)),
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


_PARALLEL_PROBE = """
import json, os, sys, time
import numpy as np
import numba
numba.config.THREADING_LAYER = sys.argv[1]
from numba import njit, prange
from minigrad.kernels import matmul_kernels as K
from minigrad.kernels.simd import flat, rebase

@njit(parallel=True)
def parallel_matmul(a, b, out):  # the serial kernel's batch loop (20x16 @ 16x20, sizes as constants), as a prange
    a_flat, b_flat, out_flat = flat(a), flat(b), flat(out)
    for p in prange(out.shape[0]):
        K._matmul_one(a_flat, p * 320, 16, 1, rebase(b_flat, p * 320), rebase(out_flat, p * 400), 20, 16, 20)

@njit(parallel=True)
def parallel_nothing(out):
    for p in prange(out.shape[0]):
        out[p] = p

r = np.random.default_rng(0)
a, b = r.standard_normal((512, 20, 16)).astype(np.float32), r.standard_normal((512, 16, 20)).astype(np.float32)
w = r.standard_normal((2560, 64)).astype(np.float32), r.standard_normal((64, 256)).astype(np.float32)
out, tiny = np.empty((512, 20, 20), np.float32), np.empty(64)
serial_matmul = K._batch_kernel(20, 16, 20, False, False)
parallel_matmul(a, b, out); parallel_nothing(tiny); K.matmul(a, b)

def median_us(call, between=None, n=200):
    times = []
    for _ in range(n):
        if between: between()
        start = time.perf_counter(); call(); times.append(time.perf_counter() - start)
    return float(np.median(times) * 1e6)

blas = lambda: np.matmul(*w)  # what the model does between two attention products
print(json.dumps({
    "layer": numba.threading_layer(),
    "empty_prange_us": median_us(lambda: parallel_nothing(tiny)),
    "empty_prange_after_blas_us": median_us(lambda: parallel_nothing(tiny), blas),
    "prange_matmul_us": median_us(lambda: parallel_matmul(a, b, out)),
    "prange_matmul_after_blas_us": median_us(lambda: parallel_matmul(a, b, out), blas),
    "serial_matmul_us": median_us(lambda: serial_matmul(a, b, out, K._SAME_BATCH, K._SAME_BATCH)),
    "serial_matmul_after_blas_us": median_us(lambda: serial_matmul(a, b, out, K._SAME_BATCH, K._SAME_BATCH), blas),
}))
"""


def threading_rows():
    rows = []
    for layer in ["workqueue", "omp", "tbb"]:
        try:
            probe = _run_fresh(_PARALLEL_PROBE.replace("sys.argv[1]", repr(layer)), {})
        except RuntimeError as error:
            probe = {"layer": layer, "error": str(error).strip().splitlines()[-1]}
        rows.append({"group": "threading", "name": layer, **probe})
    return rows


# --------------------------------------------------------------------------- the report
def _format_us(stats):
    return f"{stats['median_us']:9.1f} [{stats['p10_us']:7.1f}-{stats['p90_us']:7.1f}]"


def print_report(info, rows):
    print(f"machine: {info['cpu']}, {info['cores']} cores, load average {info['load_average_1min']:.2f}")
    print(f"python {info['python']}, numpy {info['numpy']} ({info['blas']}, "
          f"OPENBLAS_NUM_THREADS={info['OPENBLAS_NUM_THREADS']}), numba {info['numba']}; "
          f"{info['kernel_threading']} (NUMBA_THREADING_LAYER={info['NUMBA_THREADING_LAYER']})")
    print("times in microseconds: median [p10-p90]; speed-up = numpy median / kernel median; float32;"
          " 'kernel' = minigrad.kernels.matmul etc. (path BLAS: its dispatch chose np.matmul)")
    groups = [r for r in rows if r["group"] in ("matmul", "softmax", "layer_norm", "attention")]
    for group in ("matmul", "softmax", "layer_norm", "attention"):
        print()
        header = f"{group:52s} {'path':5s} {'kernel':>26s} {'numpy':>26s}"
        header += f" {'GFLOP/s k':>9s} {'numpy':>6s}" if group == "matmul" else ""
        print(header + f" {'speed-up':>8s}")
        for r in (r for r in groups if r["group"] == group):
            line = f"{r['name']:52s} {r.get('path', 'numba'):5s} "
            line += f"{_format_us(r['kernel']):>26s} {_format_us(r['numpy']):>26s}"
            if "kernel_gflops" in r:
                line += f" {r['kernel_gflops']:9.1f} {r['numpy_gflops']:6.1f}"
            elif group == "matmul":
                line += f" {'':9s} {'':6s}"
            print(line + f" {r['speedup']:7.2f}x")
    for r in (r for r in rows if r["group"] == "startup"):
        print()
        for label, run in (("cold (empty Numba cache)", r["cold"]), ("warm (cache present)", r["warm"])):
            calls = ", ".join(f"{k} {v:.2f}" for k, v in run["first_calls_s"].items())
            print(f"start-up {label:25s}: total {run['total_s']:6.2f} s = import {run['import_s']:.2f} s"
                  f" + first calls [{calls}] s")
    threading = [r for r in rows if r["group"] == "threading"]
    if threading:
        print()
        print("a prange over the batch instead of the serial loop (median us; 'after BLAS' = a (2560,64)@(64,256) "
              "np.matmul just before each call):")
        for r in threading:
            if "error" in r:
                print(f"  {r['name']:9s}: not available ({r['error']})")
                continue
            print(f"  {r['layer']:9s}: empty prange {r['empty_prange_us']:8.1f}, after BLAS "
                  f"{r['empty_prange_after_blas_us']:8.1f} | attention matmul prange {r['prange_matmul_us']:8.1f}, "
                  f"after BLAS {r['prange_matmul_after_blas_us']:8.1f} | serial {r['serial_matmul_us']:7.1f}, "
                  f"after BLAS {r['serial_matmul_after_blas_us']:7.1f}")


def run_kernel_benchmarks(quick=False):
    """Run every benchmark, print the table, return the rows as a list of dicts."""
    repeats = 100 if quick else 500
    info = machine_info()
    rows = matmul_rows(repeats) + row_kernel_rows(repeats) + fused_kernel_rows(repeats) + startup_rows()
    if not quick:
        rows += threading_rows()
    print_report(info, rows)
    return [{"group": "machine", **info}] + rows


if __name__ == "__main__":
    import argparse
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions, skip the threading comparison")
    parser.add_argument("--json", metavar="FILE", help="also write the rows to FILE as JSON")
    args = parser.parse_args()
    results = run_kernel_benchmarks(quick=args.quick)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
