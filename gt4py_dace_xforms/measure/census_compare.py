"""Census programs compiled three ways, run on the same random inputs, outputs compared.

`compare_program()` compiles one program with gt4py's stock DaCe backend, with the
library's default backend (`CostModel("cpu")`) and with "everything sound"
(`InlineWhereSound()`) (`compare.stock_build` / `compare.inline_build`), runs each on
fresh copies of one set of random inputs (`programs.random_args`, neighbor tables from
`programs.offset_provider_for` with a fixed seed), and compares every field argument
afterwards (the outputs; the inputs must come back untouched in every build too).
Stock runs twice: if its two runs differ, the program is not deterministic on these
inputs and a difference between builds would prove nothing (`stock_repeatable`).

Tolerance: inlining evaluates the producer's expression inside the consumer; within one
element nothing is reordered, but gt4py compiles with `-O3 -march=native` and GCC's
default `-ffp-contract=fast`, so once the producer's `a * b` and the consumer's `+ c`
sit in one expression the compiler may fuse them into one FMA (one rounding instead of
two). A field is "equal" if it is bitwise equal or every element is within
`RTOL * |stock| + ATOL_SCALE * max|stock|` (the bound `tests/test_icon4py.py` uses for
the target: rounding, relative to the field's magnitude, since differences of O(1)
values can cancel). Each field's bitwise verdict and largest differences are reported
too, so a rounding-level difference is visible as such. With `exact=True` (`census
--compare --exact`) every build is compiled with gt4py's own flags plus
`-ffp-contract=off` (`exact_cxxflags()`, passed through `CXXFLAGS`, which gt4py reads),
and a field must be bitwise equal: without contraction the inlined expression rounds
exactly as the materialized one, so any difference is a change of what is computed.

Inputs: every horizontal dimension gets `n_horizontal` elements (random tables need no
real grid, and every start/end index then fits every dimension), every K field
`n_levels + 1` levels (the half-level size; model-level fields get one level more than
they need, never read inside the domain), local dimensions their icosahedral neighbor
count. Integer and boolean scalars (domain bounds, switches) come from `scalars_for()`:
values in the shape icon4py's own drivers call the programs with, chosen so that the
`concat_where` regions are not empty.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import time
from typing import Any, Callable, Iterable, Iterator, Mapping, Optional

import numpy as np

from gt4py_dace_xforms.integration.workers import restart_build_workers
from gt4py_dace_xforms.policy import CostModel, InlineWhereSound
from gt4py_dace_xforms.tools.compare import Build, inline_build, stock_build, two_d_transients
from gt4py_dace_xforms.tools.programs import (
    ICOSAHEDRAL_NEIGHBORS,
    ProgramRef,
    copy_args,
    offset_provider_for,
    random_args,
)


#: The builds, in the order they are compiled and reported ("stock" is the reference).
BUILDS = ("stock", "model", "sound")
#: Per element: |build - stock| <= RTOL * |stock| + ATOL_SCALE * max|stock| (see module doc).
RTOL = 1e-13
ATOL_SCALE = 1e-14
#: Added to gt4py's compiler flags by `exact`: no fusing of a multiply and an add across
#: what stock keeps as two statements.
NO_CONTRACTION = "-ffp-contract=off"
#: Default input sizes: small enough to compile and run quickly, large enough that every
#: region the scalars below delimit holds several elements.
N_HORIZONTAL = 64
N_LEVELS = 12
SEED = 0

#: Names of the horizontal dimensions (every other non-K, non-local dimension is an error).
HORIZONTAL = ("Cell", "Edge", "Vertex")


def scalars_for(program_name: str, n: int, nlev: int) -> dict[str, Any]:
    """Integer and boolean scalar arguments of the census programs, by parameter name
    (`n`: elements per horizontal dimension, `nlev`: model levels).

    Domain ends are `n` and `nlev` (`nlev + 1` for the programs that icon4py calls on
    half levels), lateral-boundary and nudging starts fall inside the horizontal
    domain so both sides of every `concat_where` on them are taken; switches select the
    branches icon4py's default configuration runs (and the extra-diffusion / IAU / limited
    area paths, which add code).

    Args:
        program_name: the census program's name.
        n: elements per horizontal dimension.
        nlev: model levels.

    Returns:
        parameter name -> value.
    """
    from icon4py.model.atmosphere.diffusion.diffusion import TurbulenceShearForcingType
    from icon4py.model.atmosphere.dycore.dycore_states import (
        DivergenceDampingType,
        HorizontalPressureDiscretizationType,
    )
    from icon4py.model.common.constants import RayleighType

    half_levels = program_name in (
        "compute_diagnostics_from_normal_wind",
        "compute_horizontal_velocity_quantities_and_fluxes",
        "compute_wgtfac_c",
        "compute_ddqz_z_half",
    )
    values: dict[str, Any] = {
        # vertical
        "vertical_start": 0, "vertical_end": nlev + 1 if half_levels else nlev,
        "vertical_start_index_model_top": 0, "vertical_end_index_model_surface": nlev + 1,
        "model_top": 0, "surface_level": nlev + 1, "nlev": nlev,
        "nflatlev": 4, "nflat_gradp": 6, "flat_level_index_plus1": 5,
        "end_index_of_damping_layer": 3, "kstart_moist": 2, "nrdmax": 3,
        # horizontal: the whole domain, regions inside it
        "horizontal_start": 0, "horizontal_end": n,
        "lateral_boundary_level_2": n // 8,
        "start_2nd_nudge_line_idx_e": n // 4,
        "interior_idx": n // 8, "halo_idx": n - n // 8,
        "start_cell_lateral_boundary_level_3": n // 16,
        "end_cell_local": n - n // 8, "end_cell_halo": n, "end_cell_halo_level_2": n,
        "start_edge_lateral_boundary": n // 16, "start_edge_lateral_boundary_level_7": n // 8,
        "start_edge_nudging_level_2": n // 4, "end_edge_nudging": n // 4,
        "end_edge_local": n - n // 8, "end_edge_halo": n,
        "start_cell_index_nudging": n // 8, "end_cell_index_local": n - n // 8,
        "start_cell_index_lateral_lvl3": n // 16, "end_cell_index_halo_lvl1": n,
        "horizontal_start_distance": n // 4, "horizontal_end_distance": n - n // 4,
        # switches
        "igradp_method": int(HorizontalPressureDiscretizationType.TAYLOR_HYDRO),
        "type_shear": int(TurbulenceShearForcingType.VERTICAL_HORIZONTAL_OF_HORIZONTAL_VERTICAL_WIND),
        "rayleigh_type": int(RayleighType.KLEMP),
        "divdamp_type": int(DivergenceDampingType.COMBINED),
        "limited_area": True, "apply_extra_diffusion_on_vn": True,
        "skip_compute_predictor_vertical_advection": False, "is_iau_active": True,
        "lprep_adv": True, "at_first_substep": True, "at_last_substep": True,
    }  # fmt: skip
    return values


def census_inputs(
    program: Any, *, n_horizontal: int = N_HORIZONTAL, n_levels: int = N_LEVELS, seed: int = SEED
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Keyword arguments and offset provider for one census program (see module doc).

    Floating-point fields are random in [0.5, 1.5); boolean fields random masks;
    integer fields random 0/1 (vertical offsets such as `ikoffset` stay in range), except
    the index fields `k_lev` / `e_lev` (the index itself) and `flat_idx_max` (a level).
    ValueError for a scalar no value is known for.

    Args:
        program: the gt4py program.
        n_horizontal: elements per horizontal dimension.
        n_levels: model levels.
        seed: the random seed.

    Returns:
        `(kwargs, offset_provider)`.
    """
    name = program.definition_stage.definition.__name__
    sizes = {d: n_horizontal for d in HORIZONTAL} | {"K": n_levels} | dict(ICOSAHEDRAL_NEIGHBORS)
    provider = offset_provider_for(program, sizes={d: n_horizontal for d in HORIZONTAL}, seed=seed)
    wanted = scalars_for(name, n_horizontal, n_levels)
    params = program.past_stage.past_node.type.definition.pos_or_kw_args
    scalars = {k: v for k, v in wanted.items() if k in params}
    args = random_args(
        program,
        sizes,
        seed,
        scalars=scalars,
        extent=lambda _p, dim, size: size + 1 if dim == "K" else size,
    )
    return model_like_fields(args, n_levels, seed), provider


def model_like_fields(
    args: dict[str, Any], n_levels: int, seed: int, *, level_offsets: bool = False
) -> dict[str, Any]:
    """`args` (from `random_args`) with the fields that are not plain floats made like the
    model's: masks 70 % true, `k_lev` / `e_lev` the level index, `flat_idx_max` a level;
    with `level_offsets`, integer (.., K) fields (vertical offsets such as `ikoffset`) 0 on
    the lowest full level, where the programs read k + offset + 1 and a 1 would read past
    the K + 1 levels. Returns `args`, changed in place.

    Args:
        args: the program's arguments (`random_args`).
        n_levels: model levels.
        seed: the random seed.
        level_offsets: make integer vertical-offset fields model-like too.

    Returns:
        a new dict of arguments.
    """
    import gt4py.next as gtx

    rng = np.random.default_rng(seed + 1)
    for pname, value in args.items():
        if not hasattr(value, "asnumpy"):
            continue
        data = value.asnumpy()
        dims = [d.value for d in value.domain.dims]
        if data.dtype == np.bool_:
            data = rng.random(data.shape) < 0.7
        elif pname in ("k_lev", "e_lev"):
            data = np.arange(data.shape[0], dtype=data.dtype)
        elif pname == "flat_idx_max":
            data = rng.integers(0, n_levels, size=data.shape, dtype=data.dtype)
        elif level_offsets and np.issubdtype(data.dtype, np.integer) and "K" in dims:
            data = data.copy()
            index = [slice(None)] * data.ndim
            index[dims.index("K")] = slice(n_levels - 1, None)
            data[tuple(index)] = 0
        else:
            continue
        args[pname] = gtx.as_field(value.domain, data)
    return args


@dataclasses.dataclass
class BuildRun:
    """One build of one program: what the library did, and how long building took."""

    label: str
    #: reads the library's pass applied, over every `gt_auto_optimize` hook call (0 for stock)
    inlines: int = 0
    #: 2-D transients of the top-level SDFG at the end of gt4py's top-level stage
    transients: int = 0
    #: lowering, optimizing, compiling and the first run
    seconds: float = 0.0
    error: Optional[str] = None


@dataclasses.dataclass
class FieldDiff:
    """One field of one build against stock."""

    field: str
    build: str
    bitwise: bool
    within_tolerance: bool
    max_abs: float
    max_rel: float


def diff_field(
    field: str, build: str, value: np.ndarray, reference: np.ndarray, *, exact: bool = False
) -> FieldDiff:
    """`value` against `reference` (NaN equals NaN at the same place; infinities must match).
    `exact`: within tolerance only if bitwise equal (builds without FP contraction).

    Args:
        field: the field's name.
        build: the build's label.
        value: the build's output.
        reference: stock's output.
        exact: require bitwise equality.

    Returns:
        the `FieldDiff`.
    """
    if value.shape != reference.shape:
        return FieldDiff(field, build, False, False, float("inf"), float("inf"))
    bitwise = bool(np.array_equal(value, reference, equal_nan=value.dtype.kind == "f"))
    if bitwise or value.dtype.kind != "f":
        return FieldDiff(
            field,
            build,
            bitwise,
            bitwise,
            0.0 if bitwise else float("inf"),
            0.0 if bitwise else float("inf"),
        )
    same_nan = np.array_equal(np.isnan(value), np.isnan(reference))
    finite = np.isfinite(reference) & np.isfinite(value)
    same_inf = np.array_equal(
        np.where(finite, 0.0, value), np.where(finite, 0.0, reference), equal_nan=True
    )
    err = np.abs(value[finite] - reference[finite])
    ref = np.abs(reference[finite])
    max_abs = float(err.max()) if err.size else 0.0
    max_rel = float((err / np.where(ref > 0, ref, np.inf)).max()) if err.size else 0.0
    scale = float(ref.max()) if ref.size else 0.0
    close = not exact and bool(np.all(err <= RTOL * ref + ATOL_SCALE * scale))
    return FieldDiff(field, build, False, same_nan and same_inf and close, max_abs, max_rel)


@dataclasses.dataclass
class ProgramComparison:
    """The three builds of one program and every field compared (`error`: the inputs
    could not be made; a build's own failure is in its `BuildRun`)."""

    program: str
    runs: dict[str, BuildRun] = dataclasses.field(default_factory=dict)
    diffs: list[FieldDiff] = dataclasses.field(default_factory=list)
    stock_repeatable: bool = True
    #: fields stock's run changed (the outputs it wrote on these inputs: none would make
    #: the comparison vacuous)
    written: list[str] = dataclasses.field(default_factory=list)
    #: field arguments (each compared per library build)
    fields: int = 0
    seconds: float = 0.0
    error: Optional[str] = None
    #: built without floating-point contraction and compared bitwise (`exact_cxxflags`)
    exact: bool = False

    @property
    def short_name(self) -> str:
        """The program's name without its module path."""
        return self.program.rpartition(":")[2]

    @property
    def errors(self) -> list[str]:
        """The comparison's own error and each build's, as text."""
        found = [f"{self.error}"] if self.error else []
        return found + [f"{r.label}: {r.error}" for r in self.runs.values() if r.error]

    @property
    def equal(self) -> bool:
        """Every build compiled, stock is repeatable and writes something, every field within tolerance."""
        return (
            not self.errors
            and self.stock_repeatable
            and bool(self.written)
            and len(self.runs) == len(BUILDS)
            and all(d.within_tolerance for d in self.diffs)
        )

    @property
    def bitwise(self) -> bool:
        """Whether every build's every field is bitwise equal to stock's."""
        return self.equal and all(d.bitwise for d in self.diffs)

    def max_abs(self, build: str) -> float:
        """The largest absolute difference of `build` from stock over all fields.

        Args:
            build: the build's label.

        Returns:
            the difference (0.0 where none).
        """
        return max((d.max_abs for d in self.diffs if d.build == build), default=0.0)

    def max_rel(self, build: str) -> float:
        """The largest relative difference of `build` from stock over all fields.

        Args:
            build: the build's label.

        Returns:
            the difference (0.0 where none).
        """
        return max((d.max_rel for d in self.diffs if d.build == build), default=0.0)

    def differing(self) -> list[FieldDiff]:
        """Fields that are not bitwise equal to stock.

        Returns:
            the field differences, per build.
        """
        return [d for d in self.diffs if not d.bitwise]


def _one_line(err: BaseException) -> str:
    text = str(err).strip()
    return f"{type(err).__name__}: {text.splitlines()[0] if text else ''}"


def exact_cxxflags() -> str:
    """The C++ flags gt4py compiles CPU programs with (its `CXXFLAGS` if set, else the ones
    its `set_dace_config` chooses), plus `NO_CONTRACTION`.

    Returns:
        the flags, one string.
    """
    import dace
    from gt4py._core import definitions as core_defs
    from gt4py.next.program_processors.runners.dace.workflow import common as gtx_dace_common

    flags = os.environ.get("CXXFLAGS")
    if not flags:
        with dace.config.temporary_config():
            gtx_dace_common.set_dace_config(core_defs.DeviceType.CPU)
            flags = str(dace.Config.get("compiler.cpu.args"))
    return flags if NO_CONTRACTION in flags.split() else f"{flags} {NO_CONTRACTION}"


@contextlib.contextmanager
def _cxxflags(flags: Optional[str]) -> Iterator[None]:
    """`CXXFLAGS` set to `flags` while the builds compile (None: left as it is); gt4py's
    build workers start again on each change, so that they compile with it."""
    before = os.environ.get("CXXFLAGS")
    if flags is not None:
        os.environ["CXXFLAGS"] = flags
        restart_build_workers()
    try:
        yield
    finally:
        if flags is not None:
            if before is None:
                os.environ.pop("CXXFLAGS", None)
            else:
                os.environ["CXXFLAGS"] = before
            restart_build_workers()


def _make_build(label: str) -> Build:
    if label == "stock":
        return stock_build()
    return inline_build(policy=CostModel("cpu") if label == "model" else InlineWhereSound())


def compare_program(
    ref: ProgramRef,
    *,
    n_horizontal: int = N_HORIZONTAL,
    n_levels: int = N_LEVELS,
    seed: int = SEED,
    exact: bool = False,
) -> ProgramComparison:
    """Compile `ref` stock, with the cost model and with everything sound, run each on
    fresh copies of the same inputs, compare every field with stock's (never raises:
    failures are recorded). `exact`: compile without floating-point contraction and
    require bitwise equality (module doc).

    Args:
        ref: the program.
        n_horizontal: elements per horizontal dimension.
        n_levels: model levels.
        seed: the random seed.
        exact: compile without FP contraction, require bitwise equality.

    Returns:
        the `ProgramComparison`.
    """
    result = ProgramComparison(ref.spec, exact=exact)
    start = time.perf_counter()
    try:
        program = ref.load()
        args, provider = census_inputs(
            program, n_horizontal=n_horizontal, n_levels=n_levels, seed=seed
        )
        flags = exact_cxxflags() if exact else None
    except Exception as err:  # noqa: BLE001  # one broken program must not end the comparison
        result.error = _one_line(err)
        result.seconds = time.perf_counter() - start
        return result

    def run(backend: Any) -> dict[str, np.ndarray]:
        fresh = copy_args(args)
        program.with_backend(backend)(**fresh, offset_provider=provider)
        return {k: v.asnumpy() for k, v in fresh.items() if hasattr(v, "asnumpy")}

    outputs: dict[str, dict[str, np.ndarray]] = {}
    for label in BUILDS:
        t0 = time.perf_counter()
        build_run = result.runs[label] = BuildRun(label)
        try:
            build = _make_build(label)
            with _cxxflags(flags):  # gt4py reads CXXFLAGS when it compiles, at the first call
                outputs[label] = run(build.backend)
            build_run.inlines = len(build.report.applied)
            build_run.transients = len(two_d_transients(build.sdfg))
            if label == "stock":
                result.fields = len(outputs["stock"])
                result.written = sorted(
                    k
                    for k, v in outputs["stock"].items()
                    if not diff_field(k, "input", v, args[k].asnumpy()).bitwise
                )
                again = run(build.backend)
                result.stock_repeatable = all(
                    diff_field(k, "stock", again[k], v).bitwise for k, v in outputs["stock"].items()
                )
        except Exception as err:  # noqa: BLE001  # a failed build is reported, not skipped
            build_run.error = _one_line(err)
        build_run.seconds = time.perf_counter() - t0
    if "stock" in outputs:
        for label in BUILDS[1:]:
            if label in outputs:
                result.diffs += [
                    diff_field(k, label, outputs[label][k], v, exact=exact)
                    for k, v in outputs["stock"].items()
                ]
    result.seconds = time.perf_counter() - start
    return result


def _compare_one(args) -> ProgramComparison:
    ref, kwargs = args
    return compare_program(ref, **kwargs)


def run_comparison(
    refs: Iterable[ProgramRef],
    *,
    jobs: int = 1,
    progress: Optional[Callable[[ProgramComparison], None]] = None,
    **kwargs: Any,
) -> list[ProgramComparison]:
    """`compare_program` for every program, in `jobs` processes (results in input order).

    Args:
        refs: the programs.
        jobs: processes in parallel.
        progress: called with each result as it arrives.
        kwargs: passed on to `compare_program`.

    Returns:
        the comparisons, in the order of `refs`.
    """
    from gt4py_dace_xforms.tools.census import map_programs

    return map_programs(_compare_one, [(r, kwargs) for r in refs], jobs=jobs, progress=progress)


def _fmt(x: float) -> str:
    return "0" if x == 0 else f"{x:.1e}"


def table(results: list[ProgramComparison]) -> str:
    """Per program: equal to stock, largest differences, inlines and 2-D transients per
    build, seconds per build; then every field that is not bitwise equal, and the errors.

    Args:
        results: the comparisons.

    Returns:
        the table's text.
    """
    head = (
        "program",
        "equal",
        "bitwise",
        "written",
        "max abs model/sound",
        "max rel model/sound",
        "inlines model/sound",
        "2-D tr stock/model/sound",
        "s stock/model/sound",
    )
    rows = []
    for r in results:
        runs = [r.runs.get(b, BuildRun(b)) for b in BUILDS]
        rows.append(
            (
                r.short_name,
                "ERROR" if r.errors else ("yes" if r.equal else "NO"),
                "yes" if r.bitwise else "no",
                f"{len(r.written)}/{r.fields}",
                f"{_fmt(r.max_abs('model'))}/{_fmt(r.max_abs('sound'))}",
                f"{_fmt(r.max_rel('model'))}/{_fmt(r.max_rel('sound'))}",
                f"{runs[1].inlines}/{runs[2].inlines}",
                "/".join(str(b.transients) for b in runs),
                "/".join(f"{b.seconds:.0f}" for b in runs),
            )
        )
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows)]
    fmt = "  ".join(f"{{:<{w}}}" if i == 0 else f"{{:>{w}}}" for i, w in enumerate(widths))
    lines = [fmt.format(*head), fmt.format(*("-" * w for w in widths))] + [
        fmt.format(*row) for row in rows
    ]
    n_equal = sum(r.equal for r in results)
    criterion = (
        f"bitwise, built with {NO_CONTRACTION}"
        if results and all(r.exact for r in results)
        else f"tolerance {RTOL:g} x |stock| + {ATOL_SCALE:g} x max|stock|, per element"
    )
    lines += ["", f"{n_equal} of {len(results)} programs equal to stock ({criterion})"]
    for r in results:
        for d in r.differing():
            lines.append(
                f"  {r.short_name} {d.build} {d.field}: not bitwise equal, max abs {d.max_abs:.3e}, "
                f"max rel {d.max_rel:.3e}, {'within' if d.within_tolerance else 'OUTSIDE'} tolerance"
            )
        if not r.written and not r.errors:
            lines.append(f"  {r.short_name}: stock's run changed no field (nothing compared)")
        if not r.stock_repeatable:
            lines.append(
                f"  {r.short_name}: two stock runs differ (not deterministic on these inputs)"
            )
        for e in r.errors:
            lines.append(f"  {r.short_name} error: {e}")
    return "\n".join(lines)


def to_json(results: list[ProgramComparison], settings: Optional[Mapping[str, Any]] = None) -> str:
    """The comparisons and the run's settings as JSON (`census --compare --json`).

    Args:
        results: the comparisons.
        settings: the run's settings (sizes, seed, ...).

    Returns:
        the JSON text.
    """
    rows = []
    for r in results:
        row = dataclasses.asdict(r)
        row.update(equal=r.equal, bitwise=r.bitwise)
        rows.append(row)
    return json.dumps({"settings": dict(settings or {}), "programs": rows}, indent=2)
