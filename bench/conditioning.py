"""How far stock's own outputs move when one input of an intermediate moves by one unit in
the last place: the scale of rounding differences a rewrite that changes the evaluation
order (an inlined copy compiled in another loop) may show on this program and input.

    .venv/bin/python bench/conditioning.py [--program solver_predictor] [--cells 2048] [--inputs a,b]

The static build (as `setup_program` compiles it) of one bench program, on the bench's inputs
at the given size; each named input is perturbed alone (`np.nextafter` upwards), and the
largest absolute change of every output is printed. A library build whose outputs differ
from stock's by less than this is within rounding of stock, whatever `make bench`'s fixed
relative tolerance (1e-12 of the field's largest value) says.
"""

import argparse
import sys
import warnings

import numpy as np


sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parent))

import cases as bench_cases  # noqa: E402
import gt4py.next as gtx  # noqa: E402

from gt4py_dace_xforms.tools.compare import stock_build  # noqa: E402
from gt4py_dace_xforms.tools.programs import copy_args  # noqa: E402
from gt4py_dace_xforms.tools.static import compile_static, static_args  # noqa: E402


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--program", default="solver_predictor")
    p.add_argument("--cells", type=int, default=2048)
    p.add_argument("--levels", type=int, default=80)
    p.add_argument(
        "--inputs",
        default="current_w,exner_w_explicit_weight_parameter,rho_at_cells_on_half_levels,"
        "contravariant_correction_at_cells_on_half_levels",
        help="comma-separated input fields to perturb (default: gtir_tmp_83's inputs in the solver)",
    )
    opts = p.parse_args(argv)
    warnings.filterwarnings("ignore")
    known = {c.name: c for c in bench_cases.CASES}
    if opts.program not in known:
        p.error(f"unknown program {opts.program!r}; choose from {sorted(known)}")
    case = known[opts.program]
    program = case.program()
    sizes = {
        "Cell": opts.cells,
        "Edge": opts.cells * 3 // 2,
        "Vertex": opts.cells // 2 + 2,
        "K": opts.levels,
    }
    args, provider = case.make_inputs(sizes, 0)
    outs = bench_cases.outputs_of(case)
    run = compile_static(program, stock_build().backend, static_args(args), provider)

    def call(a):
        run(**a, offset_provider=provider)
        return {k: a[k].asnumpy().copy() for k in outs}

    base = call(copy_args(args))
    for name in (n.strip() for n in opts.inputs.split(",") if n.strip()):
        if name not in args:
            p.error(f"{opts.program} has no input {name!r}")
        a = copy_args(args)
        a[name] = gtx.as_field(a[name].domain, np.nextafter(a[name].asnumpy(), np.inf))
        got = call(a)
        print(
            f"{name} + 1 ulp: "
            + ", ".join(f"{k} {float(np.nanmax(np.abs(got[k] - base[k]))):.3g}" for k in outs),
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
