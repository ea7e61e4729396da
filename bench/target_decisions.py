"""The CPU and the GPU cost model's decisions side by side, on the census programs.

    .venv/bin/python bench/target_decisions.py [--concat-only] [MODULE:PROGRAM ...]

Each program is lowered once for the GPU (`gpu=True`, no GPU needed) to the first
`TopLevelDataFlowStep`; `gt_inline_intermediates` runs on a copy with `CostModel("cpu")` and on
another with `CostModel("gpu")`. Prints, per program, the reads each model applies and,
for every read where they differ, both models' reasons (docs/cost_model.md lists them).
"""

from __future__ import annotations

import argparse
import copy
import sys
import warnings

from gt4py.next.program_processors.runners.dace.transformations.auto_optimize import (
    GT4PyAutoOptHook,  # noqa: E402
)

import gt4py_dace_xforms as gx  # noqa: E402
from gt4py_dace_xforms.integration import capture  # noqa: E402
from gt4py_dace_xforms.tools import programs


STEP = (GT4PyAutoOptHook.TopLevelDataFlowStep, 1)


def decisions(sdfg, model) -> dict[tuple[str, str], tuple[bool, str]]:
    report = gx.gt_inline_intermediates(copy.deepcopy(sdfg), policy=model, validate=False)
    return {(r.intermediate, r.consumer): (r.applied, r.reason) for r in report.records}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("programs", nargs="*", metavar="MODULE:PROGRAM")
    parser.add_argument("--concat-only", action="store_true")
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore")
    if args.programs:
        refs = [programs.ProgramRef(*s.split(":", 1)) for s in args.programs]
    else:
        refs = programs.census_programs(args.concat_only)
    total = {"cpu": 0, "gpu": 0}
    for ref in refs:
        program = ref.load()
        sdfg = capture.capture_stages(
            program, [STEP], offset_provider=programs.offset_provider_for(program), gpu=True
        )[STEP]
        cpu, gpu = decisions(sdfg, gx.CostModel("cpu")), decisions(sdfg, gx.CostModel("gpu"))
        n_cpu, n_gpu = sum(a for a, _ in cpu.values()), sum(a for a, _ in gpu.values())
        total["cpu"] += n_cpu
        total["gpu"] += n_gpu
        print(f"{ref.name}: applied cpu {n_cpu}, gpu {n_gpu}", flush=True)
        for key in sorted(set(cpu) | set(gpu)):
            c, g = cpu.get(key, (False, "not reached")), gpu.get(key, (False, "not reached"))
            if c[0] != g[0]:
                print(
                    f"    {key[0]} -> {key[1]}: cpu {'applied' if c[0] else 'declined'} ({c[1]}); "
                    f"gpu {'applied' if g[0] else 'declined'} ({g[1]})",
                    flush=True,
                )
    print(f"TOTAL applied: cpu {total['cpu']}, gpu {total['gpu']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
