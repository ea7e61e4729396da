"""Every switch value icon4py's `setup_program` compiles as a variant, built with the library.

`setup_program` compiles a program once per value of its switches (`at_first_substep`,
`lprep_adv`, `limited_area`, `igradp_method`, ...): each value is its own SDFG, with the
branches of the other values gone. The census and the benchmarks build the first
substep's values (`tools.static_values.FIXED`); here every other value of every switch
of icon4py's `concat_where` programs is lowered static, on a decomposed limited-area
layout, through gt4py's top-level stage with the library's pass (strict: a failing
rewrite fails the test; an analysis that raises is a failure too), and the result
validates. Stock's build of each is not repeated here (the census counts both). No C++ compile: the target's variants are compiled and compared in test_static.py
and test_icon4py.py. A program's switches are flipped together where they are independent
(one build per program, not per switch: the solvers cost a minute or two a build).
"""

import pytest
from gt4py.next.program_processors.runners.dace.transformations.auto_optimize import (
    GT4PyAutoOptHook,
)

from gt4py_dace_xforms.integration.capture import capture_stages
from gt4py_dace_xforms.integration.hooks import optimization_hooks


POST = (GT4PyAutoOptHook.TopLevelDataFlowPost, 1)
DYCORE = "icon4py.model.atmosphere.dycore.stencils"
DIFFUSION = "icon4py.model.atmosphere.diffusion.stencils"

#: (module, program) -> the switch values other than the first substep's (FIXED), flipped
#: together; `limited_area` comes with the layout (lam-decomposed: True), so the global
#: layout's False is built for the programs that read it.
VARIANTS = {
    (f"{DIFFUSION}.apply_diffusion_to_vn", "apply_diffusion_to_vn"): ("global-decomposed", {}),
    (f"{DIFFUSION}.apply_diffusion_to_w_and_compute_horizontal_gradients_for_turbulence",
     "apply_diffusion_to_w_and_compute_horizontal_gradients_for_turbulence"): ("lam-decomposed", {"type_shear": 1}),
    (f"{DYCORE}.compute_advection_in_horizontal_momentum_equation", "compute_advection_in_horizontal_momentum"):
        ("lam-decomposed", {"apply_extra_diffusion_on_vn": True}),
    (f"{DYCORE}.compute_cell_diagnostics_for_dycore", "compute_perturbed_quantities_and_interpolation"):
        ("lam-decomposed", {"igradp_method": 1}),
    (f"{DYCORE}.compute_edge_diagnostics_for_dycore_and_update_vn", "compute_rho_theta_pgrad_and_update_vn"):
        ("global-decomposed", {"is_iau_active": True}),
    (f"{DYCORE}.compute_advection_in_vertical_momentum_equation", "compute_advection_in_predictor_vertical_momentum"):
        ("lam-decomposed", {"skip_compute_predictor_vertical_advection": True}),
    (f"{DYCORE}.vertically_implicit_dycore_solver", "vertically_implicit_solver_at_predictor_step"):
        ("lam-decomposed", {"is_iau_active": True, "rayleigh_type": 1, "divdamp_type": 2, "at_first_substep": False}),
    (f"{DYCORE}.vertically_implicit_dycore_solver", "vertically_implicit_solver_at_corrector_step"):
        ("lam-decomposed", {"lprep_adv": True, "is_iau_active": True, "rayleigh_type": 1, "at_first_substep": False,
                            "at_last_substep": True}),
}  # fmt: skip


def _load(module: str, name: str):
    from gt4py_dace_xforms.tools.programs import load_program

    try:
        return load_program(f"{module}:{name}")
    except ValueError as err:
        pytest.skip(str(err))


@pytest.mark.icon4py
@pytest.mark.parametrize("spec", sorted(VARIANTS), ids=[name for _, name in sorted(VARIANTS)])
def test_switch_variant_builds_with_the_library(spec):
    from gt4py_dace_xforms.tools.static_values import (
        FIXED,
        program_static_values,
        static_offset_provider,
    )

    layout, flips = VARIANTS[spec]
    program = _load(*spec)
    values = program_static_values(program, layout=layout)
    assert set(flips) <= set(values), sorted(set(flips) - set(values))
    assert all(values[k] != v for k, v in flips.items() if k in FIXED), (
        "a flip must change the first substep's value"
    )
    values.update(flips)
    provider = static_offset_provider(program, layout=layout)
    reports: list = []
    library = capture_stages(
        program,
        [POST],
        offset_provider=provider,
        static_args=values,
        optimization_hooks=optimization_hooks(reports=reports),
    )[POST]
    library.validate()
    assert reports, "the library's pass did not run"
    failed = [r.reason for rep in reports for r in rep.declined if "analysis failed" in r.reason]
    assert not failed, failed
