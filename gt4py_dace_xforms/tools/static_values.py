"""Static-argument values for icon4py's programs, as its model run would compile them.

icon4py's `setup_program` compiles the domain bounds, the switches and the scalar
constants of each program as static arguments. Their values come from the grid (the
index ordering of cells and edges by zone), the vertical grid and the configuration.
`model_values()` gives one such variant per program, by parameter name:

* **Grid: a global ICON grid on one node, NLEV levels** (default 80). A global grid has
  no lateral boundary or nudging zone, so every start index of those zones is 0 (icon4py's
  `start_index` of `LATERAL_BOUNDARY_LEVEL_n`, `NUDGING`, `INTERIOR`); with one node there
  is no halo, so every end index (`LOCAL`, `HALO`, `HALO_LEVEL_2`, `END`) is the number of
  cells or edges. This is the layout the demo and the benchmarks run.
* **Vertical**: model top 0, surface NLEV + 1 (half levels, as `solve_nonhydro.py`
  passes `surface_level` and `vertical_end_index_model_surface`), `nflatlev` 4,
  `nflat_gradp` 6 (the demo's values), damping layer end 8, `kstart_moist` 0; the
  generic `vertical_end` is NLEV, or NLEV + 1 for the programs that write half levels
  (`HALF_LEVEL_PROGRAMS`).
* **Switches**: icon4py's configuration defaults (`NonHydrostaticConfig`,
  `DiffusionConfig`): `igradp_method` TAYLOR_HYDRO (3), `rayleigh_type` KLEMP (2),
  `divdamp_type` THREE_DIMENSIONAL (3), `type_shear` VERTICAL_OF_HORIZONTAL_WIND (0),
  `limited_area` False (global), `is_iau_active` False; of the run-time variants
  `setup_program` compiles both of (`at_first_substep`, `lprep_adv`, ...), the first
  substep's: `at_first_substep` True, `at_last_substep` False, `lprep_adv` and
  `prepare_advection` False, `skip_compute_predictor_vertical_advection` False,
  `apply_extra_diffusion_on_vn` False; divergence damping of `divdamp_order` 24 (COMBINED,
  icon4py's default) after the spin-up: fourth order only.

**Layouts** (`layout=`, `tools.layouts`): the horizontal bounds of a named layout of a
generated grid instead (`global`, `global-decomposed`, `lam`, `lam-decomposed`): every
parameter that names a zone bound takes that bound's value, the generic `horizontal_start`
and `horizontal_end` the whole array (0 and the element count: icon4py's model passes
them per call site), and `limited_area` is the layout's. Without a layout, the rules
above, unchanged.

A parameter this table has no rule for raises ValueError naming it: a wrong guess would
be a figure for a configuration nobody runs.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Mapping, Optional, Union


if TYPE_CHECKING:
    from gt4py_dace_xforms.tools.layouts import Layout

#: The grid the values describe: an icosahedral R2B4 grid (20480 cells, 30720 edges, 10242
#: vertices). Neighbor tables for a static lowering must have these sizes too: gt4py sizes
#: the temporaries it reaches through a table by the table, and a 320-cell table under
#: 20480-cell bounds describes no program anybody runs (`static_offset_provider`).
GRID = {"Cell": 20480, "Edge": 30720, "Vertex": 10242}
N_LEVELS = 80

#: Programs whose vertical domain is the half levels (their `vertical_end` is NLEV + 1).
HALF_LEVEL_PROGRAMS = frozenset({"compute_wgtfac_c", "compute_ddqz_z_half"})

#: Switches and vertical indices that do not depend on the grid's size.
FIXED: Mapping[str, Any] = {
    "igradp_method": 3,
    "rayleigh_type": 2,
    "divdamp_type": 3,
    "type_shear": 0,
    "limited_area": False,
    "is_iau_active": False,
    "at_first_substep": True,
    "at_last_substep": False,
    "lprep_adv": False,
    "skip_compute_predictor_vertical_advection": False,
    "apply_extra_diffusion_on_vn": False,
    # apply_divergence_damping_and_update_vn: icon4py's default `divdamp_order` COMBINED (24)
    # after the spin-up phase (the second-order factor ramped to 0): fourth order only.
    "divdamp_order": 24,
    "apply_2nd_order_divergence_damping": False,
    "apply_4th_order_divergence_damping": True,
    # compute_averaged_vn_and_fluxes: `lprep_adv` (tracer transport) off.
    "prepare_advection": False,
    "nflatlev": 4,
    "nflat_gradp": 6,
    "flat_level_index_plus1": 5,
    "end_index_of_damping_layer": 8,
    "nrdmax": 8,
    "kstart_moist": 0,
    "model_top": 0,
    "vertical_start": 0,
    "vertical_start_index_model_top": 0,
}

#: Horizontal start indices: 0 on a global grid (no lateral boundary or nudging zone).
_START = re.compile(r"^(start_|horizontal_start|interior_idx$|lateral_boundary_level_\d+$)")
#: Horizontal end indices: the element count on one node (no halo).
_END = re.compile(r"^(end_|horizontal_end|halo_idx$)")


def _layout_value(layout: "Layout", name: str, horizontal: str) -> Optional[int]:
    """`name`'s value in `layout`: a zone bound, or the whole array for the generic
    `horizontal_start` / `horizontal_end`; None if no rule covers it."""
    if name in layout.values:
        return layout.values[name]
    if name == "horizontal_start":
        return 0
    if name == "horizontal_end":
        return layout.sizes[horizontal]
    return None


def model_values(
    program_name: str,
    params: Mapping[str, str],
    *,
    n_cells: int = GRID["Cell"],
    n_edges: int = GRID["Edge"],
    n_levels: int = N_LEVELS,
    horizontal: str = "Cell",
    layout: Union[str, "Layout", None] = None,
) -> dict[str, Any]:
    """One static variant of `program_name`'s integer and boolean parameters (`params`:
    name -> the kind of its type, e.g. "INT32", "BOOL"). `horizontal`: the program's
    horizontal dimension ("Cell" or "Edge"), for the generic `horizontal_end`; a name
    that says cell or edge decides itself. `layout` (a name or `Layout`): its horizontal
    bounds and `limited_area`, on a grid of `n_cells` cells (`n_edges` follows from it).
    ValueError names what no rule covers.

    Args:
        program_name: the icon4py program's name.
        params: name -> the kind of its type.
        n_cells: cells of the grid.
        n_edges: edges of the grid.
        n_levels: model levels.
        horizontal: the program's horizontal dimension.
        layout: a `tools.layouts` name or `Layout` (None: the global one-rank values).

    Returns:
        name -> value.

    Raises:
        ValueError: a parameter no rule gives a value.
    """
    if layout is not None:
        from gt4py_dace_xforms.tools.layouts import resolve

        layout = resolve(layout, n_cells)
    values: dict[str, Any] = {}
    unknown = []
    for name, kind in params.items():
        if layout is not None and name == "limited_area":
            values[name] = layout.limited_area
        elif name in FIXED:
            values[name] = FIXED[name]
        elif name in ("surface_level", "vertical_end_index_model_surface"):
            values[name] = n_levels + 1
        elif name == "nlev":
            values[name] = n_levels
        elif name == "vertical_end":
            values[name] = n_levels + 1 if program_name in HALF_LEVEL_PROGRAMS else n_levels
        elif layout is not None and (value := _layout_value(layout, name, horizontal)) is not None:
            values[name] = value
        elif layout is None and _START.match(name):
            values[name] = 0
        elif layout is None and _END.match(name):
            dim = "Edge" if "edge" in name else "Cell" if "cell" in name else horizontal
            values[name] = n_edges if dim == "Edge" else n_cells
        else:
            unknown.append(name)
            continue
        if kind == "BOOL" and not isinstance(values[name], bool):
            unknown.append(name)
    if unknown:
        raise ValueError(
            f"{program_name}: no static value rule for parameter(s) {sorted(set(unknown))}"
        )
    return values


def program_static_values(
    program: Any, layout: Union[str, "Layout", None] = None, **sizes: Any
) -> dict[str, Any]:
    """`model_values` for a `gtx.program`: its integer and boolean scalar parameters; its
    horizontal dimension is that of its first output on cells or edges. `layout`: a
    `tools.layouts` name or `Layout` (None: the global one-rank values).

    Args:
        program: the `gtx.program`.
        layout: a `tools.layouts` name or `Layout` (None: the global one-rank values).
        sizes: `n_cells`, `n_edges`, `n_levels`, as `model_values` takes them.

    Returns:
        name -> value.
    """
    from gt4py.next.type_system import type_specifications as ts

    from gt4py_dace_xforms.tools.programs import program_outputs

    ftype = program.past_stage.past_node.type.definition
    params = {
        n: t.kind.name
        for n, t in ftype.pos_or_kw_args.items()
        if isinstance(t, ts.ScalarType) and not t.kind.name.startswith("FLOAT")
    }
    horizontal = "Cell"
    for out in program_outputs(program):
        t = ftype.pos_or_kw_args.get(out)
        dims = [d.value for d in getattr(t, "dims", [])]
        if "Edge" in dims or "Cell" in dims:
            horizontal = "Edge" if "Edge" in dims else "Cell"
            break
    return model_values(program.__name__, params, horizontal=horizontal, layout=layout, **sizes)


def static_offset_provider(
    program: Any, seed: int = 0, layout: Union[str, "Layout", None] = None
) -> dict[str, Any]:
    """Neighbor tables for the offsets `program` uses, sized as the grid its static values
    describe: random and in range over `GRID` (drawn with `seed`), or with a `layout` (a
    name or `Layout`) the generated grid's, in that layout's ordering.

    Args:
        program: the `gtx.program`.
        seed: the random seed.
        layout: a `tools.layouts` name or `Layout` (None: the global one-rank values).

    Returns:
        offset name -> connectivity.

    Raises:
        ValueError: where a FieldOffset the program uses is not visible to it.
    """
    from gt4py_dace_xforms.tools.programs import _field_offsets, offset_provider_for, used_offsets

    if layout is None:
        return offset_provider_for(program, None, sizes=GRID, seed=seed)
    from gt4py_dace_xforms.tools.grid import connectivities
    from gt4py_dace_xforms.tools.layouts import resolve

    needed = used_offsets(program)
    offsets = _field_offsets(program)
    missing = [n for n in needed if n not in offsets]
    if missing:
        raise ValueError(f"program uses offsets {missing} whose FieldOffset is not visible to it")
    return connectivities(resolve(layout).grid(), {n: offsets[n] for n in needed})
