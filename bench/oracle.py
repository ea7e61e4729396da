#!/usr/bin/env python
"""The oracle for one program: stock, the cost model's choice, everything sound, each
intermediate's reads alone and a greedy best set, all timed on the same inputs against the
A/A floor; prints the cost model's regret (its time / the best variant's time).

    .venv/bin/python bench/oracle.py --program target [--threads 1,2] [--rounds 12] [--quick]
    make oracle ORACLE_ARGS="--program compute_exner_exfac"

PROGRAM: a `make bench` case (target, diag_normal_wind, predictor_w_adv, seed, ...), an
icon4py program's name (inputs as `census --compare` makes them, at the bench's sizes) or
MODULE:PROGRAM. Writes bench/oracle/<program>.txt and .json. See bench/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys
import time
import warnings


os.environ["GT4PY_BUILD_CACHE_LIFETIME"] = "session"
os.environ.setdefault("GT4PY_BUILD_CACHE_DIR", f"/tmp/oracle_cache_{os.getpid()}")
warnings.filterwarnings("ignore", message="Python is not running in optimized mode")
warnings.filterwarnings("ignore", message=r"Library .* already loaded, renaming file")

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import cases as bench_cases  # noqa: E402

from gt4py_dace_xforms.measure.timing import ALLOCATORS, pin_allocator  # noqa: E402


def log(msg: str) -> None:
    print(f"[oracle {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def resolve(name: str, quick: bool):
    """(short name, program, args, offset_provider, sizes) for a bench case, an icon4py
    program name or MODULE:PROGRAM."""
    from gt4py_dace_xforms.measure import census_compare
    from gt4py_dace_xforms.tools import programs

    by_case = {c.name: c for c in bench_cases.CASES}
    if name in by_case:
        case = by_case[name]
        sizes = case.sizes(quick)
        args, provider = case.make_inputs(sizes, 0)
        return name, case.program(), args, provider, sizes
    if ":" in name:
        ref = programs.ProgramRef(*name.split(":", 1))
    else:
        matches = [r for r in programs.discover() if r.name == name]
        if len(matches) != 1:
            raise SystemExit(f"oracle: {name!r} is no bench case and names {len(matches)} icon4py programs;"
                             f" bench cases: {sorted(by_case)}")  # fmt: skip
        ref = matches[0]
    program = ref.load()
    base = bench_cases.QUICK if quick else bench_cases.FULL
    args, provider = census_compare.census_inputs(
        program, n_horizontal=base["Cell"], n_levels=base["K"]
    )
    return ref.name, program, args, provider, {"horizontal": base["Cell"], "K": base["K"]}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--program", required=True)
    p.add_argument(
        "--threads", default="1,2", help="comma-separated OpenMP thread counts (default 1,2)"
    )
    p.add_argument("--rounds", type=int, default=12, help="rounds of the final timing (default 12)")
    p.add_argument(
        "--search-rounds",
        type=int,
        default=6,
        help="rounds of each greedy step's timing (default 6)",
    )
    p.add_argument(
        "--max-builds",
        type=int,
        default=24,
        help="most builds, stock and A/A included (default 24)",
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help="the bench's small sizes (a smoke check, not a measurement)",
    )
    p.add_argument(
        "--malloc",
        default="fresh",
        choices=ALLOCATORS,
        help="allocator regime of every timing (default fresh: each call's transients get new pages; see bench/README.md)",
    )
    p.add_argument(
        "--out",
        default=str(HERE / "oracle"),
        help="folder for <program>.txt/.json (default bench/oracle)",
    )
    opts = p.parse_args(argv)
    pin_allocator(opts.malloc)  # before lowering and builds allocate: see timing.pin_allocator

    from gt4py.next.program_processors.runners.dace.transformations.auto_optimize import (
        GT4PyAutoOptHook,
    )

    from gt4py_dace_xforms.integration import capture
    from gt4py_dace_xforms.measure.oracle import run_oracle

    name, program, args, provider, sizes = resolve(opts.program, opts.quick)
    step = (GT4PyAutoOptHook.TopLevelDataFlowStep, 1)
    log(f"{name}: sizes {sizes}; lowering to the first TopLevelDataFlowStep")
    sdfg = capture.capture_stages(program, [step], offset_provider=provider)[step]
    threads = [int(x) for x in opts.threads.split(",") if x.strip()]
    result = run_oracle(program, args, provider, sdfg, name=name, sizes=sizes, threads=threads, rounds=opts.rounds,
                        search_rounds=opts.search_rounds, max_builds=opts.max_builds, malloc=opts.malloc, log=log)  # fmt: skip
    text = result.table()
    print("\n" + text, flush=True)
    out = pathlib.Path(opts.out)
    out.mkdir(parents=True, exist_ok=True)
    meta = {"date": time.strftime("%Y-%m-%dT%H:%M:%S"), "argv": sys.argv[1:], "cpus": os.cpu_count(),
            "load_average": os.getloadavg(), "quick": opts.quick}  # fmt: skip
    (out / f"{name}.txt").write_text(text + f"\n\nload average at the end {os.getloadavg()}\n")
    (out / f"{name}.json").write_text(
        json.dumps({"meta": meta, **result.to_json()}, indent=1, default=str) + "\n"
    )
    log(f"written to {out}/{name}.txt and .json")
    bad = [lab for v in result.variants if v.mismatch for lab in v.labels]
    if bad:
        log(f"MISMATCH against stock: {bad}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
