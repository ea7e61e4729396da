#!/usr/bin/env python
"""The GPU path without a GPU: CUDA code of the seed programs and the target, generated
through the library's GPU backend, compiled with nvcc for sm_90.

    .venv/bin/python bench/gpu_check.py [--only NAME[,NAME...]] [--policies cost,sound,stock] [--jobs N]

`make gpu-check` runs it (after `make gpu-tools` installed NVIDIA's CUDA wheels). For each
program (bench/cases.py) and policy (`cost`: the GPU cost model, as `backends.run_dace_gpu`;
`sound`: `InlineWhereSound()`; `window`: vertical windows, then the GPU cost model;
`stock`: gt4py's backend, for comparison) it translates for
the GPU, generates the code, and compiles every object (`nvcc -c` for `.cu`, the host
compiler for `.cpp`). Exit status 1 if any object fails. See docs/gpu.md.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import pathlib
import sys
import time
import warnings


warnings.filterwarnings("ignore", message="The GT4Py DaCe GPU backend assumes")
warnings.filterwarnings("ignore", message="Python is not running in optimized mode")

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

import cases as bench_cases  # noqa: E402


#: The seed programs and the target (the other icon4py programs with `--only`).
DEFAULT_PROGRAMS = ("seed_demo", "three_level_demo", "seed", "three_level", "target")
POLICIES = ("cost", "sound", "window", "stock")


def log(msg: str) -> None:
    print(f"[gpu-check {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def make_build(policy: str):
    import gt4py_dace_xforms as gx
    from gt4py_dace_xforms.tools.compare import inline_build, stock_build

    if policy == "cost":
        return inline_build(gpu=True)
    if policy == "sound":
        return inline_build(gpu=True, policy=gx.InlineWhereSound())
    if policy == "window":
        return inline_build(gpu=True, windows=True)  # vertical windows, then the GPU cost model
    return stock_build(gpu=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    names = [c.name for c in bench_cases.CASES]
    p.add_argument(
        "--only",
        default=",".join(DEFAULT_PROGRAMS),
        help="comma-separated programs: " + ", ".join(names),
    )
    p.add_argument(
        "--policies", default="cost,sound", help="comma-separated, of: " + ", ".join(POLICIES)
    )
    p.add_argument(
        "--arch", default="90", help="compute capability to compile for (default 90: H100/H200)"
    )
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="compilers run at once")
    p.add_argument(
        "--out", default=str(ROOT / ".build" / "gpu_check"), help="generated code and results.json"
    )
    opts = p.parse_args(argv)

    programs = [n for n in opts.only.split(",") if n]
    policies = [n for n in opts.policies.split(",") if n]
    if bad := [n for n in programs if n not in names]:
        p.error(f"unknown program(s) {bad}; known: {names}")
    if bad := [n for n in policies if n not in POLICIES]:
        p.error(f"unknown policy(ies) {bad}; known: {list(POLICIES)}")

    from gt4py_dace_xforms.measure import cuda_check

    toolkit = cuda_check.find_cuda_toolkit()
    if toolkit is None:
        print(
            "gpu-check: error: no nvcc found; `make gpu-tools` installs NVIDIA's CUDA wheels into .venv",
            file=sys.stderr,
        )
        return 2
    log(
        f"nvcc {toolkit.version} ({toolkit.source}: {toolkit.nvcc}), sm_{opts.arch}, {opts.jobs} job(s)"
    )

    out = pathlib.Path(opts.out)
    rows, pending = [], []
    t_start = time.perf_counter()
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=max(1, opts.jobs))
    for name in programs:
        case = next(c for c in bench_cases.CASES if c.name == name)
        args, offset_provider = case.make_inputs(case.sizes(quick=True), 0)
        for policy in policies:
            row = {"program": name, "policy": policy, "status": "ok"}
            rows.append(row)
            try:
                build = make_build(policy)
                t0 = time.perf_counter()
                sdfg = cuda_check.translate(build.backend, case.program(), args, offset_provider)
                row["translate_s"] = time.perf_counter() - t0
                code = cuda_check.generate(sdfg, out / name / policy)
            except Exception as e:  # noqa: BLE001  # reported per row, the others still run
                row["status"] = (
                    f"FAILED before compiling: {type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}"
                )
                log(f"{name}/{policy}: {row['status']}")
                continue
            row.update(
                inlined=len(build.report.applied),
                kernels=code.kernels(),
                conditionals_in_kernels=cuda_check.conditionals_in_kernels(sdfg),
                files=[str(f.relative_to(code.folder)) for f in code.files],
            )
            log(f"{name}/{policy}: translated in {row['translate_s']:.1f} s, {row['inlined']} inlined,"
                f" {row['kernels']} kernel(s); compiling {len(code.files)} object(s)")  # fmt: skip
            # compile while the next program translates (nvcc runs outside the GIL)
            for f in code.files:
                pending.append(
                    (row, pool.submit(cuda_check.compile_one, code, f, toolkit, arch=opts.arch))
                )

    for row, future in pending:
        result = future.result()
        row.setdefault("objects", []).append(
            {
                "file": result.source.name,
                "ok": result.ok,
                "seconds": round(result.seconds, 2),
                "warnings": result.warnings,
            }
        )
        if not result.ok:
            row["status"] = "COMPILE FAILED"
            print(cuda_check.failure_text(result), file=sys.stderr, flush=True)
    pool.shutdown()
    wall = time.perf_counter() - t_start

    head = (
        "program",
        "policy",
        "inlined",
        "kernels",
        "if-in-kernel",
        "objects ok",
        "nvcc s",
        "translate s",
        "status",
    )
    lines = []
    for r in rows:
        objs = r.get("objects", [])
        nvcc_s = sum(o["seconds"] for o in objs if o["file"].endswith(".cu"))
        lines.append((
            r["program"], r["policy"], str(r.get("inlined", "-")), str(r.get("kernels", "-")),
            str(r.get("conditionals_in_kernels", "-")), f"{sum(o['ok'] for o in objs)}/{len(objs)}",
            f"{nvcc_s:.1f}", f"{r['translate_s']:.1f}" if "translate_s" in r else "-", r["status"],
        ))  # fmt: skip
    widths = [max(len(x) for x in col) for col in zip(head, *lines)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    print(
        "\n"
        + "\n".join(
            [fmt.format(*head), fmt.format(*("-" * w for w in widths))]
            + [fmt.format(*ln) for ln in lines]
        )
    )
    ok = sum(r["status"] == "ok" for r in rows)
    print(
        f"\n{ok}/{len(rows)} builds compiled, {wall:.0f} s (nvcc {toolkit.version}, sm_{opts.arch})"
    )
    out.mkdir(parents=True, exist_ok=True)
    doc = {"nvcc": toolkit.version, "arch": opts.arch, "wall_s": wall, "rows": rows}
    (out / "results.json").write_text(json.dumps(doc, indent=1) + "\n")
    return 0 if ok == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
