"""The demo: gt4py programs compiled with stock dace and with the inliner, checked against
numpy; then icon4py's `compute_perturbed_quantities_and_interpolation` (the program this
library exists for): its temporaries and its run time, stock vs library, next to an A/A
pair of two stock builds that shows the machine's noise. The target is built twice:
first static, as icon4py's model run compiles it (bounds and switches as constants), then
symbolic (bounds and switches as run-time arguments)."""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from typing import Any, Iterator, Optional

import gt4py.next as gtx  # noqa: E402
import numpy as np  # noqa: E402
from gt4py.next import Dims  # noqa: E402
from gt4py.next.ffront.experimental import concat_where  # noqa: E402

from gt4py_dace_xforms.measure.timing import Timing, time_rounds, verdict  # noqa: E402
from gt4py_dace_xforms.tools.compare import (  # noqa: E402
    icon4py_build,
    inline_build,
    stock_build,
    two_d_transients,
)
from gt4py_dace_xforms.tools.quiet import quiet_third_party  # noqa: E402


Cell = gtx.Dimension("Cell")
K = gtx.Dimension("K", kind=gtx.DimensionKind.VERTICAL)
# gt4py's mypy plugin takes only names ending in Dim for dimensions
CKField = gtx.Field[Dims[Cell, K], gtx.float64]  # type: ignore[valid-type]


@gtx.field_operator
def theta_on_half_levels(interior: CKField, surface: CKField) -> CKField:
    """A field on half levels: `surface` at level 0, `interior` below.

    Args:
        interior: the values from level 1 down.
        surface: the values at level 0.

    Returns:
        `concat_where(K < 1, surface, interior)`.
    """
    return concat_where(K < 1, surface, interior)


@gtx.field_operator
def vertical_difference(interior: CKField, surface: CKField) -> CKField:
    """The seed case: a `concat_where` intermediate read at k and k+1.

    Args:
        interior: as for `theta_on_half_levels`.
        surface: as for `theta_on_half_levels`.

    Returns:
        `theta(K + 1) - theta` of `theta_on_half_levels(interior, surface)`.
    """
    theta = theta_on_half_levels(interior, surface)
    return theta(K + 1) - theta


@gtx.program
def vertical_difference_program(interior: CKField, surface: CKField, out: CKField, nlev: gtx.int32):
    """`vertical_difference` on 64 cells and levels 0 to `nlev - 1` (exclusive).

    Args:
        interior: as for `theta_on_half_levels`.
        surface: as for `theta_on_half_levels`.
        out: written on that domain.
        nlev: the fields' number of levels.
    """
    vertical_difference(interior, surface, out=out, domain={Cell: (0, 64), K: (0, nlev - 1)})


@gtx.field_operator
def vertical_difference_computed(interior: CKField, surface: CKField) -> CKField:
    """`vertical_difference` with computed branches (`surface * 2`, `interior + 1`), so that
    each inlined copy recomputes them.

    Args:
        interior: the values from level 1 down, before `+ 1`.
        surface: the values at level 0, before `* 2`.

    Returns:
        `theta(K + 1) - theta` of the concat.
    """
    theta = concat_where(K < 1, surface * 2.0, interior + 1.0)
    return theta(K + 1) - theta


@gtx.program
def vertical_difference_computed_program(
    interior: CKField, surface: CKField, out: CKField, nlev: gtx.int32
):
    """`vertical_difference_computed` on 64 cells and levels 0 to `nlev - 1` (exclusive).

    Args:
        interior: as for `vertical_difference_computed`.
        surface: as for `vertical_difference_computed`.
        out: written on that domain.
        nlev: the fields' number of levels.
    """
    vertical_difference_computed(
        interior, surface, out=out, domain={Cell: (0, 64), K: (0, nlev - 1)}
    )


@gtx.field_operator
def three_level_sum(a: CKField, b: CKField) -> CKField:
    """An intermediate read at three levels: k, k+1, k+2.

    Args:
        a: a field, doubled.
        b: a field, added.

    Returns:
        `t + t(K + 1) + t(K + 2)` of `t = a * 2 + b`.
    """
    t = a * 2.0 + b
    return t + t(K + 1) + t(K + 2)


@gtx.program
def three_level_sum_program(a: CKField, b: CKField, out: CKField, nlev: gtx.int32):
    """`three_level_sum` on 64 cells and levels 0 to `nlev - 2` (exclusive).

    Args:
        a: as for `three_level_sum`.
        b: as for `three_level_sum`.
        out: written on that domain.
        nlev: the fields' number of levels.
    """
    three_level_sum(a, b, out=out, domain={Cell: (0, 64), K: (0, nlev - 2)})


def _vertical_difference_numpy(interior, surface, nlev):
    theta = np.where(np.arange(nlev)[None, :] < 1, surface, interior)
    return theta[:, 1:nlev] - theta[:, : nlev - 1]


def _vertical_difference_computed_numpy(interior, surface, nlev):
    return _vertical_difference_numpy(interior + 1.0, surface * 2.0, nlev)


def _three_level_sum_numpy(a, b, nlev):
    t = 2.0 * a + b
    return t[:, : nlev - 2] + t[:, 1 : nlev - 1] + t[:, 2:nlev]


CASES = [
    (
        "vertical_difference (seed, concat_where)",
        vertical_difference_program,
        _vertical_difference_numpy,
        1,
    ),
    (
        "vertical_difference, computed branches",
        vertical_difference_computed_program,
        _vertical_difference_computed_numpy,
        1,
    ),
    ("three_level_sum (reads k, k+1, k+2)", three_level_sum_program, _three_level_sum_numpy, 2),
]


@contextlib.contextmanager
def progress(what: str) -> Iterator[None]:
    """`what ... N s` on one line: counting while it runs on a terminal, once at the end otherwise.

    Args:
        what: what is being done, printed before the seconds.

    Yields:
        None, while the `with` block runs (a thread ticks each second on a terminal).
    """
    start = time.perf_counter()
    live = sys.stdout.isatty()
    done = threading.Event()

    def tick() -> None:
        while not done.wait(1.0):
            print(f"\r  {what} ... {time.perf_counter() - start:.0f} s", end="", flush=True)

    print(f"  {what} ...", end="" if live else "\n", flush=True)
    ticker = threading.Thread(target=tick, daemon=True) if live else None
    if ticker:
        ticker.start()
    try:
        yield
    finally:
        done.set()
        if ticker:
            ticker.join()
        print(
            f"\r  {what} ... {time.perf_counter() - start:.0f} s"
            if live
            else f"  {what}: {time.perf_counter() - start:.0f} s",
            flush=True,
        )


def _table(head: tuple, rows: list[tuple]) -> str:
    widths = [max(len(str(r[i])) for r in [*rows, head]) for i in range(len(head))]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    return "\n".join(
        [fmt.format(*head), fmt.format(*("-" * w for w in widths))] + [fmt.format(*r) for r in rows]
    )


def run_seeds(verbose: bool = False, ncells: int = 64, nlev: int = 20) -> int:
    """The three seed programs: transients, copies, agreement with numpy and stock.

    Each is built with stock's backend and the library's, run once, and a table printed.

    Args:
        verbose: also print each library build's report table.
        ncells: cells of the random input fields (the programs' domain is 64 cells).
        nlev: levels of the fields.

    Returns:
        How many programs failed (library's output not equal to stock's, or off numpy's by
        more than 1e-12).
    """
    rng = np.random.default_rng(0)
    rows = []
    failures = 0
    for title, program, reference, cut in CASES:
        x, y = rng.random((ncells, nlev)), rng.random((ncells, nlev))
        outs = {}
        builds = {"stock": stock_build(), "inlined": inline_build()}
        for name, build in builds.items():
            out = gtx.zeros({Cell: ncells, K: nlev}, dtype=gtx.float64)
            with progress(f"compiling {program.definition_stage.definition.__name__} ({name})"):
                # numpy's stubs do not satisfy gt4py's NDArrayObject protocol
                program.with_backend(build.backend)(
                    gtx.as_field([Cell, K], x),  # type: ignore[arg-type]
                    gtx.as_field([Cell, K], y),  # type: ignore[arg-type]
                    out,
                    np.int32(nlev),
                    offset_provider={},
                )
            outs[name] = out.asnumpy()[:, : nlev - cut]
        expected = reference(x, y, nlev)
        err = np.abs(outs["inlined"] - expected).max()
        # Equal up to rounding: once inlined, the C++ compiler may contract a * b + c to an FMA.
        ref = outs["stock"]
        same = np.allclose(outs["inlined"], ref, rtol=1e-13, atol=1e-14 * np.abs(ref).max())
        ok = same and err <= 1e-12
        failures += not ok
        report = builds["inlined"].report
        rows.append(
            (
                title,
                len(two_d_transients(builds["stock"].sdfg)),
                len(two_d_transients(builds["inlined"].sdfg)),
                report.copies,
                f"{err:.1e}",
                "yes" if same else "NO",
            )
        )
        if verbose:
            print(f"\n{title}\n{report.table()}\n")
    print()
    print(
        _table(
            (
                "program",
                "2-D transients stock",
                "inlined",
                "copies",
                "max |err| vs numpy",
                "equal to stock",
            ),
            rows,
        )
    )
    return failures


# --- the icon4py target ---------------------------------------------------------------------

#: icon4py 0.4.1's `compute_perturbed_quantities_and_interpolation`: what the demo, the
#: benchmarks (bench/icon4py_target.py) and the tests run it with.
TARGET_SPEC = (
    "icon4py.model.atmosphere.dycore.stencils.compute_cell_diagnostics_for_dycore:"
    "compute_perturbed_quantities_and_interpolation"
)
#: The nine fields it writes (its `out=` tuple).
TARGET_OUTPUTS = (
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


def target_program() -> Any:
    """icon4py's `compute_perturbed_quantities_and_interpolation` (`TARGET_SPEC`).

    Returns:
        The `gtx.program`.

    Raises:
        ValueError: icon4py, or the program in it, cannot be imported.
    """
    from gt4py_dace_xforms.tools.programs import load_program

    return load_program(TARGET_SPEC)


def target_args(
    n_cells: int, n_levels: int, *, seed: int = 0, taylor_hydro: bool = True
) -> dict[str, Any]:
    """Keyword arguments: random fields in [0.5, 1.5), the full domain, `nflatlev=4`.
    Half-level fields have `n_levels + 1` levels; `surface_level = n_levels + 1`.

    Args:
        n_cells: cells of every field, and the domain's end.
        n_levels: full levels.
        seed: the random generator's seed.
        taylor_hydro: `igradp_method` TAYLOR_HYDRO, else CONVENTIONAL.

    Returns:
        The target program's arguments by name.

    Raises:
        ValueError: icon4py's program cannot be imported (`target_program`).
    """
    from icon4py.model.atmosphere.dycore.dycore_states import (
        HorizontalPressureDiscretizationType as Method,
    )

    from gt4py_dace_xforms.tools.programs import random_args

    scalars = {
        "igradp_method": int(Method.TAYLOR_HYDRO if taylor_hydro else Method.CONVENTIONAL),
        "nflatlev": 4,
        "nflat_gradp": 6,
        "start_cell_lateral_boundary_level_3": 0,
        "end_cell_local": n_cells,
        "end_cell_halo": n_cells,
        "end_cell_halo_level_2": n_cells,
        "model_top": 0,
        "surface_level": n_levels + 1,
    }

    def extent(param: str, dim: str, size: int) -> int:
        half = "half_level" in param or param in ("wgtfac_c", "ddqz_z_half")
        return size + 1 if dim == "K" and half else size

    return random_args(
        target_program(), {"Cell": n_cells, "K": n_levels}, seed, scalars=scalars, extent=extent
    )


def run_target(
    n_cells: int = 20480,
    n_levels: int = 80,
    rounds: int = 12,
    verbose: bool = False,
    static: bool = False,
    layout: Optional[str] = None,
) -> int:
    """The icon4py target compiled three times (stock, a second stock build, the library's),
    outputs compared, run times measured, a table printed. Skipped (a line printed) where
    icon4py cannot be imported.

    Args:
        n_cells: cells of the fields.
        n_levels: full levels.
        rounds: timing rounds (`measure.timing.time_rounds`).
        verbose: also print the library build's report table.
        static: built as icon4py's model run builds it (`setup_program`): the domain
            bounds, levels and `igradp_method` compiled as constants (`tools.static`).
        layout: the domain bounds of that layout of the generated grid (`tools.layouts`;
            None: a global grid on one rank).

    Returns:
        0 if both the library's and the second stock build's outputs equal stock's (or
        the target was skipped), else 1.
    """
    try:
        program = target_program()
    except ValueError as err:
        print(f"\nicon4py target skipped: {err}")
        return 0
    name = TARGET_SPEC.rpartition(":")[2]
    args = target_args(n_cells, n_levels)
    if layout is not None:
        from gt4py_dace_xforms.tools import layouts

        args = layouts.apply(args, layouts.layout(layout, n_cells))
    from gt4py_dace_xforms.tools.programs import copy_args
    from gt4py_dace_xforms.tools.static import compile_static, static_args

    values = static_args(args) if static else {}
    how = (
        "static build, as icon4py's setup_program compiles it (icon4py's backend and the library's "
        "descriptor): " + ", ".join(f"{k}={v}" for k, v in values.items())
        if static
        else "symbolic build with gt4py's default dace backend: bounds and switches are run-time arguments"
    )
    print(
        f"\nicon4py target: {name}, {n_cells} cells x {n_levels} levels, layout {layout or 'global (one rank)'}"
        f"\n  {how}"
    )

    if static:  # as a model run builds it: icon4py's backends, its per-program options
        builds = {
            "stock": icon4py_build(name, library=False),
            "second stock (A/A)": icon4py_build(name, library=False),
            "library": icon4py_build(name, library=True),
        }
    else:  # gt4py's default dace backend, as a gt4py user builds it
        builds = {
            "stock": stock_build(),
            "second stock (A/A)": stock_build(),
            "library": inline_build(),
        }
    outputs: dict[str, dict[str, np.ndarray]] = {}
    calls = {}
    for label, build in builds.items():
        a = copy_args(args)
        what = (
            "same code as stock: gt4py's cache hands it stock's library"
            if "A/A" in label
            else "C++ compiler"
        )
        with progress(f"building the {label} build (gt4py's optimizer, {what})"):
            run = (
                compile_static(program, build.backend, values, {})
                if static
                else program.with_backend(build.backend)
            )
            calls[label] = lambda a, run=run: run(**a, offset_provider={})
            calls[label](a)
        outputs[label] = {k: a[k].asnumpy() for k in TARGET_OUTPUTS}
    with progress(
        f"timing: {rounds} rounds, every build once per round on the same fields, in all six orders"
    ):
        for call in calls.values():
            call(copy_args(args))  # untimed warm-up after the first (compiling) call
        times = time_rounds(calls, args, rounds)

    def equal(label: str) -> bool:
        return all(
            np.allclose(
                outputs[label][k],
                outputs["stock"][k],
                rtol=1e-12,
                atol=1e-12 * np.abs(outputs["stock"][k]).max(),
            )
            for k in TARGET_OUTPUTS
        )

    timing = {label: Timing(label, tuple(t), tuple(times["stock"])) for label, t in times.items()}
    rows = []
    for label, build in builds.items():
        t = timing[label]
        rows.append(
            (
                label,
                len(two_d_transients(build.sdfg)),
                f"{t.median_ms:.1f}",
                "1" if label == "stock" else t.ratio.text(),
                "-" if label == "stock" else ("yes" if equal(label) else "NO"),
            )
        )
    print()
    print(
        _table(
            (
                "build",
                "2-D transients",
                "median ms",
                "ratio to stock [95% interval]",
                "outputs equal to stock",
            ),
            rows,
        )
    )
    print(
        f"library vs stock: {verdict(timing['library'].ratio, timing['second stock (A/A)'].ratio).text()}"
    )
    rep = builds["library"].report
    print(
        f"inlined: {len(rep.inlined)} reads, {rep.copies} copies; windowed: {len(rep.windowed)}"
        + ("" if verbose else " (gt4py-dace-xforms demo -v, or explain, for every decision)")
    )
    if verbose:
        print(builds["library"].report.table())
    return 0 if equal("library") and equal("second stock (A/A)") else 1


#: The substep summary's programs: two where the library acts under glibc's default (the
#: regime a user's process has; bench/substep/run14.txt: 0.68 and 0.76-0.78 of stock), built
#: as the model builds them (the whole substep: `make bench-substep`).
SUBSTEP_PROGRAMS = ("compute_exner_from_rhotheta", "vertically_implicit_solver_at_corrector_step")


def run_substep_summary(layout: str, cells: int = 20480, levels: int = 30, rounds: int = 8) -> int:
    """A short model-level summary: a few of the substep's programs, built static as icon4py
    builds them (its backend factory and per-program options), stock vs library, timed in
    this process's allocator regime (glibc's, as a user has it), the later substep's sum.
    Runs `bench/substep.py` from the source tree (`make demo`); says so where it is absent.

    Args:
        layout: the generated grid's layout (`tools.layouts`).
        cells: cells of the grid.
        levels: full levels.
        rounds: timing rounds.

    Returns:
        1 if the script exited non-zero, else 0 (also where it is absent).
    """
    import pathlib
    import subprocess

    script = pathlib.Path(__file__).resolve().parents[2] / "bench" / "substep.py"
    print(
        f"\ndycore substep (a few of its programs: {', '.join(SUBSTEP_PROGRAMS)}; "
        f"{cells} cells x {levels} levels, layout {layout}; the whole substep: make bench-substep)"
    )
    if not script.exists():
        print(f"  skipped: {script} is not here (the summary needs the source tree)")
        return 0
    cmd = [
        sys.executable,
        str(script),
        "--layout",
        layout,
        "--cells",
        str(cells),
        "--levels",
        str(levels),
        "--rounds",
        str(rounds),
        "--allocators",
        "glibc",
        "--substep",
        "later",
        "--programs",
        ",".join(SUBSTEP_PROGRAMS),
    ]
    with progress("building and timing them (stock, A/A, library)"):
        done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        print(
            f"  FAILED (exit {done.returncode}): {(done.stderr.strip().splitlines() or [''])[-1]}"
        )
        return 1
    table = [line for line in done.stdout.splitlines() if line.strip()]
    start = next((i for i, line in enumerate(table) if line.startswith("program")), 0)
    for line in table[start:]:
        if line.startswith(("stock ms:", "load average")):
            break
        print("  " + line)
    return 0


def run_demo(
    verbose: bool = False,
    ncells: int = 64,
    nlev: int = 20,
    target: bool = True,
    target_size: tuple[int, int] = (20480, 80),
    rounds: int = 12,
    layout: Optional[str] = None,
    substep: bool = True,
) -> int:
    """The seed programs, then the target: static on `layout` (default `DEFAULT_LAYOUT`, a
    production run's rank: a decomposed limited-area one), then symbolic; then a short
    substep summary (`run_substep_summary`). Third-party output is quieted.

    Args:
        verbose: also print the library builds' report tables.
        ncells: cells of the seed programs' fields.
        nlev: levels of the seed programs' fields.
        target: run the icon4py target (both builds).
        target_size: the target's (cells, levels).
        rounds: the target's timing rounds.
        layout: the static target's and the substep summary's layout (None:
            `DEFAULT_LAYOUT`).
        substep: run the substep summary.

    Returns:
        The exit status: 0 if nothing failed, else 1.
    """
    from gt4py_dace_xforms.tools.layouts import DEFAULT_LAYOUT

    with quiet_third_party():
        print("seed programs: stock gt4py dace backend vs the library's, and numpy")
        failures = run_seeds(verbose, ncells, nlev)
        if target:
            # The static build first: it is what icon4py's model run compiles, on a rank's layout.
            failures += run_target(
                *target_size,
                rounds=rounds,
                verbose=verbose,
                static=True,
                layout=layout or DEFAULT_LAYOUT,
            )
            failures += run_target(*target_size, rounds=rounds, verbose=verbose)
        if substep:
            failures += run_substep_summary(layout or DEFAULT_LAYOUT)
    print("demo: OK" if failures == 0 else f"demo: {failures} case(s) FAILED")
    return 0 if failures == 0 else 1
