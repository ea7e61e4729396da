"""`make counts`: instructions and simulated last-level misses of one call per build
(gt4py_dace_xforms/measure/counts.py), next to the times of `make bench`.

For each bench program: stock, the library's default build (vertical windows where the cost
model takes them), everything sound and (with `--windows`) the library without windows and
with every window that applies, each compiled natively (gt4py's flags less
AVX-512), called once on the bench inputs, the call replayed under callgrind with a
server-CPU cache and with a GPU-like last level. Ratios to stock; the counts are exact,
so a 1 % change is a change. Only the default memory mode: with persistent transients the
same code runs and only the allocation calls leave the count (a few instructions).

    python bench/counts.py [--only seed,three_level] [--quick] [--windows] [--json out.json]
    python bench/counts.py --decisions [--only target]     # predicted vs counted per decision

Replays run on two workers while the next build compiles; builds whose generated code is
the same (`counts.code_hash`) are replayed once.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys
import tempfile
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from typing import Optional


HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
os.environ["GT4PY_BUILD_CACHE_LIFETIME"] = "session"
os.environ.setdefault("GT4PY_BUILD_CACHE_DIR", f"/tmp/counts_cache_{os.getpid()}")
warnings.filterwarnings("ignore")

import gt4py_dace_xforms as gx  # noqa: E402
from gt4py_dace_xforms.measure import counts  # noqa: E402
from gt4py_dace_xforms.policy import InlineOnly  # noqa: E402
from gt4py_dace_xforms.policy.cost_model import SWITCHES  # noqa: E402
from gt4py_dace_xforms.tools.compare import inline_build, stock_build  # noqa: E402
from gt4py_dace_xforms.tools.layouts import DEFAULT_LAYOUT, LAYOUTS  # noqa: E402
from gt4py_dace_xforms.tools.static import compile_static, plain, static_args  # noqa: E402


os.environ["CXXFLAGS"] = counts.COUNT_CXXFLAGS  # read by gt4py when it compiles

import cases as bench_cases  # noqa: E402


#: The programs counted by default: the target and the oracle's four (issue 31), the demos.
DEFAULT = (
    "seed",
    "three_level",
    "exner_exfac",
    "apply_diffusion_to_vn",
    "diag_normal_wind",
    "predictor_w_adv",
    "target",
)


def builds(windows: bool, without: tuple[str, ...] = (), with_: tuple[str, ...] = ()) -> dict:
    made = {
        "stock": stock_build(),
        "library": inline_build(),
        "sound": inline_build(policy=gx.InlineWhereSound()),
    }
    if windows:  # the library without windows, and with every window that applies
        made["no_windows"] = inline_build(windows=False)
        made["all_windows"] = inline_build(windows=True)
    for switch in without:  # the default build less one rewrite: what that rewrite changes
        made[f"no_{switch}"] = inline_build(policy=gx.CostModel("cpu", **{switch: False}))
    for switch in with_:  # the default build plus one rewrite that is off by default
        made[f"with_{switch}"] = inline_build(policy=gx.CostModel("cpu", **{switch: True}))
    return made


class Replays:
    """Replays captured calls under callgrind on a pool of two workers (the 2-core CI
    machine compiles the next build meanwhile). Builds whose generated code and inputs are
    those of an earlier build of the same program (`counts.code_hash`) are not replayed
    again: they share its counts."""

    def __init__(self, workers: int = 2):
        self.pool = ThreadPoolExecutor(max_workers=workers)
        self.by_code: dict = {}

    def submit(
        self, case: str, folders: list[pathlib.Path], label: str
    ) -> tuple[dict, Optional[str]]:
        """Futures of the summed events per cache of build `label`, and the label of the
        build they were first counted for (None: this one)."""
        key = (case, tuple(json.loads((f / "call.json").read_text())["code_hash"] for f in folders))
        if key in self.by_code:
            return self.by_code[key]
        jobs = {cache: self.pool.submit(_count_all, folders, cache) for cache in counts.CACHES}
        self.by_code[key] = (jobs, label)
        return jobs, None


def _count_all(folders: list[pathlib.Path], cache: str) -> dict:
    totals: dict = {}
    for folder in folders:
        for k, v in counts.count_call(folder, cache).events.items():
            totals[k] = totals.get(k, 0) + v
    return totals


def capture_build(
    case_name: str,
    label: str,
    program,
    build,
    args: dict,
    offsets: dict,
    work: pathlib.Path,
    replays: Replays,
    static: Optional[dict] = None,
) -> dict:
    """Compile and run `build` once, capture one call, submit its replays; the row entry
    (its "cpu"/"gpu" values are futures until `resolve`). `static`: compiled with these
    arguments as constants, as icon4py's `setup_program` builds (`tools.static`)."""
    folder = work / _folder(case_name) / label
    compile_s, folders = run_and_capture(program, build, args, offsets, folder, static)
    jobs, same_as = replays.submit(case_name, folders, label)
    entry = {"compile_s": compile_s, "calls": len(folders), **jobs}
    if same_as is not None:
        entry["same_code_as"] = same_as
    print(
        f"  {case_name} {label}: built and captured in {compile_s:.0f} s"
        f"{f' (the code of {same_as}: counted once)' if same_as else ''}",
        flush=True,
    )
    return entry


def _folder(case_name: str) -> str:
    return case_name.replace(" ", "_").replace("[", "").replace("]", "")


def run_and_capture(
    program, build, args: dict, offsets: dict, folder: pathlib.Path, static: Optional[dict] = None
) -> tuple[float, list]:
    """Compile and run `build` once (seconds), then capture one call into `folder`."""
    t0 = time.perf_counter()
    caller = (
        compile_static(program, build.backend, static, offsets)
        if static
        else program.with_backend(build.backend)
    )
    caller(**args, offset_provider=offsets)  # compile and run once
    compile_s = time.perf_counter() - t0
    # the fields' and the neighbor tables' memory: their extents (`counts.capture_call`)
    buffers = [v.ndarray for v in [*args.values(), *offsets.values()] if hasattr(v, "ndarray")]
    return compile_s, counts.capture_call(
        lambda: caller(**args, offset_provider=offsets), folder, buffers
    )


def resolve(row: dict) -> dict:
    for label, entry in row["builds"].items():
        for cache in counts.CACHES:
            entry[cache] = entry[cache].result()
        print(
            f"  {row['program']} {label}: Ir {entry['cpu']['Ir']:,}, LL misses cpu {_ll(entry['cpu']):,} "
            f"gpu {_ll(entry['gpu']):,}",
            flush=True,
        )
    return row


def count_case(
    case,
    quick: bool,
    windows: bool,
    work: pathlib.Path,
    replays: Replays,
    static: bool = False,
    without: tuple[str, ...] = (),
    with_: tuple[str, ...] = (),
    layout: Optional[str] = None,
) -> dict:
    """One program's row; `static`: every build compiled with the call's integer and
    boolean arguments as constants (the row is named `NAME [static]`); `layout`: the
    bounds and neighbor tables of that layout (`tools.layouts`; None: global, random)."""
    sizes = case.sizes(quick)
    program = case.program()
    args, offsets = case.inputs(sizes, 0, layout)
    values = static_args(args) if static else None
    name = case.name + (" [static]" if static else "")
    row = {"program": name, "sizes": sizes, "builds": {}, "layout": layout}
    if static:
        row["static"] = plain(values)
    for label, build in builds(windows, without, with_).items():
        row["builds"][label] = capture_build(
            name, label, program, build, args, offsets, work, replays, values
        )
    return row


def _ll(events: dict) -> int:
    return events.get("DLmr", 0) + events.get("DLmw", 0) + events.get("ILmr", 0)


def table(rows: list[dict]) -> str:
    w = max([len(r["program"]) for r in rows] + [7])
    b = max([len(label) for r in rows for label in r["builds"]] + [11])
    lines = [
        f"layout: {', '.join(sorted({str(r.get('layout') or 'none') for r in rows}))} (tools/layouts.py)",
        f"{'program':<{w}}  {'build':<{b}}  instructions     /stock  LL miss cpu  /stock  LL miss gpu  /stock",
        f"{'-' * w}  {'-' * b}  ---------------  ------  -----------  ------  -----------  ------",
    ]
    for row in rows:
        base = row["builds"]["stock"]
        for label, e in row["builds"].items():
            ir, cpu, gpu = e["cpu"]["Ir"], _ll(e["cpu"]), _ll(e["gpu"])
            lines.append(
                f"{row['program']:<{w}}  {label:<{b}}  {ir:>15,}  {ir / base['cpu']['Ir']:>6.3f}  "
                f"{cpu:>11,}  {cpu / max(_ll(base['cpu']), 1):>6.3f}  {gpu:>11,}  "
                f"{gpu / max(_ll(base['gpu']), 1):>6.3f}"
            )
    lines.append(
        "instructions: callgrind's Ir of the SDFG's program function, one thread; LL misses: data "
        "read + write and instruction misses of the simulated last level (cpu: 32 MiB, 16-way, 64 B; "
        "gpu: 48 MiB, 12-way, 128 B, the H200's L2), inputs evicted before the call"
    )
    return "\n".join(lines)


# --- predicted vs counted, per decision (issue 31, part 2) ------------------------------

#: The target and the oracle's four programs.
DECISION_PROGRAMS = (
    "target",
    "exner_exfac",
    "apply_diffusion_to_vn",
    "diag_normal_wind",
    "predictor_w_adv",
)


def predicted_figures(
    program, offsets, sizes: dict, static: Optional[dict] = None
) -> tuple[dict, frozenset]:
    """The CPU cost model's figures per intermediate on the SDFG at the first
    `TopLevelDataFlowStep` (as the oracle and the census predict), its symbols valued as
    in the counted call (`sizes`, else the model would assume 80 per unknown extent), and
    the intermediates everything sound inlines there. `static`: lowered with these
    arguments as constants (where the model's sizes are constants already)."""
    import copy

    from gt4py.next.program_processors.runners.dace.transformations.auto_optimize import (
        GT4PyAutoOptHook,
    )

    from gt4py_dace_xforms.integration import capture
    from gt4py_dace_xforms.transformations.inline_fusion_pass import gt_inline_intermediates

    step = (GT4PyAutoOptHook.TopLevelDataFlowStep, 1)
    sdfg = capture.capture_stages(program, [step], offset_provider=offsets, static_args=static)[
        step
    ]
    sound = gt_inline_intermediates(
        copy.deepcopy(sdfg), policy=gx.InlineWhereSound(), validate=False
    )
    known = tuple(sorted(sizes.items()))
    model = gt_inline_intermediates(
        copy.deepcopy(sdfg),
        validate=False,
        policy=gx.CostModel("cpu", windows=False, representative_sizes=known),
    )
    # The same model without its hard limits: the estimate of what a limit declined
    # unpriced (a concat left to gt4py, a nested read, too many offsets), for the table.
    priced = gt_inline_intermediates(
        copy.deepcopy(sdfg),
        validate=False,
        policy=Unlimited(
            "cpu", windows=False, writeback_max_offsets=99, representative_sizes=known
        ),
    )
    per: dict = {}
    for name in sorted({r.intermediate for r in model.records}):
        per[name] = decision_figures([r for r in model.records if r.intermediate == name])
        if "ops" not in per[name]:
            figs = decision_figures([r for r in priced.records if r.intermediate == name])
            per[name].update(
                {
                    k: v
                    for k, v in figs.items()
                    if k in ("ops", "saved", "loads", "allocation", "points")
                },
                unlimited=True,
            )
    return per, frozenset(r.intermediate for r in sound.applied)


class Unlimited(gx.CostModel):
    """The CPU model with no hard limits: prices what they decline."""

    def _limits(self, sdfg, cand, *, partial_ok: bool):
        return None


def decision_figures(records) -> dict:
    """One intermediate's decision: verdict, reason and the model's predicted extra
    operations and net traffic (bytes saved less loads and gathers added). A group decision
    (all readers together) carries group figures; otherwise the readers' figures add up."""
    figs = [r.figures for r in records if r.figures]
    group = next((f for f in figs if "group_size" in f), None)
    out = {
        "applied": any(r.applied for r in records),
        "reads": len(records),
        "reason": next((r.reason for r in records if not r.applied), records[0].reason),
        "points": sum(f["points"] * f["copies"] for f in figs),
    }
    if group is not None:
        out.update(
            ops=group["group_extra_ops"],
            saved=group["group_saved_bytes"],
            loads=group["group_gather_bytes"],
            allocation=group["group_allocation_bytes"],
        )
    elif figs:
        out.update(
            ops=sum(f["extra_ops"] for f in figs),
            saved=sum(f["saved_bytes"] for f in figs),
            loads=sum(f["extra_load_bytes"] for f in figs),
            allocation=sum(f["allocation_bytes"] for f in figs),
        )
    return out


def count_decisions(
    case,
    quick: bool,
    work: pathlib.Path,
    replays: Replays,
    static: bool = False,
    intermediates: Optional[tuple[str, ...]] = None,
    layout: Optional[str] = None,
) -> dict:
    """`none` (the library inlining nothing: its other passes run), the model's build and
    one build per intermediate everything sound inlines (`only:X`), each counted, no
    windows (their counts: `make counts`). `static`: every build, and the SDFG the model
    is asked about, with the call's integer and boolean arguments as constants (the row
    is named `NAME [static]`). `intermediates`: only these get an `only:X` build (a
    program whose sound set is large and whose builds take minutes). `layout`: as for
    `count_case`."""
    sizes = case.sizes(quick)
    program = case.program()
    args, offsets = case.inputs(sizes, 0, layout)
    values = static_args(args) if static else None
    name = case.name + (" [static]" if static else "")
    row = {"program": name, "sizes": sizes, "builds": {}, "applied": {}, "layout": layout}
    if static:
        row["static"] = plain(values)

    def add(label, policy):
        build = inline_build(policy=policy, windows=False)
        row["builds"][label] = capture_build(
            name, label, program, build, args, offsets, work, replays, values
        )
        row["applied"][label] = sorted({r.intermediate for r in build.report.applied})

    add("none", InlineOnly(()))
    symbols = call_symbols(work / _folder(name) / "none")
    figures, sound = predicted_figures(
        program, offsets, {**symbols, **(plain(values) if static else {})}, values
    )
    row["predicted"], row["symbols"] = figures, symbols
    add("model", gx.CostModel("cpu", windows=False))
    for x in sorted(sound if intermediates is None else set(intermediates)):
        add(f"only:{x}", InlineOnly((x,)))
    return row


def repredict(case, quick: bool, row: dict, work: pathlib.Path) -> None:
    """`row["predicted"]` anew (the counted builds kept): the call's symbols from a native
    run of the `none` build (nothing replayed), then the model on the first step."""
    program = case.program()
    args, offsets = case.inputs(case.sizes(quick), 0, row.get("layout"))
    static = row.get("static")  # a static row: lowered with the same constants
    symbols = row.get("symbols")
    if not symbols:
        build = inline_build(policy=InlineOnly(()), windows=False)
        run_and_capture(program, build, args, offsets, work / case.name / "none", static)
        symbols = call_symbols(work / case.name / "none")
    row["predicted"], _ = predicted_figures(program, offsets, {**symbols, **(static or {})}, static)
    row["symbols"] = symbols


def call_symbols(folder: pathlib.Path) -> dict:
    """The integer scalars a captured call passed (its symbols: ranges, sizes, levels)."""
    out = {}
    for spec in sorted(folder.glob("*/call.json")):
        for a in json.loads(spec.read_text())["args"]:
            if a["kind"] == "scalar" and isinstance(a["value"], int):
                out.setdefault(a["name"], a["value"])
    return out


def decisions_table(rows: list[dict]) -> str:
    """Per intermediate: the model's verdict, its predicted extra operations next to the
    counted extra instructions, its predicted net traffic next to the counted last-level
    traffic (misses x line), each against `none`."""
    head = (
        "program",
        "intermediate",
        "model",
        "pred. ops",
        "counted Ir",
        "Ir/op",
        "Ir/copy pt",
        "pred. traffic",
        "LL cpu",
        "LL gpu",
        "alloc",
    )
    lines = ["  ".join(head)]
    for row in rows:
        base = row["builds"]["none"]
        for label, entry in row["builds"].items():
            if not label.startswith("only:"):
                continue
            name = label[5:]
            f = row["predicted"].get(name, {})
            d_ir = entry["cpu"]["Ir"] - base["cpu"]["Ir"]
            d_cpu = (_ll(entry["cpu"]) - _ll(base["cpu"])) * counts.CACHES["cpu"][2][2]
            d_gpu = (_ll(entry["gpu"]) - _ll(base["gpu"])) * counts.CACHES["gpu"][2][2]
            verdict = ("inline" if f.get("applied") else "keep") if f else "-"
            if f.get("unlimited"):
                verdict += " (limit)"
            if name not in row.get("applied", {}).get(label, [name]):
                verdict += " (not applied when built)"
            if "ops" in f:
                ops, traffic = f["ops"], f["loads"] - f["saved"]
                per_op = f"{d_ir / ops:.2f}" if abs(ops) > 1 else "-"
                per_pt = f"{d_ir / f['points']:.1f}" if f.get("points") else "-"
                pred = f"{ops / 1e6:+.3g}M", per_op, per_pt, f"{traffic / 1e6:+.3g}MB"
            else:
                pred = "-", "-", "-", "-"
            alloc = f"{f['allocation'] / 1e6:.3g}MB" if "allocation" in f else "-"
            lines.append(
                "  ".join(
                    [
                        row["program"],
                        name,
                        verdict,
                        pred[0],
                        f"{d_ir / 1e6:+.3g}M",
                        pred[1],
                        pred[2],
                        pred[3],
                        f"{d_cpu / 1e6:+.3g}MB",
                        f"{d_gpu / 1e6:+.3g}MB",
                        alloc,
                    ]
                )
            )
    lines.append(
        "each build against `none` (the library inlining nothing); (limit): declined by a hard limit, "
        "priced here without it; pred. ops: the CPU model's extra "
        "operations (negative: the producer's work goes away); pred. traffic: its loads and gathers added "
        "less the bytes it saves; Ir/copy pt: counted extra instructions per point the copies evaluate; LL: "
        "counted last-level misses x line (64 B cpu, 128 B gpu); alloc: the per-call allocation the model "
        "credits separately"
    )
    return "\n".join(lines)


def _names(text: str) -> tuple[str, ...]:
    """A comma-separated option's entries."""
    return tuple(w.strip() for w in text.split(",") if w.strip())


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--only", default=",".join(DEFAULT), help="comma-separated bench program names")
    p.add_argument(
        "--quick", action="store_true", help="the bench's quick sizes (512 cells x 12 levels)"
    )
    p.add_argument(
        "--windows",
        action="store_true",
        help="also the library's build without windows and with every window that applies",
    )
    p.add_argument(
        "--decisions",
        action="store_true",
        help="predicted vs counted per decision: one build per intermediate (default programs: "
        + ", ".join(DECISION_PROGRAMS)
        + "; writes counts_decisions.json/.txt)",
    )
    p.add_argument(
        "--intermediates",
        default="",
        help="with --decisions: one build only for each of these (comma-separated), not for every "
        "intermediate everything sound inlines",
    )
    p.add_argument(
        "--repredict",
        action="store_true",
        help="with --decisions: recompute the predictions of an earlier run's JSON (no counting)",
    )
    p.add_argument(
        "--builds",
        default=None,
        help="comma-separated: symbolic, static (the call's integer and boolean arguments compiled as "
        "constants, as icon4py's setup_program builds); each program counted once per entry "
        "(default: symbolic,static; --decisions: symbolic only)",
    )
    p.add_argument(
        "--without",
        default="",
        help="also the default build less these cost-model switches, one build each (comma-separated: "
        + ", ".join(SWITCHES)
        + "): what one rewrite changes",
    )
    p.add_argument(
        "--with",
        dest="with_",
        default="",
        help="also the default build plus these cost-model switches, one build each: what a rewrite "
        "that is off by default (column_reads) would change",
    )
    p.add_argument(
        "--layout",
        default=DEFAULT_LAYOUT,
        choices=(*LAYOUTS, "none"),
        help=f"the index layout every program runs on (tools/layouts.py; default {DEFAULT_LAYOUT}, a "
        "production run's rank; none: a global grid on one rank with random neighbor tables)",
    )
    p.add_argument(
        "--json",
        default=None,
        help="output (default bench/counts.json, with --decisions bench/counts_decisions.json)",
    )
    opts = p.parse_args(argv)
    builds_arg = opts.builds or ("symbolic" if opts.decisions else "symbolic,static")
    variants = [b.strip() for b in builds_arg.split(",") if b.strip()]
    if bad := [b for b in variants if b not in ("symbolic", "static")]:
        p.error(f"unknown --builds {bad}; choose from symbolic, static")
    without = _names(opts.without)
    if bad := [w for w in without if w not in SWITCHES]:
        p.error(f"unknown --without {bad}; choose from {', '.join(SWITCHES)}")
    with_ = _names(opts.with_)
    intermediates = _names(opts.intermediates) or None
    if bad := [w for w in with_ if w not in SWITCHES]:
        p.error(f"unknown --with {bad}; choose from {', '.join(SWITCHES)}")
    if opts.decisions and opts.only == ",".join(DEFAULT):
        opts.only = ",".join(DECISION_PROGRAMS)
    out = pathlib.Path(
        opts.json or HERE / ("counts_decisions.json" if opts.decisions else "counts.json")
    )
    if counts.valgrind() is None:
        print("counts: valgrind is not installed", file=sys.stderr)
        return 2
    wanted = [w.strip() for w in opts.only.split(",") if w.strip()]
    known = {c.name: c for c in bench_cases.CASES}
    unknown = [w for w in wanted if w not in known]
    if unknown:
        p.error(f"unknown program(s) {unknown}; choose from {sorted(known)}")
    if opts.repredict:
        rows = json.loads(out.read_text())
        with tempfile.TemporaryDirectory(prefix="counts_calls_") as tmp:
            for row in rows:
                base = row["program"].removesuffix(" [static]")
                if base in wanted:
                    print(f"== {row['program']}: predicting", flush=True)
                    repredict(known[base], opts.quick, row, pathlib.Path(tmp))
        text = decisions_table(rows)
        print(text)
        out.write_text(json.dumps(rows, indent=1, default=str))
        out.with_suffix(".txt").write_text(
            text + f"\n\ncounted in {rows[0].get('total_s', '?')} s\n"
        )
        return 0
    layout = None if opts.layout == "none" else opts.layout
    print(f"layout: {opts.layout} (tools/layouts.py)", flush=True)
    pending, rows = [], []
    start = time.perf_counter()
    replays = Replays()
    with tempfile.TemporaryDirectory(prefix="counts_calls_") as tmp:
        for name in wanted:
            print(f"== {name}", flush=True)
            try:
                for variant in variants:
                    if opts.decisions:
                        pending.append(
                            count_decisions(
                                known[name],
                                opts.quick,
                                pathlib.Path(tmp),
                                replays,
                                static=variant == "static",
                                intermediates=intermediates,
                                layout=layout,
                            )
                        )
                    else:
                        pending.append(
                            count_case(
                                known[name],
                                opts.quick,
                                opts.windows,
                                pathlib.Path(tmp),
                                replays,
                                static=variant == "static",
                                without=without,
                                layout=layout,
                                with_=with_,
                            )
                        )
            except Exception as err:  # noqa: BLE001  # one broken program must not end the run
                print(f"  {name}: FAILED {type(err).__name__}: {err}", flush=True)
        print(f"== replays ({time.perf_counter() - start:.0f} s so far)", flush=True)
        for row in pending:
            try:
                rows.append(resolve(row))
            except Exception as err:  # noqa: BLE001
                print(f"  {row['program']}: replay FAILED {type(err).__name__}: {err}", flush=True)
        replays.pool.shutdown()
    text = (decisions_table if opts.decisions else table)(rows)
    print("\n" + text)
    total = time.perf_counter() - start
    print(f"total {total:.0f} s")
    for row in rows:
        row["total_s"] = round(total)
    out.write_text(json.dumps(rows, indent=1, default=str))
    out.with_suffix(".txt").write_text(text + f"\n\ntotal {total:.0f} s\n")
    return 0 if len(rows) == len(wanted) * len(variants) else 1


if __name__ == "__main__":
    sys.exit(main())
