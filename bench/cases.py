"""The benchmarked programs and their (synthetic, reproducible) inputs.

Each `Case` builds its program lazily and returns `(args, offset_provider)`: `args` are the
keyword arguments of the gt4py program (fields and scalars), `offset_provider` holds random
but valid neighbor tables for the horizontal offsets the program uses.
"""

from __future__ import annotations

import dataclasses
import importlib
from typing import Any, Callable, Optional

import numpy as np

from gt4py_dace_xforms.tools import programs


# Icosahedral R2B4-like sizes: 20480 cells, 30720 edges, 10242 vertices.
FULL = {"Cell": 20480, "Edge": 30720, "Vertex": 10242, "K": 80}
QUICK = {"Cell": 512, "Edge": 768, "Vertex": 258, "K": 12}

#: Neighbor counts of icon4py's local dimensions (icosahedral grid).
NEIGHBORS = programs.ICOSAHEDRAL_NEIGHBORS


@dataclasses.dataclass
class Case:
    name: str
    what: str
    program: Callable[[], Any]
    make_inputs: Callable[[dict, int], tuple[dict, dict]]
    #: the fields compared with stock (or a function returning them, called lazily)
    outputs: tuple[str, ...] | Callable[[], tuple[str, ...]]
    #: horizontal dimension name of the outputs (for the transient-bytes fallback)
    horizontal: str = "Cell"
    #: fixed sizes overriding FULL/QUICK (e.g. the demo's 64-cell domain)
    fixed: dict = dataclasses.field(default_factory=dict)
    #: only with `--only NAME`: each build takes many minutes (a full run would double)
    heavy: bool = False

    def sizes(self, quick: bool) -> dict:
        return {**(QUICK if quick else FULL), **self.fixed}

    def inputs(self, sizes: dict, seed: int, layout: Optional[str] = None) -> tuple[dict, dict]:
        """`make_inputs`, on a layout of the generated grid (`tools.layouts`): its element
        counts, its bounds for every scalar that names one (and `limited_area`), and its
        neighbor tables, ordered with locality as ICON's; None: the inputs as drawn (a
        global grid on one rank, random tables)."""
        if layout is None:
            return self.make_inputs(sizes, seed)
        from gt4py_dace_xforms.tools import layouts
        from gt4py_dace_xforms.tools.static_values import static_offset_provider

        lay = layouts.layout(layout, sizes["Cell"])
        sizes = {**sizes, **{d: n for d, n in lay.sizes.items() if d in sizes}}
        args, offsets = self.make_inputs(sizes, seed)
        if offsets:
            offsets = static_offset_provider(self.program(), layout=lay)
        return layouts.apply(args, lay), offsets


# ---------------------------------------------------------------------------------------
# 1. the target


def _target_program():
    import icon4py_target

    return icon4py_target.program()


def _target_inputs(sizes: dict, seed: int):
    import icon4py_target

    return icon4py_target.make_args(sizes["Cell"], sizes["K"], seed=seed, taylor_hydro=True), {}


def _target_outputs() -> tuple[str, ...]:
    from icon4py_target import OUTPUTS

    return OUTPUTS


# ---------------------------------------------------------------------------------------
# 2. the seed shape: the demo's programs as they are (64 cells fixed) and the same field
#    operators in bench programs over the full horizontal size (bench/programs.py)


def _ck_inputs(names_in: tuple[str, ...], cut: int):
    def make(sizes: dict, seed: int):
        import gt4py.next as gtx

        from gt4py_dace_xforms.cli import demo

        rng = np.random.default_rng(seed)
        n, nlev = sizes["Cell"], sizes["K"]
        args: dict[str, Any] = {
            k: gtx.as_field([demo.Cell, demo.K], rng.random((n, nlev))) for k in names_in
        }
        args["out"] = gtx.zeros({demo.Cell: n, demo.K: nlev}, dtype=gtx.float64)
        args["nlev"] = np.int32(nlev)
        return args, {}

    return make


def _with_ncells(make):
    def wrapped(sizes: dict, seed: int):
        args, op = make(sizes, seed)
        args["ncells"] = np.int32(sizes["Cell"])
        return args, op

    return wrapped


def _demo(name: str):
    return lambda: getattr(importlib.import_module("gt4py_dace_xforms.cli.demo"), name)


def _bench_program(name: str):
    return lambda: getattr(importlib.import_module("programs"), name)


# ---------------------------------------------------------------------------------------
# 3. further icon4py 0.4.1 programs with concat_where: random fields, random neighbor tables


def _icon4py_program(module: str, name: str):
    return lambda: getattr(
        importlib.import_module(f"icon4py.model.atmosphere.dycore.stencils.{module}"), name
    )


def random_offset_provider(program, sizes: dict, rng: np.random.Generator) -> dict:
    """Random, in-range neighbor tables over `sizes` (`programs.offset_provider_for`)."""
    return programs.offset_provider_for(program, sizes=sizes, seed=rng)


def icon4py_inputs(program_fn: Callable[[], Any], scalars: Callable[[dict], dict]):
    """Inputs for an icon4py program: every field random (floats in [0.5, 1.5), bools 50/50);
    all K fields get `K + 1` levels (room for the half-level reads); scalars from `scalars(sizes)`."""

    def make(sizes: dict, seed: int):
        import gt4py.next as gtx
        from gt4py.next.type_system import type_specifications as ts

        program = program_fn()
        rng = np.random.default_rng(seed)
        values = scalars(sizes)
        ftype = program.past_stage.past_node.type.definition
        args: dict[str, Any] = {}
        for name, ptype in ftype.pos_or_kw_args.items():
            if isinstance(ptype, ts.FieldType):
                dtype = np.dtype(ptype.dtype.kind.name.lower())
                shape = tuple(
                    sizes["K"] + 1 if d.value == "K" else sizes.get(d.value) or NEIGHBORS[d.value]
                    for d in ptype.dims
                )
                if dtype == np.bool_:
                    data = rng.random(shape) < 0.5
                elif np.issubdtype(dtype, np.integer):
                    data = rng.integers(0, 4, shape).astype(dtype)
                else:
                    data = (0.5 + rng.random(shape)).astype(dtype)
                args[name] = gtx.as_field(list(ptype.dims), data)
            else:
                args[name] = np.dtype(ptype.kind.name.lower()).type(values[name])
        return args, random_offset_provider(program, sizes, rng)

    return make


_PREDICTOR = _icon4py_program(
    "compute_advection_in_vertical_momentum_equation",
    "compute_advection_in_predictor_vertical_momentum",
)
_DIAGNOSTICS = _icon4py_program(
    "compute_diagnostics_from_normal_wind", "compute_diagnostics_from_normal_wind"
)


def _predictor_scalars(s: dict) -> dict:
    return {
        "scalfac_exdiff": 0.05, "cfl_w_limit": 0.65, "dtime": 1.0,
        "skip_compute_predictor_vertical_advection": False,
        "nflatlev": 4, "end_index_of_damping_layer": 6,
        "horizontal_start": 0, "horizontal_end": s["Cell"], "vertical_start": 0, "vertical_end": s["K"],
    }  # fmt: skip


def _diagnostics_scalars(s: dict) -> dict:
    # vertical_end = K + 1: the program writes half levels 0..K-1 and extrapolates level K.
    return {
        "skip_compute_predictor_vertical_advection": False, "nflatlev": 4,
        "horizontal_start": 0, "horizontal_end": s["Edge"], "vertical_start": 0, "vertical_end": s["K"] + 1,
    }  # fmt: skip


# ---------------------------------------------------------------------------------------
# 4. census programs where the default backend inlines the most (inputs exactly as
#    `census --compare` makes them, at the bench's sizes; every horizontal dimension has
#    the Cell count)


def _census_program(ref: str):
    return lambda: programs.ProgramRef(*ref.split(":", 1)).load()


def _census_inputs(ref: str):
    def make(sizes: dict, seed: int):
        from gt4py_dace_xforms.measure import census_compare

        return census_compare.census_inputs(_census_program(ref)(), n_horizontal=sizes["Cell"],
                                            n_levels=sizes["K"], seed=seed)  # fmt: skip

    return make


_APPLY_DIFFUSION = (
    "icon4py.model.atmosphere.diffusion.stencils.apply_diffusion_to_vn:apply_diffusion_to_vn"
)
_EXNER_EXFAC = "icon4py.model.common.metrics.metric_fields:compute_exner_exfac"
_SOLVER = (
    "icon4py.model.atmosphere.dycore.stencils.vertically_implicit_dycore_solver:"
    "vertically_implicit_solver_at_predictor_step"
)


def _census_outputs(ref: str) -> tuple[str, ...]:
    return programs.program_outputs(_census_program(ref)())


CASES: list[Case] = [
    Case(
        "target",
        "icon4py compute_perturbed_quantities_and_interpolation (Cell x K)",
        _target_program,
        _target_inputs,
        _target_outputs,
    ),
    Case(
        "seed_demo",
        "demo.vertical_difference_computed_program (64-cell domain)",
        _demo("vertical_difference_computed_program"),
        _ck_inputs(("interior", "surface"), 1),
        ("out",),
        fixed={"Cell": 64},
    ),
    Case(
        "three_level_demo",
        "demo.three_level_sum_program (64-cell domain)",
        _demo("three_level_sum_program"),
        _ck_inputs(("a", "b"), 2),
        ("out",),
        fixed={"Cell": 64},
    ),
    Case(
        "seed",
        "bench vertical_difference_computed over all cells (concat_where, t(K+1) - t)",
        _bench_program("vertical_difference_computed_program"),
        _with_ncells(_ck_inputs(("interior", "surface"), 1)),
        ("out",),
    ),
    Case(
        "three_level",
        "bench three_level_sum over all cells (t + t(K+1) + t(K+2))",
        _bench_program("three_level_sum_program"),
        _with_ncells(_ck_inputs(("a", "b"), 2)),
        ("out",),
    ),
    Case(
        "predictor_w_adv",
        "icon4py compute_advection_in_predictor_vertical_momentum (Cell x K; C2E, C2E2CO)",
        _PREDICTOR,
        icon4py_inputs(_PREDICTOR, _predictor_scalars),
        (
            "contravariant_correction_at_cells_on_half_levels",
            "vertical_wind_advective_tendency",
            "contravariant_corrected_w_at_cells_on_model_levels",
            "vertical_cfl",
        ),
    ),
    Case(
        "diag_normal_wind",
        "icon4py compute_diagnostics_from_normal_wind (Edge x K; E2C, E2V, E2C2E, V2C)",
        _DIAGNOSTICS,
        icon4py_inputs(_DIAGNOSTICS, _diagnostics_scalars),
        (
            "tangential_wind",
            "tangential_wind_on_half_levels",
            "vn_on_half_levels",
            "horizontal_kinetic_energy_at_edges_on_model_levels",
            "contravariant_correction_at_edges_on_model_levels",
            "horizontal_advection_of_w_at_edges_on_half_levels",
        ),
        horizontal="Edge",
    ),
    Case(
        "apply_diffusion_to_vn",
        "icon4py apply_diffusion_to_vn (Edge x K; E2C2V, 14 reads inlined; census inputs)",
        _census_program(_APPLY_DIFFUSION),
        _census_inputs(_APPLY_DIFFUSION),
        ("vn",),
        horizontal="Edge",
    ),
    Case(
        "exner_exfac",
        "icon4py compute_exner_exfac (Cell x K; census inputs)",
        _census_program(_EXNER_EXFAC),
        _census_inputs(_EXNER_EXFAC),
        ("exner_exfac",),
    ),
    Case(
        "scan",
        "bench scan of a computed temporary over all cells (decay(a * b + c / (a + 1)))",
        _bench_program("scan_of_computed_program"),
        _with_ncells(_ck_inputs(("a", "b", "c"), 0)),
        ("out",),
    ),
    Case(
        "solver_predictor",
        "icon4py vertically_implicit_solver_at_predictor_step (Cell x K; scans; census inputs)",
        _census_program(_SOLVER),
        _census_inputs(_SOLVER),
        lambda: _census_outputs(_SOLVER),  # the program's out= parameters
        heavy=True,
    ),
]


def outputs_of(case: Case) -> tuple[str, ...]:
    return case.outputs() if callable(case.outputs) else case.outputs
