#!/usr/bin/env python
"""Stock gt4py dace backend vs. the inlining backend: run time, 2-D transients, optimization time.

    .venv/bin/python bench/bench.py [--quick] [--gpu] [--only NAME[,NAME...]] [--reps N]

See bench/README.md for what is measured and how.
"""

from __future__ import annotations

import argparse
import datetime
import functools
import gc
import json
import os
import pathlib
import platform
import statistics
import sys
import time
import traceback
import warnings
from collections import defaultdict
from typing import Any

# Hooks cannot be pickled into gt4py's build process pool; a session-lifetime cache makes
# every build really translate and compile (so `gt_auto_optimize` runs and is timed).
os.environ["GT4PY_BUILD_JOBS"] = "0"
os.environ["GT4PY_BUILD_CACHE_LIFETIME"] = "session"
os.environ.setdefault("GT4PY_BUILD_CACHE_DIR", f"/tmp/bench_cache_{os.getpid()}")
warnings.filterwarnings("ignore", message="Python is not running in optimized mode")

import numpy as np  # noqa: E402

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import cases as bench_cases  # noqa: E402

GOALS = {"target_time_ratio": 0.80, "target_2d_transients": 3, "opt_time_ratio": 1.15, "any_time_ratio": 1.02}
RTOL = 1e-12


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", flush=True)


# ---------------------------------------------------------------------------------------
# gt_auto_optimize timing: the translator calls `gtx_transformations.gt_auto_optimize(...)`
# as a module attribute, so replacing the attribute (in this process only) wraps every call.

OPT_TIMES: dict[str, list[float]] = defaultdict(list)
_COMPILING: list[str | None] = [None]  # label of the build whose first call is running


def install_opt_timer() -> None:
    from gt4py.next.program_processors.runners.dace import transformations as gtx_transformations

    original = gtx_transformations.gt_auto_optimize
    if getattr(original, "_bench_timed", False):
        return

    @functools.wraps(original)
    def timed(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            OPT_TIMES[_COMPILING[0] or "?"].append(time.perf_counter() - t0)

    timed._bench_timed = True  # type: ignore[attr-defined]
    gtx_transformations.gt_auto_optimize = timed


# ---------------------------------------------------------------------------------------
# devices and argument handling


def gpu_problem() -> str | None:
    """None when a GPU and cupy are usable, else why not."""
    try:
        import cupy as cp
    except Exception as e:  # noqa: BLE001
        return f"cupy cannot be imported ({type(e).__name__}: {e})"
    try:
        if cp.cuda.runtime.getDeviceCount() < 1:
            return "no CUDA device"
    except Exception as e:  # noqa: BLE001
        return f"no usable CUDA device ({type(e).__name__}: {e})"
    return None


def is_field(v: Any) -> bool:
    return hasattr(v, "ndarray") and hasattr(v, "domain")


def to_device(args: dict, offset_provider: dict) -> tuple[dict, dict]:
    import cupy as cp
    import gt4py.next as gtx

    args = {k: gtx.as_field(v.domain, cp.asarray(v.asnumpy())) if is_field(v) else v for k, v in args.items()}
    offset_provider = {
        k: gtx.as_connectivity(v.domain, v.codomain, cp.asarray(v.asnumpy())) if is_field(v) else v
        for k, v in offset_provider.items()
    }
    return args, offset_provider


def fresh_copy(args: dict) -> dict:
    """New buffers for every field (outputs are written in place, some are also inputs)."""
    import gt4py.next as gtx

    return {k: gtx.as_field(v.domain, v.ndarray.copy()) if is_field(v) else v for k, v in args.items()}


def make_sync(gpu: bool):
    if not gpu:
        return lambda: None
    import cupy as cp

    return cp.cuda.runtime.deviceSynchronize


def symbol_values(args: dict) -> dict[str, Any]:
    """Values of the SDFG symbols gt4py derives from the call arguments:
    `__<arg>_<Dim>_range_0/1` (start/stop), `__<arg>_<Dim>_stride`, and scalar arguments."""
    values: dict[str, Any] = {}
    for name, v in args.items():
        if is_field(v):
            item = v.ndarray.itemsize
            for i, (dim, rng) in enumerate(zip(v.domain.dims, v.domain.ranges)):
                values[f"__{name}_{dim.value}_range_0"] = int(rng.start)
                values[f"__{name}_{dim.value}_range_1"] = int(rng.stop)
                values[f"__{name}_{dim.value}_stride"] = int(v.ndarray.strides[i] // item)
        elif isinstance(v, (bool, np.bool_)):
            values[name] = int(v)
        elif isinstance(v, (int, float, np.number)):
            values[name] = v.item() if isinstance(v, np.number) else v
    return values


def transient_bytes(sdfg, names: list[str], values: dict, fallback_elems: int) -> tuple[int, bool]:
    """Total bytes of the named arrays: `total_size` evaluated with `values`; where symbols
    remain, `fallback_elems` elements (horizontal size x levels) of the array's dtype.
    Returns (bytes, every size was evaluated exactly)."""
    import sympy

    total, exact = 0, True
    for n in names:
        desc = sdfg.arrays[n]
        size = sympy.sympify(desc.total_size)
        size = size.subs({s: values[str(s)] for s in size.free_symbols if str(s) in values})
        if size.free_symbols:
            exact = False
            elems = fallback_elems
        else:
            elems = int(size)
        total += elems * desc.dtype.bytes
    return total, exact


# ---------------------------------------------------------------------------------------
# one case


def run_case(case: bench_cases.Case, *, quick: bool, gpu: bool, reps: int) -> dict:
    from gt4py_dace_xforms.integration.compare import inline_build, stock_build, two_d_transients

    sizes = case.sizes(quick)
    row: dict[str, Any] = {"program": case.name, "what": case.what, "sizes": sizes, "status": "ok", "reps": reps}
    stage = "setup"
    try:
        program = case.program()
        outputs = bench_cases.outputs_of(case)
        stage = "inputs"
        args, offset_provider = case.make_inputs(sizes, 0)
        if gpu:
            args, offset_provider = to_device(args, offset_provider)
        row["offsets"] = sorted(offset_provider)
        sync = make_sync(gpu)
        builds = {"stock": stock_build(gpu=gpu), "inlined": inline_build(gpu=gpu)}
        callers = {label: program.with_backend(b.backend) for label, b in builds.items()}
        labels = {label: f"{case.name}/{label}" for label in builds}

        def call(label: str, a: dict) -> float:
            sync()
            t0 = time.perf_counter()
            callers[label](**a, offset_provider=offset_provider)
            sync()
            return time.perf_counter() - t0

        # first call = translation + gt_auto_optimize + C++ compile + run; its outputs are compared
        results = {}
        for label in builds:
            stage = f"compile/first call ({label})"
            log(f"{case.name}: compiling {label} ...")
            a = fresh_copy(args)
            _COMPILING[0] = labels[label]
            try:
                row[f"first_call_s_{label}"] = call(label, a)
            finally:
                _COMPILING[0] = None
            results[label] = {k: a[k].asnumpy() for k in outputs}
            opt = OPT_TIMES.get(labels[label], [])
            log(
                f"{case.name}: {label} first call {row[f'first_call_s_{label}']:.1f} s"
                f" (gt_auto_optimize {sum(opt):.1f} s in {len(opt)} call(s))"
            )
            del a

        stage = "compare"
        max_diff, close, per_output = 0.0, True, {}
        for k in outputs:
            s, i = results["stock"][k].astype(np.float64), results["inlined"][k].astype(np.float64)
            d = float(np.max(np.abs(i - s))) if s.size else 0.0
            scale = float(np.max(np.abs(s))) if s.size else 0.0
            # atol scaled to the field: rounding differences at values near zero still pass
            ok = bool(np.allclose(i, s, rtol=RTOL, atol=RTOL * scale, equal_nan=True))
            per_output[k] = {"max_abs_diff": d, "max_abs_stock": scale, "allclose": ok,
                             "bitwise_equal": bool(np.array_equal(i, s, equal_nan=True))}  # fmt: skip
            max_diff, close = max(max_diff, d), close and ok
        row.update(max_abs_diff=max_diff, allclose=close, outputs=per_output)
        if not close:
            row["status"] = "MISMATCH: " + ", ".join(k for k, v in per_output.items() if not v["allclose"])
        del results

        stage = "SDFG inspection"
        values = symbol_values(args)
        fallback = sizes[case.horizontal] * sizes["K"]
        exact_all = True
        for label, b in builds.items():
            names = two_d_transients(b.sdfg)
            nbytes, exact = transient_bytes(b.sdfg, names, values, fallback)
            exact_all &= exact
            row[f"transients_{label}"] = len(names)
            row[f"transient_names_{label}"] = names
            row[f"transient_bytes_{label}"] = nbytes
            opt = OPT_TIMES.get(labels[label], [])
            row[f"opt_s_{label}"] = sum(opt)
            row[f"opt_calls_{label}"] = len(opt)
        row["transient_bytes_exact"] = exact_all
        rep = builds["inlined"].report
        row["inline_applied"], row["inline_declined"], row["inline_copies"] = (
            len(rep.applied), len(rep.declined), rep.copies)  # fmt: skip
        row["opt_ratio"] = row["opt_s_inlined"] / row["opt_s_stock"] if row["opt_s_stock"] else None

        stage = "timing"
        for label in builds:  # untimed warm-up of the compiled program
            call(label, fresh_copy(args))
        times: dict[str, list[float]] = {label: [] for label in builds}
        order = list(builds)
        log(f"{case.name}: timing {reps} interleaved calls each ...")
        for r in range(reps):
            for label in order if r % 2 == 0 else order[::-1]:
                a = fresh_copy(args)  # allocated outside the timed region
                times[label].append(call(label, a))
                del a
        for label in builds:
            row[f"median_ms_{label}"] = 1e3 * statistics.median(times[label])
            row[f"min_ms_{label}"] = 1e3 * min(times[label])
            row[f"times_ms_{label}"] = [round(1e3 * t, 4) for t in times[label]]
        row["time_ratio"] = row["median_ms_inlined"] / row["median_ms_stock"]
        log(
            f"{case.name}: stock {row['median_ms_stock']:.3f} ms, inlined {row['median_ms_inlined']:.3f} ms,"
            f" ratio {row['time_ratio']:.3f}"
        )
    except Exception as e:  # noqa: BLE001
        row["status"] = f"FAILED at {stage}: {type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
        row["traceback"] = traceback.format_exc()
        log(f"{case.name}: {row['status']}")
        print(row["traceback"], file=sys.stderr, flush=True)
    finally:
        _COMPILING[0] = None
        gc.collect()
    return row


# ---------------------------------------------------------------------------------------
# output


def _fmt(v: Any, spec: str) -> str:
    return "-" if v is None else format(v, spec)


def table(rows: list[dict]) -> str:
    head = (
        "program", "stock ms", "inlined ms", "ratio", "reads/copies", "2-D tr st/inl", "2-D MB st/inl",
        "opt s st/inl", "opt ratio", "max|diff|", "status",
    )  # fmt: skip
    lines = []
    for r in rows:
        mb = lambda k: _fmt(r.get(k) and r[k] / 2**20, ".1f") if k in r else "-"  # noqa: E731
        lines.append(
            (
                r["program"],
                _fmt(r.get("median_ms_stock"), ".3f"),
                _fmt(r.get("median_ms_inlined"), ".3f"),
                _fmt(r.get("time_ratio"), ".3f"),
                f"{r.get('inline_applied', '-')}/{r.get('inline_copies', '-')}",
                f"{r.get('transients_stock', '-')}/{r.get('transients_inlined', '-')}",
                f"{mb('transient_bytes_stock')}/{mb('transient_bytes_inlined')}"
                + ("" if r.get("transient_bytes_exact", True) else "*"),
                f"{_fmt(r.get('opt_s_stock'), '.1f')}/{_fmt(r.get('opt_s_inlined'), '.1f')}",
                _fmt(r.get("opt_ratio"), ".3f"),
                _fmt(r.get("max_abs_diff"), ".1e"),
                r["status"],
            )
        )
    widths = [max(len(str(x)) for x in col) for col in zip(head, *lines)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    out = [fmt.format(*head), fmt.format(*("-" * w for w in widths))] + [fmt.format(*line) for line in lines]
    if any(not r.get("transient_bytes_exact", True) for r in rows):
        out.append("* some sizes estimated as horizontal size x levels x dtype bytes")
    return "\n".join(out)


def goals(rows: list[dict]) -> list[tuple[str, bool | None, str]]:
    by = {r["program"]: r for r in rows}
    t = by.get("target", {})
    checks: list[tuple[str, bool | None, str]] = []

    def check(name: str, value: Any, ok: Any) -> None:
        checks.append((name, None if value is None else bool(ok), "n/a" if value is None else str(value)))

    tr = t.get("time_ratio")
    check(f"target time ratio <= {GOALS['target_time_ratio']}", tr and round(tr, 3), tr is not None and tr <= GOALS["target_time_ratio"])
    n = t.get("transients_inlined")
    check(f"target 2-D transients <= {GOALS['target_2d_transients']}", n, n is not None and n <= GOALS["target_2d_transients"])
    o = t.get("opt_ratio")
    check(f"target opt time ratio <= {GOALS['opt_time_ratio']}", o and round(o, 3), o is not None and o <= GOALS["opt_time_ratio"])
    timed = [r for r in rows if r.get("time_ratio") is not None]
    worst = max(timed, key=lambda r: r["time_ratio"], default=None)
    check(
        f"no program slower than {GOALS['any_time_ratio']}x",
        worst and f"worst {worst['program']} {worst['time_ratio']:.3f}",
        worst is not None and worst["time_ratio"] <= GOALS["any_time_ratio"],
    )
    ok_all = all(r["status"] == "ok" for r in rows)
    checks.append(("all programs compiled, ran and matched stock", ok_all, f"{sum(r['status'] == 'ok' for r in rows)}/{len(rows)}"))
    return checks


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--gpu", action="store_true", help="GPU builds (skipped with a message without a GPU/cupy)")
    p.add_argument("--quick", action="store_true", help="small sizes and few repetitions (smoke check)")
    p.add_argument("--only", default="", help="comma-separated program names: " + ", ".join(c.name for c in bench_cases.CASES))
    p.add_argument("--reps", type=int, default=None, help="timed calls per build (default 20, --quick 3)")
    p.add_argument(
        "--threads", type=int, default=1,
        help="OMP_NUM_THREADS for the compiled programs (default 1: stable timings on a shared machine;"
        " 0 keeps the environment's setting / OpenMP's default)",
    )  # fmt: skip
    p.add_argument("--json", default=str(HERE / "results.json"), help="where to write the results (default bench/results.json)")
    opts = p.parse_args(argv)

    selected = bench_cases.CASES
    if opts.only:
        wanted = [w.strip() for w in opts.only.split(",") if w.strip()]
        unknown = [w for w in wanted if w not in {c.name for c in selected}]
        if unknown:
            p.error(f"unknown program(s) {unknown}; choose from {[c.name for c in selected]}")
        selected = [c for c in selected if c.name in wanted]
    reps = opts.reps or (3 if opts.quick else 20)

    if opts.gpu:
        problem = gpu_problem()
        if problem:
            print(f"bench: --gpu skipped: {problem}", flush=True)
            return 0

    if opts.threads > 0:  # before the first compiled program loads the OpenMP runtime
        os.environ["OMP_NUM_THREADS"] = str(opts.threads)
    install_opt_timer()
    import icon4py_target

    if not icon4py_target.available():
        log("icon4py is not installed: icon4py programs will fail")

    t_start = time.perf_counter()
    log(f"{len(selected)} program(s), {'GPU' if opts.gpu else 'CPU'}, {'quick' if opts.quick else 'full'} sizes, {reps} reps,"
        f" OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', '(unset)')}")
    rows = []
    for case in selected:
        log(f"== {case.name}: {case.what}, sizes {case.sizes(opts.quick)}")
        t0 = time.perf_counter()
        row = run_case(case, quick=opts.quick, gpu=opts.gpu, reps=reps)
        row["case_wall_s"] = time.perf_counter() - t0
        rows.append(row)
    wall = time.perf_counter() - t_start

    text = table(rows)
    checks = goals(rows)
    print("\n" + text, flush=True)
    print("\ngoals:")
    for name, ok, value in checks:
        print(f"  [{'n/a ' if ok is None else 'PASS' if ok else 'FAIL'}] {name}: {value}")
    print(f"\ntotal wall time {wall:.0f} s", flush=True)

    meta = {
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "host": platform.node(), "python": platform.python_version(), "cpus": os.cpu_count(),
        "device": "gpu" if opts.gpu else "cpu", "quick": opts.quick, "reps": reps, "rtol": RTOL,
        "wall_s": wall, "argv": sys.argv[1:], "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
    }  # fmt: skip
    try:
        import dace
        import gt4py

        meta.update(gt4py=gt4py.__version__, dace=dace.__version__)
    except Exception:  # noqa: BLE001
        pass
    doc = {"meta": meta, "goals": GOALS, "checks": [list(c) for c in checks], "table": text, "rows": rows}
    pathlib.Path(opts.json).write_text(json.dumps(doc, indent=1, default=str) + "\n")
    log(f"results written to {opts.json}")
    return 0 if all(r["status"] == "ok" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
