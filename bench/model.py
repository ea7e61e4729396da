#!/usr/bin/env python
"""`make bench-model`: icon4py 0.4.1's components as a model runs them, stock against the
library.

    .venv/bin/python bench/model.py [--cells 20480] [--levels 65] [--rounds 12]
        [--regimes glibc,fresh,persistent] [--threads 1] [--grid FILE] [--json OUT]

`SolveNonhydro` and `Diffusion` built by icon4py itself from an ICON grid file (the
generated torus, `tools.gridfile`): icon4py's grid manager reads it, its geometry,
interpolation and metrics factories (`tools.model_setup`, gt4py's gtfn backend) compute
the static fields, once per grid and level count, kept in `.build/model/`; the components
take them with their own configurations (`nonhydro_config`, `diffusion_config`:
documented in docs/model_bench.md) and build every program through `setup_program`,
static, as a model run does. Three builds per regime, in one process:

* stock: icon4py's own `dace_cpu` descriptor (`model_backends.BACKENDS["dace_cpu"]`);
* A/A: a second pair of components from the same descriptor (the noise floor);
* library: `integration.icon4py.backend(CPU)`, the library turned on through icon4py's
  own backend path (icon4py tunes it per program as its own).

A round times, per build, one model time step from a fresh copy of the same analytic
initial state (`initial_state`): `SolveNonhydro.time_step` five times (the substeps, first
and last flags and the swaps as icon4py's driver makes them) and `Diffusion.run` once on
what the substeps left, as the driver calls it. The builds alternate within each round
(`timing.round_order`). Each regime (`REGIMES`: glibc's default, fresh pages, glibc with
`TransientMemoryMode.PERSISTENT`) runs in a process of its own, the allocator pinned
before anything is built (`timing.pin_allocator`: the library's cost model reads it).
The statistics are bench/substep.py's (`_judge`: per-round ratio medians, intervals, the
A/A floor, the verdict). The prognostic state after the first (untimed) time step is
compared, library and A/A against stock, field by field.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import pathlib
import platform
import subprocess
import sys
import tempfile
import time
import warnings
from typing import Any, Optional

import numpy as np


HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent
SCRIPT = pathlib.Path(__file__).resolve()
#: Grid files and the factories' fields, per grid and level count (git-ignored).
WORK = ROOT / ".build" / "model"

#: regime -> (allocator regime, memory mode), one process each.
REGIMES = {
    "glibc": ("glibc", "default"),
    "fresh": ("fresh", "default"),
    "persistent": ("glibc", "persistent"),
}
PROGNOSTIC = ("rho", "w", "vn", "exner", "theta_v")
PARTS = ("time_step", "diffusion", "total")


def log(msg: str) -> None:
    print(f"[model {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def _substep() -> Any:
    """bench/substep.py (its statistics, comparison and run-file writer), imported without
    its module-level build-cache settings leaking into this process's environment."""
    saved = dict(os.environ)
    if str(HERE) not in sys.path:
        sys.path.insert(0, str(HERE))
    import substep  # type: ignore[import-not-found]

    os.environ.clear()
    os.environ.update(saved)
    return substep


# --- configuration ----------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class RunConfig:
    """The time step a round runs: `dtime` seconds (icon4py's Jablonowski-Williamson run on
    an R2B4-like grid: 300 s), `substeps` dynamics substeps, the second-order divergence
    damping factor icon4py's driver passes during a run's first half hour with
    `apply_initial_stabilization` (0.8 x `fourth_order_divdamp_factor`; with `COMBINED`
    damping both the second- and the fourth-order damping then run), and whether the step
    is the run's very first (`at_initial_timestep`)."""

    dtime: float = 300.0
    substeps: int = 5
    second_order_divdamp_factor: float = 0.8 * 0.0025
    initial: bool = False


def nonhydro_config() -> Any:
    """`NonHydrostaticConfig` as ICON's namelist defaults set it (icon4py's defaults): the
    Miura rho-theta advection, Taylor-hydrostatic pressure gradient, Klemp Rayleigh damping,
    extra diffusion near the vertical-advection stability limit, and `COMBINED` divergence
    damping (second and fourth order, `fourth_order_divdamp_factor` 0.0025, 3-D), as
    icon4py's APE R2B4 and Jablonowski-Williamson experiments run it."""
    from icon4py.model.atmosphere.dycore import dycore_states, solve_nonhydro

    return solve_nonhydro.NonHydrostaticConfig(
        divdamp_order=dycore_states.DivergenceDampingOrder.COMBINED,
        divdamp_type=dycore_states.DivergenceDampingType.THREE_DIMENSIONAL,
        fourth_order_divdamp_factor=0.0025,
    )


def diffusion_config(substeps: int) -> Any:
    """`DiffusionConfig` of icon4py's APE R2B4 experiment: fourth-order Smagorinsky
    diffusion (`smagorinski_scaling_factor` 0.025, `hdiff_efdt_ratio` 24) of the horizontal
    and vertical wind and of temperature, the diamond stencil for vn, heterogeneous
    temperature diffusion, and the truly horizontal temperature diffusion over steep
    slopes (`apply_zdiffusion_t`; none on the flat torus)."""
    from icon4py.model.atmosphere.diffusion import diffusion

    return diffusion.DiffusionConfig(
        diffusion_type=diffusion.DiffusionType.SMAGORINSKY_4TH_ORDER,
        apply_to_vertical_wind=True,
        apply_to_horizontal_wind=True,
        apply_to_temperature=True,
        type_vn_diffu=diffusion.SmagorinskyStencilType.DIAMOND_VERTICES,
        type_t_diffu=diffusion.TemperatureDiscretizationType.HETEROGENEOUS,
        hdiff_efdt_ratio=24.0,
        hdiff_w_efdt_ratio=15.0,
        smagorinski_scaling_factor=0.025,
        apply_zdiffusion_t=True,
        ndyn_substeps=substeps,
    )


# --- the factories' fields --------------------------------------------------------------------


def _edge_names() -> dict[str, str]:
    """`EdgeParams` argument -> geometry field name."""
    from icon4py.model.common.grid import geometry_attributes as ga

    return {
        "tangent_orientation": ga.TANGENT_ORIENTATION,
        "primal_edge_lengths": ga.EDGE_LENGTH,
        "inverse_primal_edge_lengths": f"inverse_of_{ga.EDGE_LENGTH}",
        "dual_edge_lengths": ga.DUAL_EDGE_LENGTH,
        "inverse_dual_edge_lengths": f"inverse_of_{ga.DUAL_EDGE_LENGTH}",
        "inverse_vertex_vertex_lengths": f"inverse_of_{ga.VERTEX_VERTEX_LENGTH}",
        "primal_normal_x": ga.EDGE_NORMAL_U,
        "primal_normal_y": ga.EDGE_NORMAL_V,
        "primal_normal_cell_x": ga.EDGE_NORMAL_CELL_U,
        "primal_normal_cell_y": ga.EDGE_NORMAL_CELL_V,
        "primal_normal_vert_x": ga.EDGE_NORMAL_VERTEX_U,
        "primal_normal_vert_y": ga.EDGE_NORMAL_VERTEX_V,
        "dual_normal_cell_x": ga.EDGE_TANGENT_CELL_U,
        "dual_normal_cell_y": ga.EDGE_TANGENT_CELL_V,
        "dual_normal_vert_x": ga.EDGE_TANGENT_VERTEX_U,
        "dual_normal_vert_y": ga.EDGE_TANGENT_VERTEX_V,
        "edge_areas": ga.EDGE_AREA,
        "coriolis_frequency": ga.CORIOLIS_PARAMETER,
        "edge_center_lat": ga.EDGE_LAT,
        "edge_center_lon": ga.EDGE_LON,
    }


def _cell_names() -> dict[str, str]:
    from icon4py.model.common.grid import geometry_attributes as ga

    return {"cell_center_lat": ga.CELL_LAT, "cell_center_lon": ga.CELL_LON, "area": ga.CELL_AREA}


def collect_fields(s: Any) -> dict[str, Any]:
    """Every static field the components and the initial state take, from the factories of
    `tools.model_setup.setup` (computed here): "interpolation/NAME", "metrics/NAME" (the
    states' names, `model_setup.required_fields`), "edge/ARG", "cell/ARG" (`EdgeParams` /
    `CellParams` arguments), "heights/z_mc", "heights/z_ifc", "cell/mean_cell_area", and
    the cell and edge coordinates ("coords/...")."""
    from icon4py.model.common import dimension as dims
    from icon4py.model.common.metrics import metrics_attributes as ma
    from icon4py.model.common.states import factory

    from gt4py_dace_xforms.tools import model_setup

    out: dict[str, Any] = {}
    for source, names in model_setup.required_fields().items():
        fac = getattr(s, source)
        for state_name, name in names.items():
            out[f"{source}/{state_name}"] = fac.get(name)
    for arg, name in _edge_names().items():
        out[f"edge/{arg}"] = s.geometry.get(name)
    for arg, name in _cell_names().items():
        out[f"cell/{arg}"] = s.geometry.get(name)
    from icon4py.model.common.grid import geometry_attributes as ga

    out["cell/mean_cell_area"] = float(
        s.geometry.get(ga.MEAN_CELL_AREA, factory.RetrievalType.SCALAR)
    )
    out["heights/z_mc"] = s.metrics.get(ma.Z_MC)
    out["heights/z_ifc"] = s.metrics.get(ma.CELL_HEIGHT_ON_HALF_LEVEL)
    for k, v in out.items():  # 0-d fields (nflat_gradp) as numbers
        if hasattr(v, "ndarray") and not v.domain.dims:
            out[k] = np.asarray(v.asnumpy()).item()
    coords = s.grid_manager.coordinates
    for dim, tag in ((dims.CellDim, "cell"), (dims.EdgeDim, "edge")):
        for axis in ("x", "y"):
            out[f"coords/{tag}_{axis}"] = coords[dim][axis]
    return out


def save_fields(fields: dict[str, Any], path: pathlib.Path, meta: dict) -> None:
    """`fields` as a .npz (arrays) with their dimensions and `meta` in a JSON entry."""
    arrays, layout = {}, {}
    for k, v in fields.items():
        if hasattr(v, "ndarray"):
            arrays[k] = np.asarray(v.asnumpy())
            # each dimension's name and start: a factory field need not start at 0
            # (wgtfacq_c/wgtfacq_e live on levels nlev-3..nlev-1)
            layout[k] = [[d.value, r.start] for d, r in zip(v.domain.dims, v.domain.ranges)]
        else:
            arrays[k] = np.asarray(v)
            layout[k] = None
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp.npz")
    np.savez(tmp, __layout__=json.dumps({"dims": layout, "meta": meta}), **arrays)
    tmp.replace(path)


def load_fields(path: pathlib.Path) -> dict[str, Any]:
    """The fields `save_fields` wrote, as gt4py fields on the CPU (scalars as Python numbers)."""
    import gt4py.next as gtx
    from icon4py.model.common import dimension as dims

    by_name = {d.value: d for d in vars(dims).values() if isinstance(d, gtx.Dimension)}
    with np.load(path) as data:
        layout = json.loads(str(data["__layout__"]))["dims"]
        out: dict[str, Any] = {}
        for k, names in layout.items():
            a = data[k]
            if names is None:
                out[k] = a.item()
            else:
                out[k] = gtx.as_field(
                    gtx.domain(
                        {by_name[n]: (lo, lo + size) for (n, lo), size in zip(names, a.shape)}
                    ),
                    a.copy(),
                )
    return out


def fields_path(grid: pathlib.Path, levels: int) -> pathlib.Path:
    """Where the fields of `grid` at `levels` levels are kept (made again when the grid file
    is newer)."""
    return WORK / f"fields_{grid.stem}_{levels}l_v2.npz"


def grid_path(cells: int) -> pathlib.Path:
    return WORK / f"torus_{cells}.nc"


# --- components and state ---------------------------------------------------------------------


@dataclasses.dataclass
class Model:
    """What both builds share: icon4py's grid, vertical grid and the static fields."""

    grid: Any
    vertical_grid: Any
    fields: dict[str, Any]


def model_from_setup(s: Any) -> Model:
    """A `Model` from `tools.model_setup.setup`'s result (the factories computed here)."""
    return Model(s.grid, s.vertical_grid, collect_fields(s))


def model_from_files(grid_file: pathlib.Path, levels: int, fields: pathlib.Path) -> Model:
    """A `Model` from the grid file (icon4py's grid manager) and the saved fields."""
    from icon4py.model.common.grid import grid_manager as gm, vertical as v_grid

    from gt4py_dace_xforms.tools import model_setup

    config = v_grid.VerticalGridConfig(
        num_levels=levels, rayleigh_damping_height=model_setup.DAMPING_HEIGHT
    )
    manager = gm.GridManager(str(grid_file), config)
    manager(allocator=None, keep_skip_values=True)
    vct_a, vct_b = v_grid.get_vct_a_and_vct_b(config, None)
    return Model(manager.grid, v_grid.VerticalGrid(config, vct_a, vct_b), load_fields(fields))


def _states(m: Model) -> dict[str, Any]:
    """The components' static states from the fields."""
    import gt4py.next as gtx
    from icon4py.model.atmosphere.diffusion import diffusion_states
    from icon4py.model.atmosphere.dycore import dycore_states
    from icon4py.model.common import dimension as dims
    from icon4py.model.common.grid import states as grid_states

    f = m.fields

    def pick(cls: Any, prefix: str) -> Any:
        return cls(**{x.name: f[f"{prefix}/{x.name}"] for x in dataclasses.fields(cls)})

    f = {**f, "metrics/nflat_gradp": gtx.int32(f["metrics/nflat_gradp"])}

    return {
        "metric_nh": pick(dycore_states.MetricStateNonHydro, "metrics"),
        "interp_nh": pick(dycore_states.InterpolationState, "interpolation"),
        "metric_diff": pick(diffusion_states.DiffusionMetricState, "metrics"),
        "interp_diff": pick(diffusion_states.DiffusionInterpolationState, "interpolation"),
        "edge": grid_states.EdgeParams(**{a: f[f"edge/{a}"] for a in _edge_names()}),
        "cell": grid_states.CellParams(
            **{a: f[f"cell/{a}"] for a in _cell_names()},
            mean_cell_area=f["cell/mean_cell_area"],
        ),
        "owner_mask": gtx.as_field((dims.CellDim,), np.ones(m.grid.num_cells, dtype=bool)),
    }


def wait_for_builds() -> None:
    """Wait until every compilation gt4py has in flight (its process pool) has finished."""
    import concurrent.futures

    try:
        from gt4py.next.otf.compiled_program import _ongoing_compilations
    except ImportError:  # another gt4py: the first call waits instead
        return
    futures = list(_ongoing_compilations)
    concurrent.futures.wait(futures)
    for fut in futures:
        fut.result()


def build(m: Model, backend: Any, substeps: int) -> tuple[Any, Any, float]:
    """`SolveNonhydro` and `Diffusion` built with `backend` (a descriptor) as icon4py's driver
    builds them; returns both and the seconds until every program was compiled."""
    from icon4py.model.atmosphere.diffusion import diffusion
    from icon4py.model.atmosphere.dycore import solve_nonhydro
    from icon4py.model.common.decomposition import definitions as decomposition

    st = _states(m)
    t0 = time.perf_counter()
    nh = nonhydro_config()
    solve = solve_nonhydro.SolveNonhydro(
        grid=m.grid,
        config=nh,
        params=solve_nonhydro.NonHydrostaticParams(nh),
        metric_state_nonhydro=st["metric_nh"],
        interpolation_state=st["interp_nh"],
        vertical_params=m.vertical_grid,
        edge_geometry=st["edge"],
        cell_geometry=st["cell"],
        owner_mask=st["owner_mask"],
        backend=backend,
        exchange=decomposition.single_node_exchange,
    )
    dc = diffusion_config(substeps)
    diff = diffusion.Diffusion(
        grid=m.grid,
        config=dc,
        params=diffusion.DiffusionParams(dc),
        vertical_grid=m.vertical_grid,
        metric_state=st["metric_diff"],
        interpolation_state=st["interp_diff"],
        edge_params=st["edge"],
        cell_params=st["cell"],
        backend=backend,
        exchange=decomposition.single_node_exchange,
    )
    wait_for_builds()
    return solve, diff, time.perf_counter() - t0


@dataclasses.dataclass(frozen=True, eq=False)
class MemoryModeFactory:
    """A backend factory that sets `TransientMemoryMode.PERSISTENT` in every program's
    `optimization_args`, around `inner` (icon4py's factory or the library's). It compares
    equal to icon4py's `make_custom_dace_backend`, so icon4py still tunes every program
    (`get_dace_options`), each in a dict of its own: icon4py adds the implicit solvers'
    options to the descriptor's `optimization_args` in place, so a mode given in the
    descriptor itself would carry them into every program built after the solvers."""

    inner: Any
    mode: Any

    def __call__(self, **descriptor: Any) -> Any:
        args = dict(descriptor.pop("optimization_args", None) or {})
        args["transient_memory_mode"] = self.mode
        return self.inner(optimization_args=args, **descriptor)

    def __eq__(self, other: object) -> bool:
        from icon4py.model.common import model_backends

        if isinstance(other, MemoryModeFactory):
            return (self.inner, self.mode) == (other.inner, other.mode)
        return other is model_backends.make_custom_dace_backend

    def __hash__(self) -> int:
        return hash((MemoryModeFactory, self.mode))


def descriptor(label: str, mode: str) -> dict[str, Any]:
    """The backend descriptor of a build: stock and A/A icon4py's `dace_cpu`, the library
    `integration.icon4py.backend(CPU)`; under `persistent` both with `MemoryModeFactory`."""
    from icon4py.model.common import model_backends

    from gt4py_dace_xforms.integration import icon4py as gx_icon4py

    if label in ("stock", "A/A"):
        desc = dict(model_backends.BACKENDS["dace_cpu"])  # type: ignore[arg-type]
    elif label == "library":
        desc = gx_icon4py.backend(model_backends.CPU)
    else:
        raise ValueError(label)
    if mode == "persistent":
        from gt4py.next.program_processors.runners.dace.transformations import TransientMemoryMode

        desc["backend_factory"] = MemoryModeFactory(
            desc["backend_factory"], TransientMemoryMode.PERSISTENT
        )
    return desc


def initial_state(m: Model) -> dict[str, Any]:
    """The analytic initial state, flat (`flatten`): a dry atmosphere of constant
    Brunt-Vaisala frequency N = 0.01 1/s (theta 288 K at the ground, 1000 hPa) with a smooth
    theta perturbation (0.5 K x cos(2 pi x / Lx) cos(2 pi y / Ly) sin(pi z / top)),
    hydrostatically balanced column by column in the model's own discretization (exner
    integrated upwards from its analytic value on the lowest level with the half-level
    theta_v the model interpolates), w = 0, and a smooth periodic horizontal wind
    u = 10 m/s (1 + z / 10 km) + 5 m/s sin(2 pi y / Ly), v = 5 m/s sin(2 pi x / Lx)
    projected on the edge normals; the other diagnostic fields zero, the perturbed exner
    exner - exner_ref_mc, rho and theta_v on half levels interpolated."""
    from icon4py.model.atmosphere.diffusion import diffusion_states
    from icon4py.model.atmosphere.dycore import dycore_states
    from icon4py.model.common import constants as c
    from icon4py.model.common.states import nonhydro_states, prognostic_state

    f, grid = m.fields, m.grid
    diag = nonhydro_states.initialize_solve_nonhydro_diagnostic_state(grid, None)
    now = prognostic_state.initialize_prognostic_state(grid, None)
    nxt = prognostic_state.initialize_prognostic_state(grid, None)
    prep = dycore_states.initialize_prep_advection(grid, None)
    ddiag = diffusion_states.initialize_diffusion_diagnostic_state(grid, None)

    z_mc = f["heights/z_mc"].asnumpy()
    z_ifc = f["heights/z_ifc"].asnumpy()
    nlev = z_mc.shape[1]
    wgt = f["metrics/wgtfac_c"].asnumpy()[:, : nlev + 1]
    dz_half = f["metrics/ddqz_z_half"].asnumpy()[:, : nlev + 1]
    xc, yc = f["coords/cell_x"].asnumpy(), f["coords/cell_y"].asnumpy()
    xe, ye = f["coords/edge_x"].asnumpy(), f["coords/edge_y"].asnumpy()
    lx = float(grid.grid_params.domain_length)  # the torus's periods
    ly = float(grid.grid_params.domain_height)
    top = float(z_ifc[:, 0].max())

    n2, theta0 = 1.0e-4, 288.0
    theta = theta0 * np.exp(n2 * z_mc / c.GRAV)
    theta += (
        0.5
        * np.cos(2 * np.pi * xc / lx)[:, None]
        * np.cos(2 * np.pi * yc / ly)[:, None]
        * np.sin(np.pi * z_mc / top)
    )
    theta_ic = np.empty((theta.shape[0], nlev + 1))
    theta_ic[:, 1:nlev] = wgt[:, 1:nlev] * theta[:, 1:] + (1 - wgt[:, 1:nlev]) * theta[:, :-1]
    theta_ic[:, 0], theta_ic[:, nlev] = theta[:, 0], theta[:, -1]
    exner = np.empty_like(theta)
    zb = z_mc[:, -1]
    coef = c.GRAV**2 / (c.CPD * theta0 * n2)
    exner[:, -1] = 1.0 + coef * (np.exp(-n2 * zb / c.GRAV) - 1.0)
    for k in range(nlev - 1, 0, -1):
        exner[:, k - 1] = exner[:, k] - c.GRAV * dz_half[:, k] / (c.CPD * theta_ic[:, k])
    rho = c.P0REF * exner ** (c.CVD / c.RD) / (c.RD * theta)
    rho_ic = np.empty_like(theta_ic)
    rho_ic[:, 1:nlev] = wgt[:, 1:nlev] * rho[:, 1:] + (1 - wgt[:, 1:nlev]) * rho[:, :-1]
    rho_ic[:, 0], rho_ic[:, nlev] = rho[:, 0], rho[:, -1]

    z_e = z_mc.mean(axis=0)[None, :]  # flat topography: every column has the same levels
    u = 10.0 * (1.0 + z_e / 1.0e4) + 5.0 * np.sin(2 * np.pi * ye / ly)[:, None]
    v = 5.0 * np.sin(2 * np.pi * xe / lx)[:, None] * np.ones_like(z_e)
    nx = f["edge/primal_normal_x"].asnumpy()[:, None]
    ny = f["edge/primal_normal_y"].asnumpy()[:, None]
    vn = u * nx + v * ny

    for state in (now, nxt):
        state.rho.ndarray[...] = rho
        state.theta_v.ndarray[...] = theta
        state.exner.ndarray[...] = exner
        state.vn.ndarray[...] = vn
        state.w.ndarray[...] = 0.0
    diag.perturbed_exner_at_cells_on_model_levels.ndarray[...] = (
        exner - f["metrics/reference_exner_at_cells_on_model_levels"].asnumpy()
    )
    diag.theta_v_at_cells_on_half_levels.ndarray[...] = theta_ic
    diag.rho_at_cells_on_half_levels.ndarray[...] = rho_ic
    return flatten(diag, now, nxt, prep, ddiag)


def flatten(diag: Any, now: Any, nxt: Any, prep: Any, ddiag: Any) -> dict[str, Any]:
    """The states as one name -> field (or 0-d array) mapping, pairs in their current order."""
    out: dict[str, Any] = {}
    for x in dataclasses.fields(diag):
        v = getattr(diag, x.name)
        if hasattr(v, "predictor"):
            out[f"diag.{x.name}.predictor"], out[f"diag.{x.name}.corrector"] = (
                v.predictor,
                v.corrector,
            )
        else:
            out[f"diag.{x.name}"] = v
    for tag, state in (("now", now), ("next", nxt), ("prep", prep), ("ddiag", ddiag)):
        for x in dataclasses.fields(state):
            out[f"{tag}.{x.name}"] = getattr(state, x.name)
    return out


def assemble(flat: dict[str, Any]) -> tuple[Any, Any, Any, Any]:
    """The icon4py states over the fields of `flat` (new dataclasses and pairs, so that a
    time step's swaps never change `flat`): diagnostic, prognostic pair, prep_adv, diffusion
    diagnostic."""
    from icon4py.model.atmosphere.diffusion import diffusion_states
    from icon4py.model.atmosphere.dycore import dycore_states
    from icon4py.model.common import utils as common_utils
    from icon4py.model.common.states import nonhydro_states, prognostic_state

    kw = {}
    for x in dataclasses.fields(nonhydro_states.DiagnosticStateNonHydro):
        if f"diag.{x.name}.predictor" in flat:
            kw[x.name] = common_utils.PredictorCorrectorPair(
                flat[f"diag.{x.name}.predictor"], flat[f"diag.{x.name}.corrector"]
            )
        else:
            kw[x.name] = flat[f"diag.{x.name}"]
    diag = nonhydro_states.DiagnosticStateNonHydro(**kw)

    def make(cls: Any, tag: str) -> Any:
        return cls(**{x.name: flat[f"{tag}.{x.name}"] for x in dataclasses.fields(cls)})

    pair = common_utils.TimeStepPair(
        make(prognostic_state.PrognosticState, "now"),
        make(prognostic_state.PrognosticState, "next"),
    )
    return (
        diag,
        pair,
        make(dycore_states.PrepAdvection, "prep"),
        make(diffusion_states.DiffusionDiagnosticState, "ddiag"),
    )


def copy_state(flat: dict[str, Any]) -> dict[str, Any]:
    """Fresh copies of every field (and 0-d array) of `flat`."""
    import gt4py.next as gtx

    return {
        k: gtx.as_field(v.domain, v.ndarray.copy()) if hasattr(v, "ndarray") else np.copy(v)
        for k, v in flat.items()
    }


def reset_state(dst: dict[str, Any], src: dict[str, Any]) -> None:
    """`src`'s values into `dst`'s buffers, in place."""
    for k, v in src.items():
        if hasattr(v, "ndarray"):
            dst[k].ndarray[...] = v.ndarray
        else:
            dst[k][...] = v


def time_step(
    solve: Any, diff: Any, flat: dict[str, Any], cfg: RunConfig
) -> tuple[float, float, Any]:
    """One model time step on the state `flat` as icon4py's driver runs it: `cfg.substeps`
    calls of `SolveNonhydro.time_step` (the advective tendencies' time levels swapped before
    each, the prognostic pair after each but the last), then `Diffusion.run` on the new
    state with the whole step's `dtime`. Returns the seconds of the substeps, of diffusion,
    and the new prognostic state."""
    diag, pair, prep, ddiag = assemble(flat)
    t0 = time.perf_counter()
    for n in range(cfg.substeps):
        first, last = n == 0, n == cfg.substeps - 1
        if not (cfg.initial and first):
            diag.vertical_wind_advective_tendency.swap()
        if not first:
            diag.normal_wind_advective_tendency.swap()
        solve.time_step(
            diagnostic_state_nh=diag,
            prognostic_states=pair,
            prep_adv=prep,
            second_order_divdamp_factor=cfg.second_order_divdamp_factor,
            dtime=cfg.dtime / cfg.substeps,
            ndyn_substeps_var=cfg.substeps,
            at_initial_timestep=cfg.initial,
            lprep_adv=False,
            at_first_substep=first,
            at_last_substep=last,
        )
        if not last:
            pair.swap()
    t1 = time.perf_counter()
    diff.run(diagnostic_state=ddiag, prognostic_state=pair.next, dtime=cfg.dtime)
    t2 = time.perf_counter()
    return t1 - t0, t2 - t1, pair.next


#: How far beyond rounding's own reach (`rounding_reach`) the library's state may be and
#: still count as equal within rounding.
ROUNDING_FACTOR = 10.0


def nudge_prognostic(flat: dict[str, Any]) -> None:
    """Move every other point of the current prognostic fields by one ulp (towards +inf),
    in place: the smallest change of the inputs, to see how far one time step carries
    rounding."""
    for k in PROGNOSTIC:
        a = flat[f"now.{k}"].ndarray
        every_other = (np.arange(a.size) % 2 == 0).reshape(a.shape)
        a[every_other] = np.nextafter(a[every_other], np.inf)


def within_rounding(lib: dict, reach: dict) -> dict[str, bool]:
    """Per field: the library's max relative difference from stock within `ROUNDING_FACTOR`
    times what one ulp of the inputs makes of stock's state, or within the plain rtol."""
    sb = _substep()
    out = {}
    for k, v in lib["outputs"].items():
        bound = max(sb.RTOL, ROUNDING_FACTOR * reach["outputs"][k]["max_rel_diff"])
        out[k] = v["max_rel_diff"] <= bound
    return out


def prognostic_arrays(state: Any) -> dict[str, np.ndarray]:
    return {k: getattr(state, k).asnumpy().copy() for k in PROGNOSTIC}


def finite(arrays: dict[str, np.ndarray]) -> dict[str, bool]:
    return {k: bool(np.isfinite(a).all()) for k, a in arrays.items()}


def nonfinite(arrays: dict[str, np.ndarray]) -> dict[str, dict]:
    """Per field with NaN or Inf: how many points, and the first few (index, level)."""
    out = {}
    for k, a in arrays.items():
        bad = ~np.isfinite(a)
        if bad.any():
            out[k] = {
                "count": int(bad.sum()),
                "size": int(a.size),
                "first": np.argwhere(bad)[:5].tolist(),
            }
    return out


def field_transients(sdfg: Any) -> dict[str, int]:
    """The top-level transients `tools.traffic` calls field-sized (`kind_of`: horizontal x K,
    both extents above 1) with the bytes of each; a static build has no symbolic extent."""
    from gt4py_dace_xforms.tools.compare import two_d_transients
    from gt4py_dace_xforms.tools.traffic import kind_of

    out = {}
    for name in two_d_transients(sdfg):
        desc = sdfg.arrays[name]
        shape = tuple(int(e) if str(e).isdigit() else e for e in desc.shape)
        if kind_of(shape) == "field":
            out[name] = shape[0] * shape[1] * desc.dtype.bytes
    return out


def transient_summary(census: list[tuple[Any, int]]) -> dict:
    """Per build: programs and calls in one time step (`census`: `timing.compiled_sdfg_calls`
    of the step), and the 2-D transients its programs keep: distinct (per program) and per
    time step (times the calls), count and MiB."""
    per_program = {}
    count = calls_weighted = 0
    mib = mib_step = 0.0
    for csdfg, calls in census:
        arrays = field_transients(csdfg.sdfg)
        per_program[csdfg.sdfg.name] = {"calls": calls, "transients": sorted(arrays)}
        known = sum(arrays.values()) / 2**20
        count += len(arrays)
        calls_weighted += calls * len(arrays)
        mib += known
        mib_step += calls * known
    return {
        "programs": len(census),
        "calls": sum(n for _, n in census),
        "transients": count,
        "transient_mib": round(mib, 1),
        "transients_per_step": calls_weighted,
        "transient_mib_per_step": round(mib_step, 1),
        "per_program": per_program,
    }


# --- one regime, in its own process -----------------------------------------------------------


def run_regime(opts: argparse.Namespace, regime: str) -> dict:
    """Build the three labels' components, compare one time step, time `opts.rounds` rounds."""
    from gt4py_dace_xforms.measure.timing import (
        compiled_sdfg_calls,
        omp_threads,
        pin_allocator,
        reallocation_faults_per_mib,
        replace_persistent,
        round_order,
    )  # fmt: skip

    sb = _substep()
    allocator, mode = REGIMES[regime]
    pin_allocator(allocator)  # before anything is built: the cost model reads it
    cfg = RunConfig(initial=opts.initial)
    m = model_from_files(pathlib.Path(opts.grid), opts.levels, pathlib.Path(opts.fields))
    labels = tuple(sb.LABELS)
    comps, build_s, descs = {}, {}, {}
    for label in labels:
        desc = descriptor(label, mode)
        descs[label] = sb.describe(desc)
        solve, diff, secs = build(m, desc, cfg.substeps)
        comps[label], build_s[label] = (solve, diff), secs
        log(f"{regime}: {label} built in {secs:.1f} s")
    template = initial_state(m)
    mib = sum(v.ndarray.nbytes for v in template.values() if hasattr(v, "ndarray")) / 2**20
    log(f"{regime}: initial state made ({mib:.0f} MiB)")

    # the first time step of every build, untimed: outputs compared, compiled SDFGs found
    outputs, handles, first_s, transients = {}, {}, {}, {}
    for label in labels:
        flat = copy_state(template)
        got: list = []

        def step(label: str = label, flat: dict = flat, got: list = got) -> None:
            got.append(time_step(*comps[label], flat, cfg))

        t = time.perf_counter()
        census = compiled_sdfg_calls(step)
        first_s[label] = time.perf_counter() - t
        handles[label] = [c for c, _ in census]
        transients[label] = transient_summary(census)
        outputs[label] = prognostic_arrays(got[0][2])
        del flat
    # rounding's reach: stock again, from the initial state moved by one ulp (not timed)
    nudged = copy_state(template)
    nudge_prognostic(nudged)
    reach = sb.compare(
        prognostic_arrays(time_step(*comps["stock"], nudged, cfg)[2]), outputs["stock"]
    )
    del nudged
    threads = omp_threads(opts.threads)
    seconds = {part: {label: [] for label in labels} for part in PARTS}
    batch = 2 * len(labels)
    t0 = time.perf_counter()
    for r in range(opts.rounds):
        if mode == "persistent" and r and r % batch == 0:
            # every batch on newly allocated persistent transients, touched by an untimed step
            for label in labels:
                replace_persistent(handles[label])
                time_step(*comps[label], copy_state(template), cfg)
        shared = copy_state(template)
        for label in round_order(list(labels), r):
            reset_state(shared, template)
            dyn, dif, _ = time_step(*comps[label], shared, cfg)
            seconds["time_step"][label].append(dyn)
            seconds["diffusion"][label].append(dif)
            seconds["total"][label].append(dyn + dif)
        del shared
        if r == 0 or (r + 1) % max(1, opts.rounds // 4) == 0 or r + 1 == opts.rounds:
            log(f"{regime}: round {r + 1}/{opts.rounds} ({time.perf_counter() - t0:.0f} s)")
    span = time.perf_counter() - t0
    return {
        "regime": regime,
        "allocator": allocator,
        "mode": mode,
        "threads": threads,
        "rounds": opts.rounds,
        "span_s": round(span, 1),
        "build_s": {k: round(v, 1) for k, v in build_s.items()},
        "first_step_s": {k: round(v, 2) for k, v in first_s.items()},
        "faults_per_mib": round(reallocation_faults_per_mib(), 1),
        "state_mib": round(mib, 1),
        "descriptors": descs,
        "transients": transients,
        "finite": {label: finite(o) for label, o in outputs.items()},
        "nonfinite": {label: nonfinite(o) for label, o in outputs.items()},
        "library_vs_stock": sb.compare(outputs["library"], outputs["stock"]),
        "aa_vs_stock": sb.compare(outputs["A/A"], outputs["stock"]),
        "rounding_reach": reach,
        "parts": {part: sb._judge(seconds[part]) for part in PARTS},
    }


def prepare_fields(grid: pathlib.Path, levels: int, out: pathlib.Path) -> None:
    """The factories' fields for `grid` at `levels` levels (gt4py's gtfn backend), saved."""
    import gt4py.next as gtx

    from gt4py_dace_xforms.tools import model_setup

    t0 = time.perf_counter()
    s = model_setup.setup(grid, num_levels=levels, backend=gtx.gtfn_cpu)
    fields = collect_fields(s)
    bad = [
        k
        for k, v in fields.items()
        if not np.isfinite(np.asarray(v.asnumpy() if hasattr(v, "ndarray") else v, float)).all()
    ]
    if bad:
        raise RuntimeError(f"the factories computed non-finite fields: {bad}")
    save_fields(fields, out, {"grid": str(grid), "levels": levels})
    log(f"fields computed in {time.perf_counter() - t0:.0f} s: {out}")


# --- tables -----------------------------------------------------------------------------------


def table(doc: dict) -> str:
    sb = _substep()
    meta = doc["meta"]
    lines = [
        f"icon4py {meta.get('icon4py')} SolveNonhydro + Diffusion on the generated torus: "
        f"{meta['cells']} cells ({meta['sizes']}), {meta['levels']} levels; one time step = "
        f"{meta['run']['substeps']} substeps of {meta['run']['dtime'] / meta['run']['substeps']:.0f} s "
        f"+ diffusion ({meta['run']['dtime']:.0f} s)"
    ]
    for res in doc["regimes"]:
        b = res["build_s"]
        lines.append(
            f"\n== {res['regime']} (allocator {res['allocator']}, mode {res['mode']}): "
            f"{res['threads']} thread(s), {res['rounds']} rounds over {res['span_s']} s, "
            f"{res['faults_per_mib']} faults/MiB; build s: stock {b['stock']}, A/A {b['A/A']}, "
            f"library {b['library']}"
        )
        head = (
            f"{'part':<22}  stock ms   library/stock            A/A                      "
            f"floor   verdict"
        )
        lines += [head, "-" * len(head)]
        names = {
            "time_step": f"time_step x{meta['run']['substeps']}",
            "diffusion": "Diffusion.run",
            "total": "time step",
        }
        for part in PARTS:
            t = res["parts"][part]
            lines.append(
                f"{names[part]:<22}  {t['median_ms']['stock']:8.1f}   {sb._iv(t['ratio']['library']):<23}  "
                f"{sb._iv(t['ratio']['A/A']):<23}  ±{100 * t['floor']:4.1f}%  {sb._short(t['verdict'])}"
            )
        cmp_lib, cmp_aa = res["library_vs_stock"], res["aa_vs_stock"]
        lines.append(
            "after one time step, max |diff| / max |stock| per field: library "
            + ", ".join(f"{k} {v['max_rel_diff']:.1e}" for k, v in cmp_lib["outputs"].items())
            + f" ({'equal' if cmp_lib['equal'] else 'not equal'} at rtol {meta['rtol']:g}); A/A "
            + ("bitwise" if all(v["bitwise"] for v in cmp_aa["outputs"].values()) else "DIFFER")
            + "; finite: "
            + ("yes" if all(all(v.values()) for v in res["finite"].values()) else "NO")
        )
        reach = res.get("rounding_reach")
        if reach:
            inside = within_rounding(cmp_lib, reach)
            lines.append(
                "  stock from its state moved by one ulp (rounding's reach): "
                + ", ".join(f"{k} {v['max_rel_diff']:.1e}" for k, v in reach["outputs"].items())
                + "; library within "
                + f"{ROUNDING_FACTOR:g}x of it: "
                + (
                    "yes"
                    if all(inside.values())
                    else "NO: " + ", ".join(k for k, ok in inside.items() if not ok)
                )
            )
        tr = res.get("transients")
        if tr:
            lines.append(
                "2-D transients of one time step's programs (distinct / x calls, MiB x calls): "
                + "; ".join(
                    f"{label} {t['transients']} / {t['transients_per_step']}, "
                    f"{t['transient_mib_per_step']:.0f} MiB ({t['programs']} programs, "
                    f"{t['calls']} calls)"
                    for label, t in tr.items()
                )
            )
        if tr and "stock" in tr and "library" in tr:
            st, lib = tr["stock"]["per_program"], tr["library"]["per_program"]
            changed = [
                f"{name} {len(st[name]['transients'])}->{len(lib[name]['transients'])}"
                for name in st
                if name in lib and st[name]["transients"] != lib[name]["transients"]
            ]
            lines.append("  the library's programs that differ: " + (", ".join(changed) or "none"))
        for label, bad in res.get("nonfinite", {}).items():
            if bad:
                lines.append(
                    f"  {label}: NaN/Inf in "
                    + ", ".join(
                        f"{k} {b['count']}/{b['size']} (first {b['first'][:2]})"
                        for k, b in bad.items()
                    )
                )
    lines.append(
        "\nstock ms: median per round of stock; library/stock and A/A (second stock / stock): "
        "median of the per-round ratios [95 % interval]; floor: how far the A/A interval reaches "
        "from 1, at least 3 %; verdict: faster/slower only when the whole interval lies beyond "
        "the floor (bench/substep.py's statistics). build s: construction of both components "
        "until every program was compiled (gt4py's default parallel builds; A/A after stock "
        "finds stock's builds in the session cache)"
    )
    return "\n".join(lines)


# --- driver -----------------------------------------------------------------------------------


def parse(argv: Optional[list[str]]) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--cells", type=int, default=20480, help="cells of the torus (default 20480)")
    p.add_argument("--levels", type=int, default=65, help="full levels (default 65)")
    p.add_argument("--rounds", type=int, default=12, help="rounds (default 12, a multiple of 6)")
    p.add_argument("--threads", type=int, default=1, help="OpenMP threads (default 1)")
    p.add_argument(
        "--regimes",
        default="glibc,fresh,persistent",
        help=f"comma-separated, one process each ({', '.join(REGIMES)}; default all three)",
    )
    p.add_argument(
        "--grid", default=None, help="ICON grid file (default: the torus written to .build/model/)"
    )
    p.add_argument(
        "--initial",
        action="store_true",
        help="time the run's first time step (at_initial_timestep) instead of a later one",
    )
    p.add_argument(
        "--json",
        default=None,
        help="run file (default bench/model/model_<cells>.json; the table next to it as .txt)",
    )
    p.add_argument(
        "--build-cache",
        default=None,
        metavar="DIR",
        help="keep the builds in DIR/cache_<memory mode> (persistent) for another run: glibc "
        "and fresh share stock's builds; the library's key their regime and its version",
    )
    p.add_argument("--fields", default=None, help=argparse.SUPPRESS)
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    p.add_argument("--prepare", default=None, help=argparse.SUPPRESS)
    opts = p.parse_args(argv)
    opts.regimes = [r.strip() for r in opts.regimes.split(",") if r.strip()]
    if bad := [r for r in opts.regimes if r not in REGIMES]:
        p.error(f"unknown regime(s) {bad}; choose from {', '.join(REGIMES)}")
    return opts


def _child_argv(argv: list[str], regime: str, out: str, grid: str, fields: str) -> list[str]:
    keep, skip = [], False
    for a in argv:
        if skip:
            skip = False
            continue
        if a in ("--regimes", "--json", "--grid"):
            skip = True
            continue
        if a.startswith(("--regimes=", "--json=", "--grid=")):
            continue
        keep.append(a)
    return [*keep, "--regimes", regime, "--grid", grid, "--fields", fields, "--child", out]


def _quiet() -> None:
    warnings.filterwarnings("ignore", message="Python is not running in optimized mode")
    warnings.filterwarnings("ignore", message=r"Library .* already loaded, renaming file")
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    warnings.filterwarnings(
        "ignore", message=r"Tried to remove `None` from the (in|out)-connectors"
    )


def main(argv: Optional[list[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    opts = parse(argv)
    _quiet()
    if opts.prepare:
        prepare_fields(pathlib.Path(opts.grid), opts.levels, pathlib.Path(opts.prepare))
        return 0
    if opts.child:
        result = run_regime(opts, opts.regimes[0])
        pathlib.Path(opts.child).write_text(json.dumps(result, default=str))
        return 0
    t0 = time.perf_counter()
    load_before = os.getloadavg()
    grid = pathlib.Path(opts.grid) if opts.grid else grid_path(opts.cells)
    if not grid.exists():
        from gt4py_dace_xforms.tools import gridfile

        grid.parent.mkdir(parents=True, exist_ok=True)
        gridfile.write(grid, opts.cells)
        log(f"grid file written: {grid}")
    fields = fields_path(grid, opts.levels)
    if not fields.exists() or fields.stat().st_mtime < grid.stat().st_mtime:
        log(f"icon4py's factories on {grid} ({opts.levels} levels, gtfn): {fields}")
        # gtfn's builds are content-keyed and the library plays no part: a persistent cache
        env = {
            **os.environ,
            "GT4PY_BUILD_CACHE_LIFETIME": "persistent",
            "GT4PY_BUILD_CACHE_DIR": str(WORK / "gt4py_gtfn"),
        }
        done = subprocess.run(
            [sys.executable, str(SCRIPT), "--grid", str(grid), "--levels", str(opts.levels),
             "--prepare", str(fields)],
            env=env,
        )  # fmt: skip
        if done.returncode != 0:
            log("the factories failed")
            return 1
    results, failed = [], []
    with tempfile.TemporaryDirectory(prefix="model_") as tmp:
        for regime in opts.regimes:
            out = pathlib.Path(tmp) / f"{regime}.json"
            log(f"== {regime}: a process of its own")
            # stock's builds do not depend on the allocator (the library's key it: `hooks`), so
            # glibc and fresh share a folder and stock compiles once per memory mode
            cache = pathlib.Path(opts.build_cache or tmp) / f"cache_{REGIMES[regime][1]}"
            env = {
                **os.environ,
                "GT4PY_BUILD_CACHE_LIFETIME": "persistent" if opts.build_cache else "session",
                "GT4PY_BUILD_CACHE_DIR": str(cache.resolve()),
                # dace's warnings in gt4py's build workers (which do not inherit the filters)
                "PYTHONWARNINGS": "ignore::UserWarning,ignore::DeprecationWarning",
            }
            doc = _substep().run_child(
                [str(SCRIPT), *_child_argv(argv, regime, str(out), str(grid), str(fields))],
                out, regime, env=env, say=log,
            )  # fmt: skip
            if doc is None:
                failed.append(regime)
                continue
            results.append(doc)
    wall = time.perf_counter() - t0
    sizes = {}
    try:
        import netCDF4

        with netCDF4.Dataset(grid) as ds:
            sizes = {d: len(ds.dimensions[d]) for d in ("cell", "edge", "vertex")}
    except Exception:  # noqa: BLE001
        pass
    sb = _substep()
    meta = {
        "date": datetime.datetime.now().isoformat(timespec="seconds"), "host": platform.node(),
        "python": platform.python_version(), "cpus": os.cpu_count(), "argv": argv,
        "cells": opts.cells, "sizes": sizes, "levels": opts.levels, "grid": str(grid),
        "run": dataclasses.asdict(RunConfig(initial=opts.initial)), "rounds": opts.rounds,
        "threads": opts.threads, "regimes": opts.regimes, "rtol": sb.RTOL,
        "wall_s": round(wall, 1), "failed_regimes": failed,
        "load_average_before": load_before, "load_average_after": os.getloadavg(),
    }  # fmt: skip
    try:
        from importlib.metadata import version

        import dace
        import gt4py

        meta.update(
            gt4py=gt4py.__version__,
            dace=dace.__version__,
            icon4py=version("icon4py-atmosphere-dycore"),
        )
    except Exception:  # noqa: BLE001
        pass
    doc = {"meta": meta, "regimes": results}
    text = table(doc) + (
        f"\n\nload average before {', '.join(f'{x:.2f}' for x in load_before)}, after "
        f"{', '.join(f'{x:.2f}' for x in meta['load_average_after'])}; wall time {wall:.0f} s"
    )
    print(text, flush=True)
    sb._write(doc, text, opts.json or str(HERE / "model" / f"model_{opts.cells}.json"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
