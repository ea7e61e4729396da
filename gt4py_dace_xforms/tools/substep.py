"""The programs one dycore substep runs: icon4py 0.4.1's `SolveNonhydro.time_step`.

Read off `solve_nonhydro.py` (`time_step`, `run_predictor_step`, `run_corrector_step`) and
`velocity_advection.py` (`run_predictor_step`, `run_corrector_step`) of icon4py 0.4.1, in
the order they run. Each `SubstepCall` says which program runs, under which configuration
(`when`), in which substeps (the first, the later ones) and with which run-time switches
(`switches`: the values `time_step` passes, which `setup_program` compiles as variants).

Left out, with why:

* `init_test_fields` (only with `p_test_run`), `en_smag_fac_for_zero_nshift` (once, at
  construction);
* `compute_rayleigh_damping_factor`: `_get_rayleigh_damping_factor` runs it only when the
  substep's `dtime` changes, i.e. on the model's first substep, not per substep;
* the halo exchanges between programs (communication, not a gt4py program).

Configuration: icon4py's `NonHydrostaticConfig` defaults (`divdamp_type` 3, `itime_scheme`
MOST_EFFICIENT, so the predictor's vertical advection is skipped after the initial time
step), `limited_area` from the layout, `lprep_adv` (tracer transport) an option.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Collection, Union

from gt4py_dace_xforms.tools.programs import ProgramRef


_DYCORE = "icon4py.model.atmosphere.dycore"
_ST = f"{_DYCORE}.stencils"


@dataclasses.dataclass(frozen=True)
class SubstepCall:
    """One call site of `SolveNonhydro.time_step`.

    Attributes:
        ref: the program (`module:name`).
        step: "predictor", "corrector" or "end" (after the corrector, in `time_step`).
        first: calls in the first substep of a time step.
        later: calls in each later substep.
        when: the configuration the call needs: "" (always), "limited_area",
            "limited_area and lprep_adv".
        switches: run-time switches `time_step` passes this call (the rest take
            `tools.static_values`' values); a program without such a parameter ignores it.
        bounds: the generic `horizontal_start` / `horizontal_end` as this call site binds
            them (`setup_program`'s `horizontal_sizes`): the layout's zone bound it names;
            "" (or none given): the whole array, `tools.static_values`' rule.
        levels: the call site's `vertical_start` (negative: counted from the number of
            full levels, -1 the lowest level), and its `vertical_end` less the number of
            full levels (1: the call runs over the half levels).
    """

    ref: ProgramRef
    step: str
    first: int
    later: int
    when: str = ""
    switches: tuple[tuple[str, Any], ...] = ()
    bounds: Union[tuple[()], tuple[str, str]] = ()
    levels: tuple[int, int] = (0, 0)

    @property
    def name(self) -> str:
        """The called program's name."""
        return self.ref.name

    def runs(self, *, limited_area: bool, lprep_adv: bool = False) -> bool:
        """Whether the call is made under this configuration (its `when`).

        Args:
            limited_area: a limited-area run.
            lprep_adv: icon4py's `lprep_adv` set.

        Returns:
            True where the call is made.
        """
        return {
            "": True,
            "limited_area": limited_area,
            "limited_area and lprep_adv": limited_area and lprep_adv,
        }[self.when]

    def calls(self, substep: str) -> int:
        """Calls in the `substep` ("first" or "later").

        Args:
            substep: "first" or "later".

        Returns:
            the number of calls.

        Raises:
            ValueError: another substep.
        """
        if substep not in ("first", "later"):
            raise ValueError(f"substep must be 'first' or 'later', not {substep!r}")
        return self.first if substep == "first" else self.later

    def switch_values(self, substep: str) -> dict[str, Any]:
        """The switches of this call in `substep`, with `at_first_substep` set by it.

        Args:
            substep: "first" or "later".

        Returns:
            switch name -> value.
        """
        values = dict(self.switches)
        values["at_first_substep"] = substep == "first"
        return values

    def static_values(
        self, substep: str, layout: Any, n_levels: int = 80, program: Any = None
    ) -> dict[str, Any]:
        """Every static argument of this call as the model binds it on `layout` (a
        `tools.layouts.Layout`): `tools.static_values`' per-parameter rules, the call
        site's `horizontal_start` / `horizontal_end`, and the switches of `substep`.

        Args:
            substep: "first" or "later".
            layout: the `Layout`.
            n_levels: model levels.
            program: the loaded program (None: loaded here).

        Returns:
            name -> value.
        """
        from gt4py_dace_xforms.tools.static_values import program_static_values

        program = program if program is not None else self.ref.load()
        values = program_static_values(
            program, layout=layout, n_cells=layout.sizes["Cell"], n_levels=n_levels
        )
        for name, zone in zip(("horizontal_start", "horizontal_end"), self.bounds):
            if zone and name in values:
                values[name] = layout.values[zone]
        start = self.levels[0] if self.levels[0] >= 0 else n_levels + self.levels[0]
        for name, value in zip(
            ("vertical_start", "vertical_end"), (start, n_levels + self.levels[1])
        ):
            if name in values:
                values[name] = value
        for name, value in self.switch_values(substep).items():
            if name in values:
                values[name] = value
        return values


def _call(
    module: str,
    name: str,
    step: str,
    first: int,
    later: int,
    when: str = "",
    bounds: Union[tuple[()], tuple[str, str]] = (),
    levels: tuple[int, int] = (0, 0),
    **switches: Any,
) -> SubstepCall:
    return SubstepCall(
        ProgramRef(module, name),
        step,
        first,
        later,
        when,
        tuple(sorted(switches.items())),
        bounds,
        levels,
    )


_HALF = (0, 1)


_EDGES_LB5 = ("start_edge_lateral_boundary_level_5", "end_edge_halo_level_2")
_EDGES_NUDGING2 = ("start_edge_nudging_level_2", "end_edge_local")
_CELLS_LB4 = ("start_cell_lateral_boundary_level_4", "end_cell_halo")
_CELLS_BOUNDARY = ("start_cell_lateral_boundary", "end_cell_lateral_boundary_level_4")


#: In call order. `compute_advection_in_horizontal_momentum` is called twice in the first
#: substep (predictor and corrector velocity advection) and once in the later ones; the
#: model passes it `apply_extra_diffusion_on_vn=True` (velocity_advection.py, hard-coded).
SUBSTEP: tuple[SubstepCall, ...] = (
    # predictor: velocity advection only in the first substep
    _call(
        f"{_ST}.compute_diagnostics_from_normal_wind",
        "compute_diagnostics_from_normal_wind",
        "predictor",
        1,
        0,
        bounds=_EDGES_LB5,
        levels=_HALF,
        skip_compute_predictor_vertical_advection=True,
    ),
    _call(
        f"{_ST}.compute_advection_in_vertical_momentum_equation",
        "compute_advection_in_predictor_vertical_momentum",
        "predictor",
        1,
        0,
        bounds=_CELLS_LB4,
        skip_compute_predictor_vertical_advection=True,
    ),
    _call(
        f"{_ST}.compute_advection_in_horizontal_momentum_equation",
        "compute_advection_in_horizontal_momentum",
        "predictor",
        2,
        1,
        bounds=_EDGES_NUDGING2,
        apply_extra_diffusion_on_vn=True,
    ),
    _call(
        f"{_ST}.compute_cell_diagnostics_for_dycore",
        "compute_perturbed_quantities_and_interpolation",
        "predictor",
        1,
        1,
    ),
    _call(
        f"{_ST}.compute_hydrostatic_correction_term",
        "compute_hydrostatic_correction_term",
        "predictor",
        1,
        1,
        bounds=_EDGES_NUDGING2,
        levels=(-1, 0),
    ),  # the lowest level only (vertical_start = num_levels - 1)
    _call(
        f"{_ST}.compute_edge_diagnostics_for_dycore_and_update_vn",
        "compute_rho_theta_pgrad_and_update_vn",
        "predictor",
        1,
        1,
        bounds=("", "end_edge_halo_level_2"),
    ),
    _call(
        f"{_ST}.compute_horizontal_velocity_quantities",
        "compute_horizontal_velocity_quantities_and_fluxes",
        "predictor",
        1,
        1,
        bounds=_EDGES_LB5,
        levels=_HALF,
    ),
    _call(
        f"{_ST}.vertically_implicit_dycore_solver",
        "vertically_implicit_solver_at_predictor_step",
        "predictor",
        1,
        1,
    ),
    _call(
        f"{_DYCORE}.solve_nonhydro_stencils",
        "stencils_61_62",
        "predictor",
        1,
        1,
        "limited_area",
        _CELLS_BOUNDARY,
        _HALF,
    ),
    _call(
        f"{_ST}.compute_dwdz_for_divergence_damping",
        "compute_dwdz_for_divergence_damping",
        "predictor",
        1,
        1,
        "limited_area",
        _CELLS_BOUNDARY,
    ),
    # corrector
    _call(
        f"{_ST}.compute_advection_in_vertical_momentum_equation",
        "compute_advection_in_corrector_vertical_momentum",
        "corrector",
        1,
        1,
        bounds=_CELLS_LB4,
    ),
    _call(
        f"{_ST}.compute_cell_diagnostics_for_dycore",
        "compute_interpolation_and_nonhydro_buoy",
        "corrector",
        1,
        1,
        bounds=("start_cell_lateral_boundary_level_3", "end_cell_local"),
        levels=(1, 0),
    ),
    _call(
        f"{_ST}.compute_edge_diagnostics_for_dycore_and_update_vn",
        "apply_divergence_damping_and_update_vn",
        "corrector",
        1,
        1,
        bounds=_EDGES_NUDGING2,
    ),
    _call(
        f"{_ST}.compute_horizontal_velocity_quantities",
        "compute_averaged_vn_and_fluxes",
        "corrector",
        1,
        1,
        bounds=_EDGES_LB5,
    ),
    _call(
        f"{_ST}.vertically_implicit_dycore_solver",
        "vertically_implicit_solver_at_corrector_step",
        "corrector",
        1,
        1,
    ),
    _call(
        f"{_ST}.init_cell_kdim_field_with_zero_wp",
        "init_cell_kdim_field_with_zero_wp",
        "corrector",
        1,
        0,
        "limited_area and lprep_adv",
        _CELLS_BOUNDARY,
        _HALF,
    ),
    _call(
        f"{_ST}.update_mass_flux_weighted",
        "update_mass_flux_weighted",
        "corrector",
        1,
        1,
        "limited_area and lprep_adv",
        _CELLS_BOUNDARY,
        (1, 0),
    ),
    # after the corrector
    _call(
        f"{_ST}.compute_exner_from_rhotheta",
        "compute_exner_from_rhotheta",
        "end",
        1,
        1,
        "limited_area",
        _CELLS_BOUNDARY,
    ),
    _call(
        f"{_ST}.update_theta_and_exner_in_halo",
        "update_theta_and_exner_in_halo",
        "end",
        1,
        1,
        bounds=("start_cell_halo", "end_cell_end"),
    ),
)


def substep_calls(
    *, limited_area: bool, lprep_adv: bool = False, programs: Collection[str] | None = None
) -> list[SubstepCall]:
    """The calls a substep makes under this configuration, in order; `programs` (names)
    keeps only those (ValueError naming any that no call has).

    Args:
        limited_area: a limited-area run.
        lprep_adv: icon4py's `lprep_adv` set.
        programs: program names to keep (None: all).

    Returns:
        the calls.

    Raises:
        ValueError: a name no call has.
    """
    calls = [c for c in SUBSTEP if c.runs(limited_area=limited_area, lprep_adv=lprep_adv)]
    if programs:
        wanted = set(programs)
        if unknown := wanted - {c.name for c in SUBSTEP}:
            raise ValueError(
                f"not a substep program: {sorted(unknown)}; choose from "
                f"{sorted({c.name for c in SUBSTEP})}"
            )
        calls = [c for c in calls if c.name in wanted]
    return calls
