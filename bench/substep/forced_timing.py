"""A build the CPU model declines, timed on this CPU (issue 61, item 4): against stock, A/A
and the library's default build.

    .venv/bin/python bench/substep/forced_timing.py PROGRAM CELLS LEVELS BUILD REGIME ROUNDS

BUILD: `gpu_model` (the library with `CostModel("gpu")`, compiled for the CPU) or
comma-separated names (`library_forced`: `InlineOnly(NAMES)`). PROGRAM at its
later-substep call site on lam-decomposed, built static through icon4py's path
(bench/substep.py's descriptors), every build called on a fresh copy of the same inputs per
round in `round_order`, 1 thread; per build the median of the per-round ratios to stock with
its 95 % interval, and whether its outputs equal stock's (bench/substep.py's `compare`).
Prints one JSON line (bench/substep/rho_theta_forced.txt and forced_timing.txt keep the
runs)."""

import json
import sys
import time

from _bench import substep_bench


if __name__ == "__main__":
    b = substep_bench()
    from gt4py_dace_xforms.measure.timing import (
        median_interval,
        omp_threads,
        pin_allocator,
        round_order,
    )
    from gt4py_dace_xforms.tools.layouts import layout
    from gt4py_dace_xforms.tools.programs import copy_args

    program, cells, levels, build, regime, rounds = sys.argv[1:7]
    pin_allocator(regime)
    gpu_model = build == "gpu_model"
    forced = () if gpu_model else tuple(build.split(","))
    lay = layout("lam-decomposed", int(cells))
    sites = b.sites_for(lay, int(levels), ["later"], lprep_adv=False, programs=[program])
    inputs = b.site_inputs(sites, lay, int(levels))
    s = sites[0]
    labels = ("stock", "A/A", "library", "library_gpu_model" if gpu_model else "library_forced")
    got = b.build_site(s, labels, "default", f"forcedtime_{regime}", inputs[s.key], forced)
    omp_threads(1)
    args, offsets = inputs[s.key]
    secs = {label: [] for label in labels}
    for r in range(int(rounds)):
        for label in round_order(list(labels), r):
            a = copy_args(args)
            t = time.perf_counter()
            got["runs"][label](**a, offset_provider=offsets)
            secs[label].append(time.perf_counter() - t)
            del a
    out = {
        "program": program,
        "build": build,
        "regime": regime,
        "rounds": len(secs["stock"]),
        "stock_ms": 1e3 * sorted(secs["stock"])[len(secs["stock"]) // 2],
    }
    for label in labels[1:]:
        iv = median_interval([x / y for x, y in zip(secs[label], secs["stock"])])
        out[label] = [round(iv.median, 3), round(iv.lo, 3), round(iv.hi, 3)]
    out["equal"] = {
        label: b.compare(got["outputs"][label], got["outputs"]["stock"])["equal"]
        for label in labels[1:]
    }
    print(json.dumps(out))
