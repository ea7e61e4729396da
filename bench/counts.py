"""`make counts`: instructions and simulated last-level misses of one call per build
(gt4py_dace_xforms/measure/counts.py), next to the times of `make bench`.

For each bench program: stock, the library's default build, everything sound and (with
`--windows`) the library with vertical windows, each compiled natively (gt4py's flags less
AVX-512), called once on the bench inputs, the call replayed under callgrind with a
server-CPU cache and with a GPU-like last level. Ratios to stock; the counts are exact,
so a 1 % change is a change. Only the default memory mode: with persistent transients the
same code runs and only the allocation calls leave the count (a few instructions).

    python bench/counts.py [--only seed,three_level] [--quick] [--windows] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import shutil
import sys
import tempfile
import time
import warnings

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
os.environ["GT4PY_BUILD_JOBS"] = "0"
os.environ["GT4PY_BUILD_CACHE_LIFETIME"] = "session"
os.environ.setdefault("GT4PY_BUILD_CACHE_DIR", f"/tmp/counts_cache_{os.getpid()}")
warnings.filterwarnings("ignore")

from gt4py_dace_xforms.measure import counts  # noqa: E402

os.environ["CXXFLAGS"] = counts.COUNT_CXXFLAGS  # read by gt4py when it compiles

import cases as bench_cases  # noqa: E402

#: The programs counted by default: the target and the oracle's four (issue 31), the demos.
DEFAULT = ("seed", "three_level", "exner_exfac", "apply_diffusion_to_vn", "diag_normal_wind",
           "predictor_w_adv", "target")


def builds(windows: bool) -> dict:
    import gt4py_dace_xforms as gx
    from gt4py_dace_xforms.tools.compare import inline_build, stock_build

    made = {"stock": stock_build(), "library": inline_build(), "sound": inline_build(policy=gx.InlineWhereSound())}
    if windows:
        made["windows"] = inline_build(windows=True)
    return made


def count_case(case, quick: bool, windows: bool, work: pathlib.Path) -> dict:
    sizes = case.sizes(quick)
    program = case.program()
    args, offsets = case.make_inputs(sizes, 0)
    row = {"program": case.name, "sizes": sizes, "builds": {}}
    for label, build in builds(windows).items():
        caller = program.with_backend(build.backend)
        fresh = {k: v for k, v in args.items()}
        t0 = time.perf_counter()
        caller(**fresh, offset_provider=offsets)  # compile and run once
        # the fields' and the neighbor tables' memory: their extents (`counts.capture_call`)
        buffers = [v.ndarray for v in [*fresh.values(), *offsets.values()] if hasattr(v, "ndarray")]
        folders = counts.capture_call(lambda: caller(**fresh, offset_provider=offsets), work / case.name / label, buffers)
        entry = {"compile_s": time.perf_counter() - t0, "calls": len(folders)}
        for cache in counts.CACHES:
            totals: dict = {}
            for folder in folders:
                for k, v in counts.count_call(folder, cache).events.items():
                    totals[k] = totals.get(k, 0) + v
            entry[cache] = totals
        row["builds"][label] = entry
        shutil.rmtree(work / case.name / label, ignore_errors=True)
        print(f"  {case.name} {label}: Ir {entry['cpu']['Ir']:,}, LL misses cpu {_ll(entry['cpu']):,} "
              f"gpu {_ll(entry['gpu']):,} ({time.perf_counter() - t0:.0f} s)", flush=True)
    return row


def _ll(events: dict) -> int:
    return events.get("DLmr", 0) + events.get("DLmw", 0) + events.get("ILmr", 0)


def table(rows: list[dict]) -> str:
    lines = ["program      build     instructions     /stock  LL miss cpu  /stock  LL miss gpu  /stock",
             "-----------  --------  ---------------  ------  -----------  ------  -----------  ------"]
    for row in rows:
        base = row["builds"]["stock"]
        for label, e in row["builds"].items():
            ir, cpu, gpu = e["cpu"]["Ir"], _ll(e["cpu"]), _ll(e["gpu"])
            lines.append(f"{row['program']:<11}  {label:<8}  {ir:>15,}  {ir / base['cpu']['Ir']:>6.3f}  "
                         f"{cpu:>11,}  {cpu / max(_ll(base['cpu']), 1):>6.3f}  {gpu:>11,}  "
                         f"{gpu / max(_ll(base['gpu']), 1):>6.3f}")
    lines.append("instructions: callgrind's Ir of the SDFG's program function, one thread; LL misses: data "
                 "read + write and instruction misses of the simulated last level (cpu: 32 MiB, 16-way, 64 B; "
                 "gpu: 48 MiB, 12-way, 128 B, the H200's L2), inputs evicted before the call")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--only", default=",".join(DEFAULT), help="comma-separated bench program names")
    p.add_argument("--quick", action="store_true", help="the bench's quick sizes (512 cells x 12 levels)")
    p.add_argument("--windows", action="store_true", help="also the library's build with vertical windows")
    p.add_argument("--json", default=str(HERE / "counts.json"))
    opts = p.parse_args(argv)
    if counts.valgrind() is None:
        print("counts: valgrind is not installed", file=sys.stderr)
        return 2
    wanted = [w.strip() for w in opts.only.split(",") if w.strip()]
    known = {c.name: c for c in bench_cases.CASES}
    unknown = [w for w in wanted if w not in known]
    if unknown:
        p.error(f"unknown program(s) {unknown}; choose from {sorted(known)}")
    rows = []
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="counts_calls_") as tmp:
        for name in wanted:
            print(f"== {name}", flush=True)
            try:
                rows.append(count_case(known[name], opts.quick, opts.windows, pathlib.Path(tmp)))
            except Exception as err:  # noqa: BLE001  # one broken program must not end the run
                print(f"  {name}: FAILED {type(err).__name__}: {err}", flush=True)
    print("\n" + table(rows))
    print(f"total {time.perf_counter() - start:.0f} s")
    pathlib.Path(opts.json).write_text(json.dumps(rows, indent=1))
    return 0 if len(rows) == len(wanted) else 1


if __name__ == "__main__":
    sys.exit(main())
