"""Which of icon4py's `concat_where` programs dominate the dycore step: the stock backend's
static build of each (as `setup_program` compiles it), one call timed at 1 thread on the
census inputs (20480 cells x 80 levels), and its share of their sum.

    .venv/bin/python bench/dycore_share.py [--programs NAME,...] [--calls 7] [--json OUT]

Not a speed-up measurement (stock only, no A/A): it says where a ratio measured on one
program weighs in the step. Each of these programs runs once per dycore substep in
`SolveNonhydro.time_step` (`compute_advection_in_horizontal_momentum` in both the predictor's
and the corrector's velocity advection); the diffusion programs once per time step. The
per-call medians of a noisy machine are rough; the shares differ by large factors.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import sys
import time
import warnings


HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from gt4py_dace_xforms.measure import census_compare  # noqa: E402
from gt4py_dace_xforms.measure.timing import omp_threads  # noqa: E402
from gt4py_dace_xforms.tools import programs  # noqa: E402
from gt4py_dace_xforms.tools.compare import stock_build  # noqa: E402
from gt4py_dace_xforms.tools.programs import copy_args  # noqa: E402
from gt4py_dace_xforms.tools.static import compile_static, static_args  # noqa: E402


#: Calls per dycore substep (solve_nonhydro.py, velocity_advection.py of icon4py 0.4.1);
#: the diffusion programs run once per time step, not per substep.
CALLS_PER_SUBSTEP = {"compute_advection_in_horizontal_momentum": 2}
DIFFUSION = (
    "apply_diffusion_to_vn",
    "apply_diffusion_to_w_and_compute_horizontal_gradients_for_turbulence",
)
METRICS = (
    "compute_wgtfac_c",
    "compute_ddqz_z_half",
    "compute_exner_exfac",
    "compute_pressure_gradient_downward_extrapolation_mask_distance",
)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--programs",
        default="",
        help="comma-separated program names (default: the census's "
        "concat_where programs less the four metrics programs)",
    )
    p.add_argument(
        "--calls", type=int, default=7, help="timed calls per program after the first (default 7)"
    )
    p.add_argument("--cells", type=int, default=20480)
    p.add_argument("--levels", type=int, default=80)
    p.add_argument("--json", default=None, help="also write the rows as JSON here")
    opts = p.parse_args(argv)
    refs = [r for r in programs.census_programs(concat_only=True) if r.name not in METRICS]
    if opts.programs:
        wanted = {w.strip() for w in opts.programs.split(",") if w.strip()}
        if unknown := wanted - {r.name for r in refs}:
            p.error(
                f"unknown program(s) {sorted(unknown)}; choose from {sorted(r.name for r in refs)}"
            )
        refs = [r for r in refs if r.name in wanted]
    warnings.filterwarnings("ignore")
    rows = []
    for ref in refs:
        program = ref.load()
        args, provider = census_compare.census_inputs(
            program, n_horizontal=opts.cells, n_levels=opts.levels
        )
        static = static_args(args)
        t0 = time.perf_counter()
        run = compile_static(program, stock_build().backend, static, provider)
        run(**copy_args(args), offset_provider=provider)
        compiled = time.perf_counter() - t0
        omp_threads(1)
        times = []
        for _ in range(opts.calls):
            a = copy_args(args)
            t = time.perf_counter()
            run(**a, offset_provider=provider)
            times.append(time.perf_counter() - t)
        per = CALLS_PER_SUBSTEP.get(ref.name, 1)
        row = {
            "program": ref.name,
            "ms_per_call": 1e3 * statistics.median(times),
            "calls": per,
            "spread_ms": [1e3 * min(times), 1e3 * max(times)],
            "first_call_s": compiled,
            "where": "diffusion (per time step)" if ref.name in DIFFUSION else "dycore substep",
        }
        rows.append(row)
        print(
            f"{ref.name}: {row['ms_per_call']:.1f} ms per call [{row['spread_ms'][0]:.1f}..{row['spread_ms'][1]:.1f}]"
            f" x {per}, first call {compiled:.0f} s",
            flush=True,
        )
    step = [r for r in rows if r["program"] not in DIFFUSION]
    total = sum(r["ms_per_call"] * r["calls"] for r in step)
    print(f"\n{'program':<70}  ms/call  calls  share of the substep")
    for r in sorted(rows, key=lambda r: -r["ms_per_call"] * r["calls"]):
        share = f"{r['ms_per_call'] * r['calls'] / total:.1%}" if r in step else "(diffusion)"
        print(f"{r['program']:<70}  {r['ms_per_call']:7.1f}  {r['calls']:5d}  {share}")
    print(
        f"stock, static build, 1 thread, {opts.cells} x {opts.levels}, census inputs; median of {opts.calls} calls; "
        f"substep total {total:.0f} ms over these programs"
    )
    if opts.json:
        pathlib.Path(opts.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
