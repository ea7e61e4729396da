"""Stock's own next_theta_v etc. when one of z_alpha's inputs moves by one ulp, against the
GPU model's build's difference from stock, same inputs (static lam-decomposed 20480 x 80)."""

import sys
import warnings


warnings.filterwarnings("ignore")
import numpy as np


sys.path.insert(0, "bench")
import gt4py.next as gtx
import substep as sb

from gt4py_dace_xforms.tools.layouts import layout as named_layout
from gt4py_dace_xforms.tools.programs import copy_args, program_outputs
from gt4py_dace_xforms.tools.static import compile_static


lay = named_layout("lam-decomposed", 20480)
for s in sb.sites_for(
    lay,
    80,
    ["later", "first"] if "first" in sys.argv else ["later"],
    lprep_adv=False,
    programs=[
        "vertically_implicit_solver_at_predictor_step",
        "vertically_implicit_solver_at_corrector_step",
    ],
):
    inputs = sb.site_inputs([s], lay, 80)[s.key]
    program = s.call.ref.load()
    args, offsets = inputs
    outs = program_outputs(program)
    runs = {}
    for label in ("stock", "library_gpu_model"):
        runs[label] = compile_static(
            program,
            sb.backend_from(sb.descriptors(label, s.name, "default"), f"_substep_oc_{label}"),
            s.static,
            offsets,
        )

    def call(label, a, runs=runs, offsets=offsets, outs=outs):
        a = copy_args(a)
        runs[label](**a, offset_provider=offsets)
        return {k: a[k].asnumpy() for k in outs}

    ref = call("stock", args)
    gm = call("library_gpu_model", args)
    print(
        s.key,
        "GPU model - stock:",
        {
            k: f"{np.nanmax(np.abs(gm[k] - ref[k])):.2e}"
            for k in outs
            if np.nanmax(np.abs(gm[k] - ref[k])) > 0
        },
    )
    for name in (
        "rho_at_cells_on_half_levels",
        "theta_v_at_cells_on_half_levels",
        "exner_w_implicit_weight_parameter",
    ):
        p = copy_args(args)
        f = p[name].asnumpy()
        p[name] = gtx.as_field(p[name].domain, np.nextafter(f, np.inf))
        got = call("stock", p)
        print(
            f"  stock, {name} + 1 ulp:",
            {
                k: f"{np.nanmax(np.abs(got[k] - ref[k])):.2e}"
                for k in outs
                if np.nanmax(np.abs(got[k] - ref[k])) > 0
            },
            flush=True,
        )
