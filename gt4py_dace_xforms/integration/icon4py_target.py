"""The measured target: icon4py 0.4.1's `compute_perturbed_quantities_and_interpolation`.

Synthetic Cell x K inputs (random, reproducible) for tests, the demo and benchmarks.
icon4py is optional: `available()` says whether it can be imported.
"""

from __future__ import annotations

import importlib
from typing import Any

import numpy as np

MODULE = "icon4py.model.atmosphere.dycore.stencils.compute_cell_diagnostics_for_dycore"
PROGRAM = "compute_perturbed_quantities_and_interpolation"

#: The nine fields the program writes (its `out=` tuple).
OUTPUTS = (
    "perturbed_rho_at_cells_on_model_levels",
    "perturbed_theta_v_at_cells_on_model_levels",
    "perturbed_exner_at_cells_on_model_levels",
    "rho_at_cells_on_half_levels",
    "theta_v_at_cells_on_half_levels",
    "nonhydro_buoy_at_cells_on_half_levels",
    "temporal_extrapolation_of_perturbed_exner",
    "ddz_of_temporal_extrapolation_of_perturbed_exner_on_model_levels",
    "d2dz2_of_temporal_extrapolation_of_perturbed_exner_on_model_levels",
)


def program() -> Any:
    return getattr(importlib.import_module(MODULE), PROGRAM)


def available() -> bool:
    try:
        program()
    except ImportError:
        return False
    return True


def _half_level(name: str) -> bool:
    return "half_level" in name or name in ("wgtfac_c", "ddqz_z_half")


def make_args(n_cells: int, n_levels: int, *, seed: int = 0, taylor_hydro: bool = True) -> dict[str, Any]:
    """Keyword arguments: random fields in [0.5, 1.5), the full domain, `nflatlev=4`.

    Half-level fields have `n_levels + 1` levels; `surface_level = n_levels + 1`.
    """
    import gt4py.next as gtx
    from gt4py.next.type_system import type_specifications as ts
    from icon4py.model.atmosphere.dycore.dycore_states import HorizontalPressureDiscretizationType
    from icon4py.model.common import dimension as dims

    rng = np.random.default_rng(seed)
    method = HorizontalPressureDiscretizationType.TAYLOR_HYDRO if taylor_hydro else HorizontalPressureDiscretizationType.CONVENTIONAL
    scalars = {
        "igradp_method": int(method),
        "nflatlev": 4,
        "nflat_gradp": 6,
        "start_cell_lateral_boundary_level_3": 0,
        "end_cell_local": n_cells,
        "end_cell_halo": n_cells,
        "end_cell_halo_level_2": n_cells,
        "model_top": 0,
        "surface_level": n_levels + 1,
    }
    ftype = program().past_stage.past_node.type.definition
    args: dict[str, Any] = {}
    for name, ptype in ftype.pos_or_kw_args.items():
        if isinstance(ptype, ts.FieldType):
            dtype = np.dtype(ptype.dtype.kind.name.lower())
            sizes = {dims.CellDim: n_cells, dims.KDim: n_levels + _half_level(name)}
            shape = tuple(sizes[d] for d in ptype.dims)
            args[name] = gtx.as_field(list(ptype.dims), (0.5 + rng.random(shape)).astype(dtype))
        else:
            args[name] = np.dtype(ptype.kind.name.lower()).type(scalars[name])
    return args


def copy_args(args: dict[str, Any]) -> dict[str, Any]:
    """Fresh field copies (outputs are written in place)."""
    import gt4py.next as gtx

    return {k: gtx.as_field(v.domain, v.asnumpy().copy()) if hasattr(v, "asnumpy") else v for k, v in args.items()}
