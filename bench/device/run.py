#!/usr/bin/env python3
"""The prepared GPU run: gt4py's stock dace GPU backend vs the library's, on the GPU.

    python3 bench/device/run.py --out "$OUT"      # on the GPU machine, as is (see README.md)
    python3 bench/device/run.py --dry-run         # here: installs, imports, generates GPU code

Stage 1 (standard library only) installs every wheel in .whl/ (`make device-wheels`) with
`pip install --no-index --no-deps --target .build/device/site`, then runs the script again
with that folder first on PYTHONPATH and its bin/ (cmake, ninja) first on PATH. Stage 2
checks that the installed distributions' requirements are met, then, for each program
(bench/cases.py: `seed`, `target`, `three_level`), builds

    stock      gt4py's dace GPU backend (`compare.stock_build(gpu=True)`)
    library    the library's GPU backend, GPU cost model (`compare.inline_build(gpu=True)`)
    stock_aa   a second stock backend: the noise floor (A/A)
    sound      the library with `InlineWhereSound()` (afterwards, while time is left)

compares every output with stock's, and times the builds of a program together: each round
every build is called once, on fresh device copies of the same input field objects (copies
made outside the timed region), in alternating order, with the device synchronized before
and after each call. Writes device_results.json and device_results.txt to --out. A build
is only started while its estimated time fits the budget (--budget-s, default 420 s of the
8 minutes), so the run ends in time with what it measured.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import pathlib
import platform
import shutil
import statistics
import subprocess
import sys
import time


HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]
STAGE_ENV = "XFORMS_DEVICE_STAGE2"
T0_ENV = "XFORMS_DEVICE_T0"

#: icon4py pins gt4py 1.2.1 and wants serialbox4py (I/O only); it runs with gt4py 1.2.3
#: and without serialbox, as the Makefile installs it (--no-deps).
ALLOWED_UNMET = {
    ("icon4py-common", "gt4py"),
    ("icon4py-atmosphere-dycore", "gt4py"),
    ("icon4py-common", "serialbox4py"),
}

DEFAULT_CASES = ("seed", "target", "three_level")
#: seconds a first call (translate + optimize + compile + run) is assumed to take before one
#: build of the program was measured; afterwards the slowest measured one is used
PRIOR_FIRST_CALL_S = {"target": 150.0}
PRIOR_DEFAULT_S = 60.0


def log(msg: str) -> None:
    print(f"[device {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--out", default=os.environ.get("OUT") or str(ROOT / ".build" / "device" / "results"),
                   help="folder for device_results.json/.txt (default: $OUT, else .build/device/results)")  # fmt: skip
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="install, import, generate GPU code for one program; no GPU needed",
    )
    p.add_argument(
        "--cpu",
        action="store_true",
        help="the same flow on the CPU (tests the script without a GPU)",
    )
    p.add_argument(
        "--quick", action="store_true", help="bench's small sizes (512 cells x 12 levels)"
    )
    p.add_argument(
        "--only", default=",".join(DEFAULT_CASES), help="comma-separated bench case names"
    )
    p.add_argument("--reps", type=int, default=100, help="timed rounds per program (default 100)")
    p.add_argument("--no-sound", action="store_true", help="skip the InlineWhereSound() builds")
    p.add_argument(
        "--budget-s",
        type=float,
        default=420.0,
        help="seconds from start after which no build starts",
    )
    p.add_argument(
        "--wheels", default=str(ROOT / ".whl"), help="the wheels to install (default .whl/)"
    )
    p.add_argument(
        "--site", default=str(ROOT / ".build" / "device" / "site"), help="where they are installed"
    )
    return p.parse_args(argv)


# ---------------------------------------------------------------------------------------
# stage 1: install from .whl/ only, then run again on the installed packages


def stage1(opts: argparse.Namespace, argv: list[str]) -> int:
    wheels, site = pathlib.Path(opts.wheels), pathlib.Path(opts.site)
    found = sorted(wheels.glob("*.whl")) if wheels.is_dir() else []
    if not found:
        print(
            f"device: error: no wheels in {wheels}; run `make device-wheels` first and carry .whl/",
            file=sys.stderr,
        )
        return 2
    if sys.version_info[:2] != (3, 12):
        print(
            f"device: error: Python 3.12 needed (the wheels' version), this is {platform.python_version()}",
            file=sys.stderr,
        )
        return 2
    shutil.rmtree(site, ignore_errors=True)
    t = time.perf_counter()
    # --no-compile: byte-compiling all of dace and gt4py takes longer than importing what is used
    cmd = [sys.executable, "-m", "pip", "install", "--disable-pip-version-check", "-q", "--no-index", "--no-deps", "--no-compile",
           "--target", str(site), *map(str, found)]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        print(proc.stdout[-3000:] + proc.stderr[-3000:], file=sys.stderr)
        print(f"device: error: installing the wheels from {wheels} failed", file=sys.stderr)
        return 2
    log(
        f"installed {len(found)} wheels from {wheels} into {site} in {time.perf_counter() - t:.1f} s"
    )
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(site), *filter(None, [env.get("PYTHONPATH")])])
    env["PATH"] = os.pathsep.join([str(site / "bin"), env.get("PATH", "")])
    env[STAGE_ENV] = "1"
    sys.stdout.flush()
    return subprocess.run([sys.executable, __file__, *argv], env=env).returncode


# ---------------------------------------------------------------------------------------
# stage 2


def unmet_requirements(site: pathlib.Path) -> list[str]:
    """Requirements of the distributions installed in `site` that nothing on sys.path meets."""
    from importlib import metadata

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    problems = []
    for dist in metadata.distributions(path=[str(site)]):
        owner = canonicalize_name(dist.metadata["Name"])
        for text in dist.requires or []:
            req = Requirement(text)
            if req.marker is not None and not req.marker.evaluate({"extra": ""}):
                continue
            if (owner, canonicalize_name(req.name)) in ALLOWED_UNMET:
                continue
            try:
                version = metadata.version(req.name)
            except metadata.PackageNotFoundError:
                problems.append(f"{owner} needs {req}: not installed")
                continue
            if not req.specifier.contains(version, prereleases=True):
                problems.append(f"{owner} needs {req}: found {version}")
    return problems


def check_installed(site: pathlib.Path) -> dict:
    """The stack imports from `site` and cmake runs; returns versions."""
    problems = unmet_requirements(site)
    if problems:
        raise SystemExit("device: error: unmet requirements:\n  " + "\n  ".join(problems))
    import cases as bench_cases
    import dace
    import gt4py

    import gt4py_dace_xforms

    next(c for c in bench_cases.CASES if c.name == "target").program()  # icon4py imports
    for mod in (dace, gt4py, gt4py_dace_xforms):
        if not pathlib.Path(mod.__file__).resolve().is_relative_to(site.resolve()):
            raise SystemExit(
                f"device: error: {mod.__name__} imported from {mod.__file__}, not from {site}"
            )
    # the GPU time is rare: never measure a wheel built from other code than this tree's
    installed, tree = site / "gt4py_dace_xforms", ROOT / "gt4py_dace_xforms"
    stale = sorted(
        str(f.relative_to(tree)) for f in tree.rglob("*.py")
        if not (installed / f.relative_to(tree)).is_file() or (installed / f.relative_to(tree)).read_bytes() != f.read_bytes()
    )  # fmt: skip
    if stale:
        raise SystemExit(f"device: error: the gt4py_dace_xforms wheel differs from this tree ({', '.join(stale[:5])}):"
                         " run `make device-wheels` again")  # fmt: skip
    cmake = shutil.which("cmake")
    if cmake is None:
        raise SystemExit(
            "device: error: no cmake on PATH (the cmake wheel installs one into site/bin)"
        )
    cmake_version = subprocess.run(
        [cmake, "--version"], capture_output=True, text=True, check=True
    ).stdout.split("\n")[0]
    versions = {"gt4py": gt4py.__version__, "dace": dace.__version__, "gt4py_dace_xforms": gt4py_dace_xforms.__version__,
                "cmake": f"{cmake_version} ({cmake})"}  # fmt: skip
    log("installed stack: " + ", ".join(f"{k} {v}" for k, v in versions.items()))
    return versions


def dry_run(opts: argparse.Namespace) -> int:
    """What needs no GPU: the seed program through the library's GPU backend to CUDA code."""
    import cases as bench_cases

    from gt4py_dace_xforms.measure import cuda_check
    from gt4py_dace_xforms.tools.compare import inline_build

    case = next(c for c in bench_cases.CASES if c.name == "seed")
    args, offset_provider = case.make_inputs(case.sizes(quick=True), 0)
    build = inline_build(gpu=True)
    t = time.perf_counter()
    sdfg = cuda_check.translate(build.backend, case.program(), args, offset_provider)
    code = cuda_check.generate(sdfg, ROOT / ".build" / "device" / "dry_run_code")
    log(f"seed: GPU code generated in {time.perf_counter() - t:.1f} s: {len(build.report.applied)} inlined,"
        f" {code.kernels()} kernel(s), files {[f.name for f in code.files]}")  # fmt: skip
    plan = [c for c in opts.only.split(",") if c]
    log(f"on a GPU this would run {plan} (stock, library, stock_aa{'' if opts.no_sound else ', sound'}),"
        f" {opts.reps} rounds, budget {opts.budget_s:.0f} s")  # fmt: skip
    log("dry run: OK")
    return 0


def preflight_gpu() -> dict:
    """The GPU, cupy, nvcc and a host compiler; raises SystemExit with the first problem."""
    import bench

    if problem := bench.gpu_problem():
        raise SystemExit(f"device: error: {problem}")
    import cupy as cp

    if shutil.which("nvcc") is None:
        for candidate in (
            pathlib.Path("/usr/local/cuda/bin"),
            *sorted(pathlib.Path("/usr/local").glob("cuda-*/bin")),
        ):
            if (candidate / "nvcc").is_file():
                os.environ["PATH"] = f"{os.environ['PATH']}{os.pathsep}{candidate}"
                break
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        raise SystemExit("device: error: no nvcc on PATH nor in /usr/local/cuda*/bin")
    if shutil.which(os.environ.get("CXX", "c++")) is None:
        raise SystemExit("device: error: no host C++ compiler (c++ / $CXX)")
    # nvcc with this host compiler, before CMake buries a mismatch in its configure log
    smoke = ROOT / ".build" / "device" / "smoke"
    smoke.mkdir(parents=True, exist_ok=True)
    (smoke / "k.cu").write_text("__global__ void k(double* a) { a[threadIdx.x] += 1.0; }\n")
    proc = subprocess.run(
        [nvcc, "-c", "-std=c++20", str(smoke / "k.cu"), "-o", str(smoke / "k.o")],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        raise SystemExit(
            f"device: error: nvcc cannot compile a kernel here:\n{(proc.stdout + proc.stderr)[-2000:]}"
        )
    props = cp.cuda.runtime.getDeviceProperties(0)
    info = {
        "gpu": props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"]),
        "compute_capability": f"{props['major']}{props['minor']}",
        "cupy": cp.__version__,
        "cuda_runtime": cp.cuda.runtime.runtimeGetVersion(),
        "driver": cp.cuda.runtime.driverGetVersion(),
        "nvcc": subprocess.run([nvcc, "--version"], capture_output=True, text=True)
        .stdout.strip()
        .split("\n")[-1],
    }
    log("GPU: " + ", ".join(f"{k} {v}" for k, v in info.items()))
    return info


class Budget:
    def __init__(self, seconds: float):
        self.deadline = float(os.environ.get(T0_ENV, time.time())) + seconds
        self.first_call: dict[str, float] = {}

    def left(self) -> float:
        return self.deadline - time.time()

    def estimate(self, case: str) -> float:
        return self.first_call.get(case, PRIOR_FIRST_CALL_S.get(case, PRIOR_DEFAULT_S))

    def fits_build(self, case: str) -> bool:
        return self.left() > self.estimate(case)

    def record(self, case: str, seconds: float) -> None:
        self.first_call[case] = max(seconds, self.first_call.get(case, 0.0))


def _stats(times_s: list[float]) -> dict:
    import numpy as np

    ms = np.asarray(times_s) * 1e3
    q25, q50, q75 = np.percentile(ms, [25, 50, 75])
    return {"median_ms": float(q50), "iqr_ms": [float(q25), float(q75)], "min_ms": float(ms.min()),
            "max_ms": float(ms.max()), "n": len(ms), "times_ms": [round(float(x), 4) for x in ms]}  # fmt: skip


def _compute_counts() -> dict[str, int]:
    from gt4py.next.instrumentation import metrics

    return {
        k: len(src.metrics[metrics.COMPUTE_METRIC].samples)
        for k, src in list(metrics.sources.items())
    }


def _new_compute_sample(before: dict[str, int]) -> float | None:
    from gt4py.next.instrumentation import metrics

    new = [k for k, n in _compute_counts().items() if n > before.get(k, 0)]
    return (
        metrics.sources[new[0]].metrics[metrics.COMPUTE_METRIC].samples[-1]
        if len(new) == 1
        else None
    )


class CaseRun:
    """One program: its inputs on the device, its builds, their outputs and timings."""

    def __init__(self, case, *, gpu: bool, quick: bool):
        import cases as bench_cases

        import bench

        self.case, self.gpu = case, gpu
        self.outputs = bench_cases.outputs_of(case)
        args, offset_provider = case.make_inputs(case.sizes(quick), 0)
        if gpu:
            args, offset_provider = bench.to_device(args, offset_provider)
        self.args, self.offset_provider = args, offset_provider
        self.sync = bench.make_sync(gpu)
        self.builds: dict = {}
        self.callers: dict = {}
        self.results: dict = {}
        self.rows: dict[str, dict] = {}

    def call(self, label: str, a: dict) -> float:
        self.sync()
        t0 = time.perf_counter()
        self.callers[label](**a, offset_provider=self.offset_provider)
        self.sync()
        return time.perf_counter() - t0

    def timed_call(self, label: str, a: dict) -> tuple[float, float | None]:
        """Wall time of one call, and the compute time gt4py's instrumentation measured
        inside the compiled program (None where it recorded none)."""
        before = _compute_counts()
        wall = self.call(label, a)
        return wall, _new_compute_sample(before)

    def add(self, label: str, build) -> dict:
        """Translate, compile and run `build` once (its first call), keep its outputs."""
        from gt4py_dace_xforms.tools.programs import copy_args

        row = self.rows.setdefault(label, {"build": label, "status": "ok"})
        self.builds[label] = build
        self.callers[label] = self.case.program().with_backend(build.backend)
        a = copy_args(self.args)
        row["first_call_s"] = self.call(label, a)
        self.results[label] = {k: a[k].asnumpy() for k in self.outputs}
        # False: gt4py's translation cache handed this build an earlier build's SDFG
        row["translated"] = bool(build.post_sdfgs)
        if hasattr(build, "report") and build.reports:
            row["inlined"] = len(build.report.applied)
        return row

    def compare(self, label: str) -> None:
        import bench

        row = self.rows[label]
        res = bench.compare_outputs(self.results[label], self.results["stock"])
        row.update(max_abs_diff=res["max_abs_diff"], allclose=res["allclose"],
                   bitwise_equal=all(v["bitwise_equal"] for v in res["outputs"].values()))  # fmt: skip
        if not res["allclose"]:
            row["status"] = "MISMATCH vs stock"

    def time(self, labels: list[str], reps: int, budget: Budget) -> int:
        """Interleaved timing of `labels`; returns the rounds done (fewer if time runs short)."""
        from gt4py_dace_xforms.tools.programs import copy_args

        for label in labels:  # untimed warm-up
            self.call(label, copy_args(self.args))
        times: dict[str, list[float]] = {label: [] for label in labels}
        compute: dict[str, list[float]] = {label: [] for label in labels}
        t_round = None
        done = 0
        for r in range(reps):
            if t_round is not None and budget.left() < 2 * t_round + 5:
                break
            t0 = time.perf_counter()
            for label in labels if r % 2 == 0 else labels[::-1]:
                a = copy_args(self.args)  # outside the timed region
                wall, inside = self.timed_call(label, a)
                times[label].append(wall)
                if inside is not None:
                    compute[label].append(inside)
                del a
            t_round = time.perf_counter() - t0
            done += 1
        stock = statistics.median(times["stock"])
        for label in labels:
            stats = {
                "with": labels,
                "ratio_vs_stock": statistics.median(times[label]) / stock,
                **_stats(times[label]),
            }
            if len(compute[label]) == len(times[label]) and len(compute["stock"]) == len(
                times["stock"]
            ):
                stats["compute"] = _stats(compute[label])
                stats["compute_ratio_vs_stock"] = statistics.median(
                    compute[label]
                ) / statistics.median(compute["stock"])
            else:
                log(f"{self.case.name}/{label}: gt4py recorded a compute time for {len(compute[label])} of"
                    f" {len(times[label])} calls: no compute column (GT4PY_COLLECT_METRICS_LEVEL < 10?)")  # fmt: skip
            self.rows[label].setdefault("timings", []).append(stats)
        return done


def make_builds(gpu: bool) -> dict:
    import gt4py_dace_xforms as gx
    from gt4py_dace_xforms.tools.compare import inline_build, stock_build

    return {
        "stock": lambda: stock_build(gpu=gpu),
        "library": lambda: inline_build(gpu=gpu),
        "stock_aa": lambda: stock_build(gpu=gpu),
        "sound": lambda: inline_build(gpu=gpu, policy=gx.InlineWhereSound()),
    }


def run_cases(opts: argparse.Namespace, budget: Budget) -> list[dict]:
    import traceback

    import cases as bench_cases

    gpu = not opts.cpu
    factories = make_builds(gpu)
    known = {c.name: c for c in bench_cases.CASES}
    wanted = [n for n in opts.only.split(",") if n]
    if bad := [n for n in wanted if n not in known]:
        raise SystemExit(f"device: error: unknown case(s) {bad}; known: {sorted(known)}")
    runs: dict[str, CaseRun] = {}
    rows: list[dict] = []

    def build_and_run(run: CaseRun, label: str) -> bool:
        name = run.case.name
        if not budget.fits_build(name):
            status = (
                f"skipped: {budget.left():.0f} s left, a build takes ~{budget.estimate(name):.0f} s"
            )
            run.rows[label] = {"build": label, "status": status}
            log(f"{name}/{label}: {run.rows[label]['status']}")
            return False
        log(f"{name}/{label}: translate, compile, first call ...")
        try:
            row = run.add(label, factories[label]())
        except Exception as e:  # noqa: BLE001  # reported, the other builds still run
            first_line = str(e).splitlines()[0][:300] if str(e) else ""
            run.rows[label] = {"build": label, "status": f"FAILED: {type(e).__name__}: {first_line}",
                               "traceback": traceback.format_exc()}  # fmt: skip
            log(f"{name}/{label}: {run.rows[label]['status']}")
            return False
        budget.record(name, row["first_call_s"])
        if label != "stock":
            run.compare(label)
        log(
            f"{name}/{label}: first call {row['first_call_s']:.1f} s, {row.get('inlined', '-')} inlined, {row['status']}"
        )
        return True

    # phase 1: stock, library and the A/A build of every program, timed together
    for name in wanted:
        try:
            run = runs[name] = CaseRun(known[name], gpu=gpu, quick=opts.quick)
        except Exception as e:  # noqa: BLE001
            rows.append(
                {
                    "program": name,
                    "build": "-",
                    "status": f"FAILED at inputs: {type(e).__name__}: {e}",
                }
            )
            continue
        if not build_and_run(run, "stock"):
            continue
        ready = ["stock"] + [
            label for label in ("library", "stock_aa") if build_and_run(run, label)
        ]
        if len(ready) > 1:
            n = run.time(ready, opts.reps, budget)
            log(f"{name}: timed {n} rounds of {ready}: " + ", ".join(
                f"{lbl} {run.rows[lbl]['timings'][-1]['ratio_vs_stock']:.3f}" for lbl in ready))  # fmt: skip
    # phase 2: everything sound, timed against stock again
    if not opts.no_sound:
        for name, run in runs.items():
            if "stock" in run.callers and build_and_run(run, "sound"):
                n = run.time(["stock", "sound"], opts.reps, budget)
                log(
                    f"{name}: timed {n} rounds of stock, sound: {run.rows['sound']['timings'][-1]['ratio_vs_stock']:.3f}"
                )
    for name, run in runs.items():
        for row in run.rows.values():
            rows.append({"program": name, "sizes": run.case.sizes(opts.quick), **row})
    return rows


def table(rows: list[dict]) -> str:
    head = ("program", "build", "inlined", "first call s", "median ms", "IQR ms", "min-max ms", "ratio",
            "compute ms", "compute ratio", "max|diff|", "equal", "status")  # fmt: skip
    lines = []
    for r in rows:
        for t in r.get("timings") or [None]:
            lines.append((
                r["program"], r["build"] + (f" (with {'+'.join(x for x in t['with'] if x != r['build'])})" if t else ""),
                str(r.get("inlined", "-")), f"{r['first_call_s']:.1f}" if "first_call_s" in r else "-",
                f"{t['median_ms']:.3f}" if t else "-", f"{t['iqr_ms'][0]:.3f}-{t['iqr_ms'][1]:.3f}" if t else "-",
                f"{t['min_ms']:.3f}-{t['max_ms']:.3f}" if t else "-", f"{t['ratio_vs_stock']:.3f}" if t else "-",
                f"{t['compute']['median_ms']:.3f}" if t and "compute" in t else "-",
                f"{t['compute_ratio_vs_stock']:.3f}" if t and "compute" in t else "-",
                f"{r['max_abs_diff']:.1e}" if "max_abs_diff" in r else "-",
                ("bitwise" if r.get("bitwise_equal") else "allclose" if r.get("allclose") else "NO") if "allclose" in r else "-",
                r["status"],
            ))  # fmt: skip
    widths = [max(len(x) for x in col) for col in zip(head, *lines)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    return "\n".join(
        [fmt.format(*head), fmt.format(*("-" * w for w in widths))]
        + [fmt.format(*ln) for ln in lines]
    )


def stage2(opts: argparse.Namespace) -> int:
    site = pathlib.Path(opts.site)
    sys.path.insert(0, str(ROOT / "bench"))
    # Before gt4py is imported (it reads its settings then; bench/cases.py imports it):
    # gt4py's instrumentation, the compute time measured inside each compiled program
    # (device synchronized there) besides the wall time around the Python call; and
    # bench's settings, a session build cache and no process pool (it cannot pickle hooks).
    os.environ.setdefault("GT4PY_COLLECT_METRICS_LEVEL", "10")
    import bench  # noqa: F401

    versions = check_installed(site)
    if opts.dry_run:
        return dry_run(opts)
    if opts.cpu:
        os.environ.setdefault("OMP_NUM_THREADS", "1")
    budget = Budget(opts.budget_s)
    meta = {"date": datetime.datetime.now().isoformat(timespec="seconds"), "host": platform.node(),
            "python": platform.python_version(), "cpus": os.cpu_count(), "device": "cpu" if opts.cpu else "gpu",
            "quick": opts.quick, "reps": opts.reps, "budget_s": opts.budget_s, "argv": sys.argv[1:], **versions}  # fmt: skip
    if not opts.cpu:
        meta.update(preflight_gpu())

    rows = run_cases(opts, budget)
    meta["wall_s"] = time.time() - float(os.environ.get(T0_ENV, time.time()))
    text = table(rows)
    print("\n" + text + f"\n\nwall time {meta['wall_s']:.0f} s", flush=True)
    out = pathlib.Path(opts.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "device_results.json").write_text(
        json.dumps({"meta": meta, "rows": rows}, indent=1, default=str) + "\n"
    )
    (out / "device_results.txt").write_text(json.dumps(meta, default=str) + "\n\n" + text + "\n")
    log(f"results written to {out}/device_results.json and .txt")
    return 0 if all(r["status"] == "ok" for r in rows) else 1


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    opts = parse(argv)
    if os.environ.get(STAGE_ENV) != "1":
        os.environ.setdefault(T0_ENV, str(time.time()))
        return stage1(opts, argv)
    return stage2(opts)


if __name__ == "__main__":
    sys.exit(main())
