"""icon4py's grid, geometry, interpolation and metrics built from an ICON grid file, as
icon4py's driver builds them: the grid manager reads the file, `GridGeometry` computes the
geometry from its coordinates and lengths, `InterpolationFieldsFactory` and
`MetricsFieldsFactory` the coefficients `SolveNonhydro` and `Diffusion` take, on a
vertical grid from `VerticalGridConfig` (vct_a computed, not read) over flat topography
(zero, as icon4py's `flat_topography`). Single rank, no halo exchange.

Fields are computed when first asked for (`factory.get(name)`); `NONHYDRO_FIELDS` and
`DIFFUSION_FIELDS` name, per factory, what the components' states hold.
"""

from __future__ import annotations

import dataclasses
import pathlib
from typing import Any, Mapping

import numpy as np


#: The vertical grid `setup` builds unless told otherwise: `VerticalGridConfig`'s own
#: (ICON's namelist) defaults (model top 23.5 km, flat above 16 km), with the Rayleigh
#: damping starting at 12.5 km, below the model top (the default, 45 km, is above it).
DAMPING_HEIGHT = 12500.0


@dataclasses.dataclass(frozen=True)
class ModelSetup:
    """What `setup` builds: `grid_manager` (its `coordinates`, `geometry_fields`,
    `decomposition_info`), `grid` (`IconGrid`), `vertical_grid`, and the factories
    `geometry` (`GridGeometry`), `interpolation` (`InterpolationFieldsFactory`), `metrics`
    (`MetricsFieldsFactory`); `backend` the gt4py backend they compute with."""

    grid_manager: Any
    grid: Any
    vertical_grid: Any
    geometry: Any
    interpolation: Any
    metrics: Any
    backend: Any


def _attribute_names() -> dict[str, dict[str, str]]:
    """Per factory, the state field name -> the factory's field name (icon4py's attributes)."""
    from icon4py.model.common.interpolation import interpolation_attributes as ia
    from icon4py.model.common.metrics import metrics_attributes as ma

    interpolation = {
        "c_lin_e": ia.C_LIN_E,
        "e_bln_c_s": ia.E_BLN_C_S,
        "geofac_div": ia.GEOFAC_DIV,
        "geofac_rot": ia.GEOFAC_ROT,
        "geofac_n2s": ia.GEOFAC_N2S,
        "geofac_grdiv": ia.GEOFAC_GRDIV,
        "geofac_grg_x": ia.GEOFAC_GRG_X,
        "geofac_grg_y": ia.GEOFAC_GRG_Y,
        "e_flx_avg": ia.E_FLX_AVG,
        "pos_on_tplane_e_1": ia.POS_ON_TPLANE_E_X,
        "pos_on_tplane_e_2": ia.POS_ON_TPLANE_E_Y,
        "c_intp": ia.CELL_AW_VERTS,
        "nudgecoeff_e": ia.NUDGECOEFFS_E,
        "rbf_coeff_1": ia.RBF_VEC_COEFF_V1,
        "rbf_coeff_2": ia.RBF_VEC_COEFF_V2,
        "rbf_vec_coeff_e": ia.RBF_VEC_COEFF_E,
    }
    metrics = {
        "mask_prog_halo_c": ma.MASK_PROG_HALO_C,
        "rayleigh_w": ma.RAYLEIGH_W,
        "wgtfac_c": ma.WGTFAC_C,
        "wgtfacq_c": ma.WGTFACQ_C,
        "wgtfac_e": ma.WGTFAC_E,
        "wgtfacq_e": ma.WGTFACQ_E,
        "time_extrapolation_parameter_for_exner": ma.EXNER_EXFAC,
        "reference_exner_at_cells_on_model_levels": ma.EXNER_REF_MC,
        "reference_rho_at_cells_on_model_levels": ma.RHO_REF_MC,
        "reference_theta_at_cells_on_model_levels": ma.THETA_REF_MC,
        "reference_rho_at_edges_on_model_levels": ma.RHO_REF_ME,
        "reference_theta_at_edges_on_model_levels": ma.THETA_REF_ME,
        "reference_theta_at_cells_on_half_levels": ma.THETA_REF_IC,
        "ddz_of_reference_exner_at_cells_on_half_levels": ma.D_EXNER_DZ_REF_IC,
        "ddqz_z_half": ma.DDQZ_Z_HALF,
        "d2dexdz2_fac1_mc": ma.D2DEXDZ2_FAC1_MC,
        "d2dexdz2_fac2_mc": ma.D2DEXDZ2_FAC2_MC,
        "ddxn_z_full": ma.DDXN_Z_FULL,
        "ddqz_z_full_e": ma.DDQZ_Z_FULL_E,
        "ddxt_z_full": ma.DDXT_Z_FULL,
        "inv_ddqz_z_full": ma.INV_DDQZ_Z_FULL,
        "vertoffset_gradp": ma.VERTOFFSET_GRADP,
        "zdiff_gradp": ma.ZDIFF_GRADP,
        "nflat_gradp": ma.NFLAT_GRADP,
        "pg_exdist": ma.PG_EXDIST_DSL,
        "exner_w_explicit_weight_parameter": ma.EXNER_W_EXPLICIT_WEIGHT_PARAMETER,
        "exner_w_implicit_weight_parameter": ma.EXNER_W_IMPLICIT_WEIGHT_PARAMETER,
        "horizontal_mask_for_3d_divdamp": ma.HORIZONTAL_MASK_FOR_3D_DIVDAMP,
        "scaling_factor_for_3d_divdamp": ma.SCALING_FACTOR_FOR_3D_DIVDAMP,
        "coeff1_dwdz": ma.COEFF1_DWDZ,
        "coeff2_dwdz": ma.COEFF2_DWDZ,
        "coeff_gradekin": ma.COEFF_GRADEKIN,
    }
    diffusion_metrics = {
        "theta_ref_mc": ma.THETA_REF_MC, "wgtfac_c": ma.WGTFAC_C,
        "zd_vertoffset": ma.ZD_VERTOFFSET, "zd_diffcoef": ma.ZD_DIFFCOEF,
        "zd_intcoef": ma.ZD_INTCOEF,
    }  # fmt: skip
    return {"interpolation": interpolation, "metrics": metrics, "diffusion": diffusion_metrics}


def required_fields() -> Mapping[str, Mapping[str, str]]:
    """What `SolveNonhydro`'s and `Diffusion`'s states take from the factories.

    Returns:
        {"interpolation": ..., "metrics": ...}: state field name -> factory field name, for
        `InterpolationState` / `DiffusionInterpolationState` and `MetricStateNonHydro` /
        `DiffusionMetricState` together.
    """
    names = _attribute_names()
    return {"interpolation": names["interpolation"],
            "metrics": {**names["metrics"], **names["diffusion"]}}  # fmt: skip


def setup(
    grid_file: str | pathlib.Path,
    *,
    num_levels: int = 65,
    backend: Any = None,
    vertical_config: Any = None,
    interpolation_config: Any = None,
    metrics_config: Any = None,
) -> ModelSetup:
    """Read `grid_file` with icon4py's grid manager and build its geometry, interpolation and
    metrics factories (module docstring). Nothing is computed until a field is asked for.

    Args:
        grid_file: an ICON grid file (`tools.gridfile.write` writes one).
        num_levels: full levels of the vertical grid (ignored when `vertical_config` is given).
        backend: gt4py backend of the factories' programs and fields (None: embedded).
        vertical_config: icon4py `VerticalGridConfig`; its defaults with `num_levels` and
            `DAMPING_HEIGHT` if None.
        interpolation_config: icon4py `InterpolationConfig` (its defaults if None).
        metrics_config: icon4py `MetricsConfig` (its defaults if None).

    Returns:
        The grid manager, grid, vertical grid and the three factories.
    """
    import gt4py.next as gtx
    from icon4py.model.common import dimension as dims
    from icon4py.model.common.decomposition import definitions as decomposition
    from icon4py.model.common.grid import (
        geometry,
        geometry_attributes,
        geometry_config,
        grid_manager as gm,
        vertical as v_grid,
    )
    from icon4py.model.common.interpolation import interpolation_attributes, interpolation_factory
    from icon4py.model.common.metrics import metrics_attributes, metrics_factory

    if vertical_config is None:
        vertical_config = v_grid.VerticalGridConfig(
            num_levels=num_levels, rayleigh_damping_height=DAMPING_HEIGHT
        )
    manager = gm.GridManager(str(grid_file), vertical_config)
    manager(allocator=backend, keep_skip_values=True)
    grid, decomposition_info = manager.grid, manager.decomposition_info
    vct_a, vct_b = v_grid.get_vct_a_and_vct_b(vertical_config, backend)
    vertical_grid = v_grid.VerticalGrid(vertical_config, vct_a, vct_b)
    geometry_source = geometry.GridGeometry(
        grid=grid,
        decomposition_info=decomposition_info,
        backend=backend,
        coordinates=manager.coordinates,
        extra_fields=manager.geometry_fields,
        metadata=geometry_attributes.attrs,
        config=geometry_config.GeometryConfig(),
        process_props=decomposition.SingleNodeProcessProperties(),
        exchange=decomposition.single_node_exchange,
    )
    interpolation = interpolation_factory.InterpolationFieldsFactory(
        grid=grid,
        decomposition_info=decomposition_info,
        geometry_source=geometry_source,
        backend=backend,
        metadata=interpolation_attributes.attrs,
        config=interpolation_config or interpolation_factory.InterpolationConfig(),
    )
    # flat topography; numpy's stubs do not satisfy gt4py's NDArrayObject protocol
    topography = gtx.as_field((dims.CellDim,), np.zeros(grid.num_cells), allocator=backend)  # type: ignore[arg-type]
    metrics = metrics_factory.MetricsFieldsFactory(
        grid=grid,
        vertical_grid=vertical_grid,
        decomposition_info=decomposition_info,
        geometry_source=geometry_source,
        topography=topography,
        interpolation_source=interpolation,
        backend=backend,
        metadata=metrics_attributes.attrs,
        config=metrics_config or metrics_factory.MetricsConfig(),
    )
    return ModelSetup(
        manager, grid, vertical_grid, geometry_source, interpolation, metrics, backend
    )
