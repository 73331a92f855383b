"""The training step beside PyTorch eager at four model sizes, and beside a busy process.

    python examples/benchmark.py --sizes --torch-python /path/to/python-with-torch --write-docs
    python examples/benchmark.py --sizes --torch-python PATH --quick        # a shorter check

Sizes (each side: encoder and decoder layers): d_model 64 / 128 / 256 / 512 with 2 / 3 / 4 / 6
layers, d_ff 4 x d_model, 4 / 4 / 8 / 8 heads, batch 128. For each size, rounds of fresh
processes alternate minigrad (``dates-train``'s step, threads ``auto``) and PyTorch eager
(``examples/torch_step.py``: the same model with hand-written attention, 2 threads), the order
reversed every other round. Each process reports its first step (cold: kernels loaded, BLAS
warming up) and the median of the rest (warm); the ratio is taken per round and its median
quoted. The matrix products' FLOPs per step (as PyTorch's reference counts them) over the warm
step give each framework's rate, set against the machine's peak, measured as a large SGEMM on
every core, and estimated from the clock (cores x MHz x 32 float32 FLOP a cycle for two AVX2 FMA
units).

Then, at the default size: minigrad's quiet step on two workers and on one (``--blas-threads 1``:
the halves one after the other on one core), and the step beside one busy process, alternating;
the loaded target is stated against the quiet one-worker step (a busy neighbour leaves a step
one core). With ``--write-docs`` the figures go to ``docs/benchmarks.md`` (dated, the machine
named) and the ratio by size to ``docs/images/speed_by_size.png``.

When the side Python's torch has ``torch.compile``, a third process joins each round: the same
PyTorch step with its forward and loss compiled by inductor (``torch_step.py --compile``). Its
first step holds the compilation and is reported apart (``compile``): the sweep gives inductor a
cache folder of its own, empty at the start, so each size's first compile is from scratch (about
a minute on two cores at d_model 64) and the later rounds load the cached kernels (seconds).
If compiling fails, its column says why in one line and the other columns are measured as usual.
"""
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TORCH_STEP = os.path.join(REPO, "examples", "torch_step.py")
DOCS_PAGE = os.path.join(REPO, "docs", "benchmarks.md")
PLOT = os.path.join(REPO, "docs", "images", "speed_by_size.png")
SRC_LEN, TGT_LEN, VOCAB, BATCH = 12, 19, 68, 128

# (d_model, heads, layers each side, d_ff); steps per process and rounds, full / --quick
SIZES = [(64, 4, 2, 256), (128, 4, 3, 512), (256, 8, 4, 1024), (512, 8, 6, 2048)]
PLAN = {64: ((40, 10, 4), (20, 5, 2)), 128: ((20, 5, 4), (10, 3, 2)),
        256: ((12, 6, 3), (10, 6, 1)), 512: ((12, 8, 2), (10, 8, 1))}     # (steps, skipped, rounds)
# skipped: compilation, and under threads ``auto`` the first steps on one thread before its first
# probe of two (``transformer/parallel/threads.py``): a run of thousands of steps runs two


def step_flops(d, layers, d_ff, batch=BATCH, src=SRC_LEN, tgt=TGT_LEN, vocab=VOCAB):
    """Matrix-product FLOPs of a training step (forward 2*M*N*K per product, backward twice that)."""
    encoder = 4 * 2 * batch * src * d * d + 2 * 2 * batch * src * src * d + 2 * 2 * batch * src * d * d_ff
    decoder = (4 * 2 * batch * tgt * d * d + 2 * 2 * batch * tgt * tgt * d            # self-attention
               + 2 * 2 * batch * tgt * d * d + 2 * 2 * batch * src * d * d           # cross: q, o / k, v
               + 2 * 2 * batch * tgt * src * d + 2 * 2 * batch * tgt * d * d_ff)     # cross core, FFN
    return 3 * (layers * (encoder + decoder) + 2 * batch * tgt * d * vocab)


# ---------------------------------------------------------------- the machine
def machine():
    """CPU model, cores, vector flags, clock, library versions, as one dict."""
    info = {"cpu": platform.processor() or "unknown", "cores": os.cpu_count(), "flags": [], "mhz": None}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                key, value = key.strip(), value.strip()
                if key == "model name":
                    info["cpu"] = value
                elif key == "flags" and not info["flags"]:
                    info["flags"] = [flag for flag in value.split() if flag.startswith(("avx", "fma"))]
                elif key == "cpu MHz" and info["mhz"] is None:
                    info["mhz"] = float(value)
    except OSError:
        pass
    import numba
    from threadpoolctl import threadpool_info
    blas = next((f"{lib.get('internal_api')} {lib.get('version')} ({lib.get('architecture')})"
                 for lib in threadpool_info() if lib.get("user_api") == "blas"), "unknown BLAS")
    info.update(python=platform.python_version(), numpy=np.__version__, numba=numba.__version__, blas=blas)
    return info


def peak_gflops(info, seconds=2.0):
    """(measured, from the clock): a 2048^3 float32 product on every core, the best of ~``seconds``
    of repeats; and cores x MHz x 32 FLOP a cycle (two 256-bit FMA units: 2 x 8 lanes x 2), or None."""
    from threadpoolctl import threadpool_limits
    a = np.random.default_rng(0).standard_normal((2048, 2048), dtype=np.float32)
    best, start = float("inf"), time.perf_counter()
    with threadpool_limits(limits=info["cores"], user_api="blas"):
        while time.perf_counter() - start < seconds or best == float("inf"):
            begin = time.perf_counter()
            a @ a
            best = min(best, time.perf_counter() - begin)
    wide = "avx2" in info["flags"] and "fma" in info["flags"]
    clock = info["cores"] * info["mhz"] * 1e6 * 32 / 1e9 if wide and info["mhz"] else None
    return 2 * 2048 ** 3 / best / 1e9, clock


# ---------------------------------------------------------------- one process, one block
def minigrad_steps(d, heads, layers, d_ff, steps, skip, setting="auto"):
    """Time ``steps`` training steps of a fresh trainer (this process); a SUMMARY dict as torch_step's."""
    sys.path.insert(0, REPO)
    from transformer.models.config import ModelConfig
    from transformer.training.trainer import TrainConfig
    from transformer.training.dates import DateTrainer
    trainer = DateTrainer(ModelConfig(d_model=d, num_heads=heads, num_encoder_layers=layers,
                                  num_decoder_layers=layers, d_ff=d_ff),
                      TrainConfig(steps=10 ** 6, eval_every=0, checkpoint_every=0), out_dir=tempfile.gettempdir())
    times, cpu_times = [], []
    with trainer.gradients.running(setting):                # as dates-train runs its steps
        for _ in range(steps):
            start, cpu_start = time.perf_counter(), time.process_time()
            trainer.train_step()
            times.append(time.perf_counter() - start)
            cpu_times.append(time.process_time() - cpu_start)
    return summary(times, cpu_times, skip)


def summary(times, cpu_times, skip):
    warm = times[skip:]
    return {"first_step_ms": 1e3 * times[0], "median_step_ms": 1e3 * statistics.median(warm),
            "p10_step_ms": 1e3 * float(np.percentile(warm, 10)), "p90_step_ms": 1e3 * float(np.percentile(warm, 90)),
            "median_step_cpu_ms": 1e3 * statistics.median(cpu_times[skip:]), "steps": len(times)}


def run_block(command, timeout, env=None):
    """Run a timing process; its SUMMARY dict, with the load average and the other processes'
    share of the CPUs while it ran (``foreign``: 0 quiet, 0.5 one core busy elsewhere). A process
    that says why it could not time (SUMMARY {"error": ...}) gives that error."""
    before, load = _cpu_snapshot(), os.getloadavg()[0]
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=REPO,
                                env=None if env is None else {**os.environ, **env})
    except subprocess.TimeoutExpired:
        return {"error": f"took more than {timeout:.0f} s"}
    line = next((line for line in reversed(result.stdout.splitlines()) if line.startswith("SUMMARY ")), None)
    if line is None:
        tail = " / ".join((result.stdout + result.stderr).strip().splitlines()[-3:])
        return {"error": f"no SUMMARY line (exit {result.returncode}): {tail}"}
    block = json.loads(line[len("SUMMARY "):])
    if "error" in block:
        return {"error": str(block["error"])}
    block["load_average"], block["foreign"] = load, _foreign(before, _cpu_snapshot())
    return block


def _cpu_snapshot():
    """(busy CPU seconds of the whole machine, CPU seconds of this process's children, wall time)."""
    try:
        with open("/proc/stat") as f:
            ticks = [int(v) for v in f.readline().split()[1:9]]
        busy = (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")
    except OSError:
        busy = float("nan")
    own = os.times()
    return busy, own.children_user + own.children_system, time.perf_counter()


def _foreign(a, b):
    busy, own, wall = (y - x for x, y in zip(a, b))
    return max(0.0, busy - own) / max(1e-9, wall * (os.cpu_count() or 1))


def minigrad_command(size, steps, skip, setting="auto"):
    d, heads, layers, d_ff = size
    return [sys.executable, os.path.abspath(__file__), "--minigrad-block", str(d), str(heads), str(layers),
            str(d_ff), str(steps), str(skip), str(setting)]


def torch_command(torch_python, size, steps, skip, compiled=False):
    d, heads, layers, d_ff = size
    return [torch_python, TORCH_STEP, "--d-model", str(d), "--heads", str(heads), "--layers", str(layers),
            "--d-ff", str(d_ff), "--steps", str(steps), "--skip", str(skip), "--threads", "2"] + \
        (["--compile"] if compiled else [])


def has_torch_compile(torch_python):
    """None when the side Python's torch has ``torch.compile``, else why not (one line)."""
    probe = subprocess.run([torch_python, "-c", "import torch; assert callable(getattr(torch, 'compile', None)), "
                            "'torch ' + torch.__version__ + ' has no torch.compile (it came in 2.0)'"],
                           capture_output=True, text=True)
    if probe.returncode == 0:
        return None
    lines = probe.stderr.strip().splitlines()
    return lines[-1] if lines else f"exit {probe.returncode}"


# ---------------------------------------------------------------- the sweep
CONTENDERS = ("minigrad", "torch", "compiled")
LABELS = {"minigrad": "minigrad", "torch": "PyTorch eager", "compiled": "torch.compile"}


def run_sizes(torch_python, quick=False, sizes=SIZES, say=print, timeout=900, compiled=False):
    """For each size, alternating rounds of minigrad, PyTorch eager and (``compiled``) the step
    through torch.compile; a list of row dicts."""
    who_runs = CONTENDERS if compiled else CONTENDERS[:2]
    rows = []
    with tempfile.TemporaryDirectory(prefix="inductor-cache-") as cache:
        inductor = {"TORCHINDUCTOR_CACHE_DIR": cache}      # empty at first: the first compile is from scratch
        for size in sizes:
            steps, skip, rounds = PLAN.get(size[0], ((10, 3, 2), (5, 2, 1)))[bool(quick)]
            blocks = {who: [] for who in who_runs}
            for round_ in range(rounds):
                for who in (who_runs if round_ % 2 == 0 else who_runs[::-1]):
                    if who == "minigrad":
                        blocks[who].append(run_block(minigrad_command(size, steps, skip), timeout))
                    else:
                        command = torch_command(torch_python, size, steps, skip, compiled=who == "compiled")
                        blocks[who].append(run_block(command, timeout, env=inductor))
                say(f"   d_model {size[0]:>3} round {round_ + 1}: "
                    + ", ".join(f"{LABELS[who]} {_ms(blocks[who][-1])}" for who in who_runs))
            rows.append(size_row(size, steps, skip, blocks))
    return rows


def compiled_columns(blocks):
    """torch.compile's figures, paired per round with minigrad's (a failed minigrad or compile
    block leaves its round out); {"compiled_error": why} when it never compiled."""
    pairs = [(m, c) for m, c in zip(blocks["minigrad"], blocks["compiled"]) if "error" not in m and "error" not in c]
    if not pairs:
        errors = [b["error"] for b in blocks["compiled"] if "error" in b]
        return {"compiled_error": errors[0] if errors else "no round where minigrad and torch.compile both ran"}
    first, later = blocks["compiled"][0], [b for b in blocks["compiled"][1:] if "error" not in b]
    ratios = [m["median_step_ms"] / c["median_step_ms"] for m, c in pairs]
    return {"compiled_rounds": len(pairs), "compiled_ratios": ratios, "compiled_ratio": statistics.median(ratios),
            "compiled_median_step_ms": statistics.median(c["median_step_ms"] for _, c in pairs),
            "compiled_median_step_cpu_ms": statistics.median(c["median_step_cpu_ms"] for _, c in pairs),
            # a size's first process compiles from scratch, the later ones find inductor's cache filled
            "compile_empty_cache_ms": None if "error" in first else first["first_step_ms"],
            "compile_cached_ms": statistics.median(b["first_step_ms"] for b in later) if later else None,
            "compiled_foreign": [c["foreign"] for _, c in pairs]}


def size_row(size, steps, skip, blocks):
    d, heads, layers, d_ff = size
    ok = [(m, t) for m, t in zip(blocks["minigrad"], blocks["torch"]) if "error" not in m and "error" not in t]
    ratios = [m["median_step_ms"] / t["median_step_ms"] for m, t in ok]
    row = {"d_model": d, "heads": heads, "layers": layers, "d_ff": d_ff, "steps": steps, "skipped": skip,
           "gflop": step_flops(d, layers, d_ff) / 1e9, "rounds": len(ok), "ratios": ratios,
           "errors": [b["error"] for bs in blocks.values() for b in bs if "error" in b]}
    if ok:
        for who, index in (("minigrad", 0), ("torch", 1)):
            for key in ("median_step_ms", "first_step_ms", "median_step_cpu_ms"):
                row[f"{who}_{key}"] = statistics.median(pair[index][key] for pair in ok)
        row["ratio"] = statistics.median(ratios)
        row["load_average"] = [b["load_average"] for pair in ok for b in pair]
        row["foreign"] = [b["foreign"] for pair in ok for b in pair]
    if "compiled" in blocks:
        row.update(compiled_columns(blocks))
    return row


def run_loaded(rounds=3, steps=40, skip=10, say=print, timeout=600):
    """At the default size: quiet two workers (auto), quiet one worker, and auto beside one busy
    process, alternating; {name: [block, ...]}."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from benchmark_load import BusyProcesses
    size, blocks = SIZES[0], {"quiet, two workers": [], "quiet, one worker": [], "one busy process beside it": []}
    for round_ in range(rounds):
        names = list(blocks) if round_ % 2 == 0 else list(blocks)[::-1]
        for name in names:
            setting = "1" if "one worker" in name else "auto"
            with BusyProcesses(1 if "busy" in name else 0, seconds=timeout):
                blocks[name].append(run_block(minigrad_command(size, steps, skip, setting), timeout))
        say(f"   round {round_ + 1}: " + ", ".join(f"{name} {_ms(b[-1])}" for name, b in blocks.items()))
    return blocks


def _ms(block):
    return block["error"] if "error" in block else f"{block['median_step_ms']:.1f} ms"


def loaded_summary(blocks):
    """Medians per setting and the loaded step over the quiet one-worker step (target <= 1.1x)."""
    medians = {name: statistics.median(b["median_step_ms"] for b in bs if "error" not in b)
               for name, bs in blocks.items() if any("error" not in b for b in bs)}
    one, busy = medians.get("quiet, one worker"), medians.get("one busy process beside it")
    return medians, (busy / one if one and busy else None)


# ---------------------------------------------------------------- the page and the plot
def render_page(rows, loaded, info, peaks, when, command, torch_version):
    """docs/benchmarks.md's text from the measured rows (nothing in it is typed by hand)."""
    measured, clock = peaks
    medians, loaded_ratio = loaded_summary(loaded) if loaded else ({}, None)
    lines = [
        "# Benchmarks: the training step beside PyTorch eager, by model size",
        "",
        f"Generated by `{command}` on {when:%Y-%m-%d %H:%M} UTC; do not edit by hand.",
        "",
        f"**Machine:** {info['cpu']}, {info['cores']} cores, {info['mhz'] or 0:.0f} MHz, "
        f"{' '.join(info['flags']) or 'no AVX'}; Python {info['python']}, numpy {info['numpy']} "
        f"({info['blas']}), numba {info['numba']}; PyTorch {torch_version}, 2 threads.",
        f"**Peak:** {measured:.0f} GFLOP/s measured (a 2048^3 float32 product on every core, numpy's BLAS)"
        + (f"; {clock:.0f} GFLOP/s from the clock (cores x MHz x 32 FLOP a cycle: two AVX2 FMA units)."
           if clock else "."),
        "",
        "Each size: fresh processes alternating minigrad (threads `auto`: the batch's two halves on two",
        "threads) and PyTorch eager (`examples/torch_step.py`: the same model, hand-written attention);",
        "warm = the median step after the first ones, cold = a process's first step; the ratio is",
        "minigrad / PyTorch per round, its median quoted. GFLOP/s: the step's matrix-product FLOPs over",
        "the warm step. Load: the 1-minute load average at each block's start; other: the share of the",
        "CPUs other processes used meanwhile (0 on a quiet machine).",
        "",
        "| d_model | heads | layers | d_ff | GFLOP a step | minigrad warm | PyTorch warm | ratio | per round |"
        " minigrad cold | PyTorch cold | minigrad GFLOP/s | PyTorch GFLOP/s | CPU a step, minigrad / PyTorch |"
        " rounds | load | other |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if not r["rounds"]:
            lines.append(f"| {r['d_model']} | {r['heads']} | {r['layers']} | {r['d_ff']} | {r['gflop']:.2f} | "
                         f"failed: {'; '.join(r['errors'])} |" + " |" * 11)
            continue
        m, t = r["minigrad_median_step_ms"], r["torch_median_step_ms"]
        lines.append(
            f"| {r['d_model']} | {r['heads']} | {r['layers']} | {r['d_ff']} | {r['gflop']:.2f} | {m:.1f} ms | "
            f"{t:.1f} ms | **{r['ratio']:.2f}x** | {' '.join(f'{x:.2f}' for x in r['ratios'])} | "
            f"{r['minigrad_first_step_ms']:.0f} ms | {r['torch_first_step_ms']:.0f} ms | "
            f"{r['gflop'] / m * 1e3:.0f} ({r['gflop'] / m * 1e3 / measured:.0%}) | "
            f"{r['gflop'] / t * 1e3:.0f} ({r['gflop'] / t * 1e3 / measured:.0%}) | "
            f"{r['minigrad_median_step_cpu_ms']:.0f} / {r['torch_median_step_cpu_ms']:.0f} ms | {r['rounds']} | "
            f"{min(r['load_average']):.1f}-{max(r['load_average']):.1f} | {max(r['foreign']):.2f} |")
    lines += compiled_table(rows)
    busiest = max((f for r in rows if r["rounds"] for f in r["foreign"] + r.get("compiled_foreign", [])),
                  default=0.0)
    if busiest > 0.1:
        lines += ["", f"**Not quiet:** other processes used up to {busiest:.0%} of the CPUs while these ran. "
                      "Wall-clock ratios then measure how each framework shares a busy machine (PyTorch's "
                      "threads wait for each other), not its speed, and the measured peak is a share of "
                      "the machine's; the CPU column (each process's own CPU time, a PyTorch thread's "
                      "waits included) is the steadier figure."]
    lines += ["", "![minigrad's step over PyTorch eager's, by model size](images/speed_by_size.png)", ""]
    if medians:
        lines += ["## Quiet and loaded, the default size", "",
                  "minigrad alone, alternating; a busy process (a pure-Python loop) leaves a step one core,",
                  "so the loaded step is held against the quiet one-worker step (`--blas-threads 1`).", "",
                  "| setting | step median | rounds | other |", "|---|---|---|---|"]
        for name, value in medians.items():
            done = [b for b in loaded[name] if "error" not in b]
            others = [b.get("foreign", 0.0) for b in done]
            lines.append(f"| {name} | {value:.1f} ms | {len(done)} | {min(others):.2f}-{max(others):.2f} |")
        if loaded_ratio is not None:
            lines += ["", f"Loaded over quiet one-worker: **{loaded_ratio:.2f}x** (target <= 1.1x: "
                          f"{'met' if loaded_ratio <= 1.1 else 'not met'})."]
    return "\n".join(lines) + "\n"


def compiled_table(rows):
    """The torch.compile section of the page: nothing when it was not run."""
    ran = [r for r in rows if "compiled_error" in r or "compiled_rounds" in r]
    if not ran:
        return []
    lines = ["", "## torch.compile beside them", "",
             "The same PyTorch step with its forward and loss through `torch.compile` (inductor; AOTAutograd",
             "compiles the backward), clip and Adam eager (`examples/torch_step.py --compile`), in the same",
             "rounds. Its first step holds the compilation and is kept out of the warm median: from scratch",
             "in a size's first round (inductor's cache folder starts empty), cached in the later ones.", "",
             "| d_model | torch.compile warm | minigrad / torch.compile | per round | compile, from scratch |"
             " compile, cached | CPU a step | rounds |", "|---|---|---|---|---|---|---|---|"]
    for r in ran:
        if "compiled_error" in r:
            lines.append(f"| {r['d_model']} | failed: {r['compiled_error']} |" + " |" * 6)
            continue
        scratch, cached = r["compile_empty_cache_ms"], r["compile_cached_ms"]
        lines.append(f"| {r['d_model']} | {r['compiled_median_step_ms']:.1f} ms | **{r['compiled_ratio']:.2f}x** | "
                     f"{' '.join(f'{x:.2f}' for x in r['compiled_ratios'])} | "
                     f"{f'{scratch / 1e3:.1f} s' if scratch else '-'} | {f'{cached / 1e3:.1f} s' if cached else '-'} | "
                     f"{r['compiled_median_step_cpu_ms']:.0f} ms | {r['compiled_rounds']} |")
    return lines


def write_plot(rows, path):
    """The ratio against d_model, one dot per round and the median line."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    done = [r for r in rows if r["rounds"]]
    fig, ax = plt.subplots(figsize=(5.5, 3.4), dpi=110)
    for r in done:
        ax.scatter([r["d_model"]] * len(r["ratios"]), r["ratios"], color="#9ab", s=14, zorder=2)
    ax.plot([r["d_model"] for r in done], [r["ratio"] for r in done], "o-", color="#26a", zorder=3,
            label="minigrad / PyTorch eager (median of rounds)")
    ax.axhline(1.0, color="#888", lw=0.8, ls="--")
    ax.set_xscale("log", base=2)
    ax.set_xticks([r["d_model"] for r in done], [f"{r['d_model']}\n{r['layers']}+{r['layers']}" for r in done])
    ax.set_xlabel("d_model, layers")
    ax.set_ylabel("step time ratio (lower: minigrad faster)")
    ax.set_ylim(0, max(1.2, max((max(r["ratios"]) for r in done), default=1) * 1.1))
    ax.legend(fontsize=8, loc="lower right")
    busiest = max((f for r in done for f in r.get("foreign", [])), default=0.0)
    if busiest > 0.1:                                       # the page says why; the figure must not mislead alone
        ax.set_title(f"a busy machine: other processes used up to {busiest:.0%} of the CPUs", fontsize=9)
    fig.tight_layout()
    _atomic(path, lambda tmp: fig.savefig(tmp, format="png"))
    plt.close(fig)


def _atomic(path, write):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".tmp")
    os.close(fd)
    try:
        write(tmp)
        os.chmod(tmp, 0o644)                                # mkstemp's 0600 is not a docs file's
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def write_text(path, text):
    def write(tmp):
        with open(tmp, "w") as f:
            f.write(text)
    _atomic(path, write)


def print_rows(rows, peaks, say=print):
    measured, clock = peaks
    say(f"peak: {measured:.0f} GFLOP/s measured (2048^3 SGEMM, every core)"
        + (f", {clock:.0f} from the clock" if clock else ""))
    say(f"{'d_model':>7} {'minigrad':>11} {'PyTorch':>11} {'ratio':>6}  per round            "
        f"{'mg cold':>8} {'pt cold':>8} {'mg GF/s':>8} {'pt GF/s':>8}  CPU mg / pt   load     other")
    for r in rows:
        if not r["rounds"]:
            say(f"{r['d_model']:>7} failed: {'; '.join(r['errors'])}")
            continue
        m, t = r["minigrad_median_step_ms"], r["torch_median_step_ms"]
        say(f"{r['d_model']:>7} {m:>8.1f} ms {t:>8.1f} ms {r['ratio']:>5.2f}x  "
            f"{' '.join(f'{x:.2f}' for x in r['ratios']):<20} {r['minigrad_first_step_ms']:>6.0f} ms "
            f"{r['torch_first_step_ms']:>6.0f} ms {r['gflop'] / m * 1e3:>8.0f} {r['gflop'] / t * 1e3:>8.0f}  "
            f"{r['minigrad_median_step_cpu_ms']:>5.0f} / {r['torch_median_step_cpu_ms']:<5.0f} "
            f"{min(r['load_average']):.1f}-{max(r['load_average']):.1f}  "
            f"{max(r['foreign'] + r.get('compiled_foreign', [])):.2f}")
    for r in rows:
        if "compiled_error" in r or "compiled_rounds" in r:
            say(f"{r['d_model']:>7} torch.compile: {compiled_text(r)}")


def compiled_text(r):
    """One line on torch.compile at one size: its warm step, minigrad over it, its compile time."""
    if "compiled_error" in r:
        return f"failed: {r['compiled_error']}"
    cached = r["compile_cached_ms"]
    return (f"{r['compiled_median_step_ms']:.1f} ms warm (CPU {r['compiled_median_step_cpu_ms']:.0f} ms), "
            f"minigrad / torch.compile {r['compiled_ratio']:.2f}x "
            f"(per round {' '.join(f'{x:.2f}' for x in r['compiled_ratios'])}); compile (first step) "
            + (f"{r['compile_empty_cache_ms'] / 1e3:.1f} s from scratch" if r["compile_empty_cache_ms"] else "")
            + (", " if r["compile_empty_cache_ms"] and cached else "")
            + (f"{cached / 1e3:.1f} s with the cache filled" if cached else ""))


def run_size_benchmark(torch_python, quick=False, write_docs=False, command="python examples/benchmark.py --sizes",
                       say=print, d_models=None, compiled=True, loaded=True):
    """The whole section: peak, sizes (those of ``d_models``, default all), torch.compile beside
    them (unless ``compiled`` is False), quiet and loaded (unless ``loaded`` is False); prints,
    and writes the page when asked."""
    probe = subprocess.run([torch_python, "-c", "import torch; print(torch.__version__)"],
                           capture_output=True, text=True)
    if probe.returncode:
        print(f"error: --torch-python {torch_python} cannot import torch", file=sys.stderr)
        raise SystemExit(2)
    torch_version = probe.stdout.strip()
    if compiled:
        why_not = has_torch_compile(torch_python)
        if why_not:
            say(f"torch.compile column left out: {why_not}")
            compiled = False
    info = machine()
    peaks = peak_gflops(info)
    say(f"\n== The step by model size, beside PyTorch eager {torch_version}"
        + (" and torch.compile (inductor) ==" if compiled else " =="))
    say(f"machine: {info['cpu']}, {info['cores']} cores, {' '.join(info['flags'])}; numpy {info['numpy']} "
        f"({info['blas']}), numba {info['numba']}; load average {os.getloadavg()[0]:.2f}")
    when = datetime.datetime.now(datetime.timezone.utc)
    sizes = [size for size in SIZES if d_models is None or size[0] in d_models]
    rows = run_sizes(torch_python, quick, sizes=sizes, say=say, compiled=compiled)
    print_rows(rows, peaks, say)
    if loaded:
        say("\n== Quiet and loaded, default size ==")
        loaded = run_loaded(rounds=2 if quick else 3, steps=20 if quick else 40, skip=5 if quick else 10, say=say)
        medians, ratio = loaded_summary(loaded)
        say("   " + ", ".join(f"{name} {value:.1f} ms" for name, value in medians.items()))
        if ratio is not None:
            say(f"   loaded / quiet one-worker: {ratio:.2f}x (target <= 1.1x)")
    else:
        loaded = {}
    if write_docs:
        write_text(DOCS_PAGE, render_page(rows, loaded, info, peaks, when, command, torch_version))
        write_plot(rows, PLOT)
        say(f"wrote {os.path.relpath(DOCS_PAGE, REPO)} and {os.path.relpath(PLOT, REPO)}")
    return rows, loaded


def _block_main(argv):
    """``--minigrad-block d heads layers d_ff steps skip setting``: one timing process."""
    d, heads, layers, d_ff, steps, skip = (int(x) for x in argv[:6])
    print("SUMMARY " + json.dumps(minigrad_steps(d, heads, layers, d_ff, steps, skip, argv[6])), flush=True)
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] != ["--minigrad-block"] or len(sys.argv) != 9:
        print("error: run python examples/benchmark.py --sizes --torch-python PATH (this file's own "
              "command line is --minigrad-block D HEADS LAYERS D_FF STEPS SKIPPED SETTING)", file=sys.stderr)
        sys.exit(2)
    sys.exit(_block_main(sys.argv[2:]))
