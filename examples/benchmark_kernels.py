"""Benchmark: minigrad's registered kernels against their ops' numpy functions, float32.

    python examples/benchmark_kernels.py            # full run (~2 minutes, most of it compiling)
    python examples/benchmark_kernels.py --quick    # fewer repetitions
    python examples/benchmark_kernels.py --record   # and write the verdicts to minigrad/kernels/measured.json
    python examples/benchmark_kernels.py --record softplus softplus_backward   # just these kernels' verdicts

``--record`` is how the registry learns which kernels pay: a kernel runs by default only where
its recorded median beats its numpy twin's at its model-size example (``kernels/registry.py``).
With names it measures and rewrites only those kernels' verdicts and keeps every other one as it
was recorded (a new op's diff is its own lines). Record on a quiet machine, and say which in the commit.

Prints one table and returns the rows from ``run_kernel_benchmarks()`` as a
list of dicts (examples/benchmark.py calls it). Timings are medians of many
calls with p10/p90; the kernel and numpy are timed in alternating rounds so
that a busy machine slows both alike. The matmul rows are the products the
date model runs, with the operands' real layouts (the heads are strided views),
and say which model path runs them and which path the matmul kernel takes. Every
other row is one registered kernel (``kernels.registered()``) at the shapes of a default
training step (its ``example(..., "model")``). Then, in fresh processes: the first-call compile time with an empty Numba
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

import minigrad  # noqa: E402,F401  (loads the ops, which register their kernels)
from minigrad import kernels  # noqa: E402
from minigrad.kernels import matmul_kernels, registry  # noqa: E402
from minigrad.kernels.untrusted_files import Unreadable, read_regular_file  # noqa: E402
from minigrad.ops.matmul import matmul_arrays  # noqa: E402


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
    """matmul_arrays (its kernel) vs np.matmul on the model's products; for the batched ones also the Numba
    kernel called directly, whatever the dispatch rule says (column "kernel")."""
    rows = []
    for name, model_path, a, b in model_matmul_cases():
        batch = int(np.prod(np.broadcast_shapes(a.shape[:-2], b.shape[:-2])))
        flops = 2.0 * batch * a.shape[-2] * a.shape[-1] * b.shape[-1]
        reps = max(25, min(repeats, int(repeats * 2e7 / flops)))  # fewer repetitions for the big ones
        forced = (lambda: matmul_kernels.matmul_batched(a, b)) if a.ndim > 2 and b.ndim > 2 else None
        row = _row("matmul", name, lambda: matmul_arrays(a, b), lambda: np.matmul(a, b), reps, flops, forced)
        row["path"] = "numba" if matmul_kernels.use_numba_matmul(a, b) else "BLAS"
        row["model_path"] = model_path
        rows.append(row)
    return rows


def registered_kernel_rows(repeats, chosen=None):
    """Every registered kernel (or the ``chosen`` ones) against its op's numpy function at its
    model-size example (matmul's is op-by-op attention's P @ V; the products above show where its
    rule sends the others)."""
    rows = []
    for kernel in chosen if chosen is not None else kernels.registered():
        args = kernel.example(np.random.default_rng(0), np.dtype(np.float32), "model")
        shapes = "x".join(str(n) for n in next(a for a in args if isinstance(a, np.ndarray)).shape)
        group = kernel.op.__module__.rsplit(".", 1)[-1]
        group = "batched matmul" if group == "matmul" else group     # the "matmul" rows are the model's products
        row = _row(group, f"{kernel.name} {shapes}", lambda: kernel.run(*args), lambda: kernel.op.numpy(*args), repeats)
        row.update(key=kernel.key, shape=shapes, pays=row["speedup"] >= 1)
        rows.append(row)
    return rows


def verdicts(info, rows):
    """What ``--record`` writes: the machine and, per kernel, its model-size medians."""
    kernel_rows = {r["key"]: {"shape": r["shape"], "kernel_us": round(r["kernel"]["median_us"], 1),
                              "numpy_us": round(r["numpy"]["median_us"], 1), "speedup": round(r["speedup"], 2)}
                   for r in rows if "key" in r}
    return {"how": "python examples/benchmark_kernels.py --record: medians of alternating rounds, float32, "
                   "each kernel at its example(..., 'model') arguments",
            "date": time.strftime("%Y-%m-%d"), "machine": info, "kernels": kernel_rows}


def chosen_kernels(names):
    """The registered kernels named by ``names`` (a kernel's name, ``softplus``, or its key,
    ``minigrad.ops.elementwise.softplus``), in registration order; ValueError names the unknown."""
    registered = kernels.registered()
    known = {kernel.name: kernel for kernel in registered} | {kernel.key: kernel for kernel in registered}
    unknown = [name for name in names if name not in known]
    if unknown:
        raise ValueError(f"no registered kernel named {', '.join(unknown)}; the kernels are: "
                         f"{', '.join(kernel.name for kernel in registered)}")
    wanted = {known[name] for name in names}
    return [kernel for kernel in registered if kernel in wanted]


def merged_verdicts(recorded, info, rows):
    """``recorded`` (the verdicts file as it is) with only these rows' kernels re-measured: every
    other verdict, and the machine of the full record, stay as they were; the partial record
    says when, where and what it measured under "partial_records"."""
    fresh = verdicts(info, rows)
    merged = {**recorded, "kernels": {**recorded.get("kernels", {}), **fresh["kernels"]}}
    merged["partial_records"] = recorded.get("partial_records", []) + [
        {"date": fresh["date"], "machine": info, "kernels": sorted(fresh["kernels"])}]
    return merged


def read_recorded():
    """The verdicts file as it is, or None where there is none or it is damaged (the registry
    ignores such a file too)."""
    try:
        return json.loads(read_regular_file(registry.MEASURED, registry.MAX_VERDICTS_BYTES).decode("utf-8"))
    except (OSError, Unreadable, ValueError, RecursionError):
        return None


def recorded_file(recorded, info, rows, names=()):
    """The verdicts file after ``--record``: the record of this machine's vector width replaced
    (or, with ``names``, only those kernels' verdicts in it). The main record is the one of the
    width it was measured at; a machine of another width gets its own record under
    "other_vector_widths" (the registry reads the one of its width), every other record kept."""
    bits = info["vector_bits"]
    if not isinstance(recorded, dict):
        if names:
            raise ValueError("there are no verdicts to add to: run --record with no names first")
        return verdicts(info, rows)
    others = dict(recorded.get("other_vector_widths") or {})
    is_main = (recorded.get("machine") or {}).get("vector_bits") == bits
    own = recorded if is_main else others.get(str(bits))
    if names and own is None:
        raise ValueError(f"no verdicts of {bits}-bit vectors to add to: run --record with no names first")
    updated = merged_verdicts(own, info, rows) if names else verdicts(info, rows)
    if is_main:
        updated.pop("other_vector_widths", None)
        return {**updated, **({"other_vector_widths": others} if others else {})}
    updated.pop("other_vector_widths", None)
    return {**recorded, "other_vector_widths": {**others, str(bits): updated}}


def write_json(path, value):
    """Atomic: a reader (or an interrupted run) never sees half a file."""
    folder = os.path.dirname(os.path.abspath(path))
    with tempfile.NamedTemporaryFile("w", dir=folder, suffix=".tmp", delete=False) as file:
        json.dump(value, file, indent=1)
        file.write("\n")
    os.replace(file.name, path)


# --------------------------------------------------------------------------- fresh processes
_FIRST_CALLS = """
import json, time
t0 = time.perf_counter()
import numpy as np
import minigrad
from minigrad import kernels
t1 = time.perf_counter()
first = {}
for kernel in kernels.registered():
    args = kernel.example(np.random.default_rng(0), np.dtype(np.float32), "small")
    start = time.perf_counter(); kernel.run(*args); first[kernel.name] = time.perf_counter() - start
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
    print("matmul: 'minigrad' = matmul_arrays, whose kernel takes 'path' (its dispatch rule); 'kernel' = the "
          "Numba kernel called directly, whatever the rule says")
    groups = list(dict.fromkeys(r["group"] for r in rows if r["group"] != "startup"))
    for group in groups:
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


def run_kernel_benchmarks(quick=False, record=False, only_registered=False, names=()):
    """Run every benchmark, print the table, return the rows as a list of dicts; with ``record``,
    write the registered kernels' verdicts to the registry's measured.json. With ``names``, only
    those kernels are measured (no matmul products, no start-up) and, recorded, only their
    verdicts change."""
    repeats = 100 if quick else 500
    info = machine_info()
    chosen = chosen_kernels(names) if names else None
    registered = registered_kernel_rows(repeats, chosen)
    rows = registered if only_registered or names else matmul_rows(repeats) + registered + startup_rows()
    print_report(info, rows)
    if record:
        write_json(registry.MEASURED, recorded_file(read_recorded(), info, registered, names))
        print(f"\nverdicts of {', '.join(r['key'] for r in registered) if names else 'every kernel'} "
              f"at {info['vector_bits']}-bit vectors written to {os.path.relpath(registry.MEASURED, REPO)}")
    return [{"group": "machine", **info}] + rows


if __name__ == "__main__":
    import argparse
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    parser.add_argument("--json", metavar="FILE", help="also write the rows to FILE as JSON")
    parser.add_argument("--record", nargs="*", metavar="NAME",
                        help="write each registered kernel's verdict (faster than numpy or not) to the registry; "
                             "with NAMEs (softplus, or minigrad.ops.elementwise.softplus) only theirs, the others "
                             "kept as recorded")
    parser.add_argument("--registered-only", action="store_true",
                        help="only the registered kernels (no matmul products, no start-up)")
    parser.add_argument("--only", nargs="+", metavar="NAME", default=(),
                        help="measure only these registered kernels (as --record NAME... without writing)")
    args = parser.parse_args()
    names = tuple(args.record or ()) + tuple(args.only)
    try:
        chosen_kernels(names)                  # an unknown name is one line, before anything is timed
        if args.record:                        # and so is a record of names with nothing to add them to
            recorded_file(read_recorded(), machine_info(), [], names)
    except ValueError as error:
        print(f"benchmark_kernels.py: {error}", file=sys.stderr)
        sys.exit(2)
    results = run_kernel_benchmarks(quick=args.quick, record=args.record is not None,
                                    only_registered=args.registered_only, names=names)
    if args.json:
        write_json(args.json, results)
