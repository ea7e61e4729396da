"""Generated gt4py programs (issue 5): stock dace, the library's backend (cost model and
"inline whatever is sound") and numpy agree. CI profile: a fixed set of programs;
`make fuzz` runs the same property for a time budget (tests/fuzzing/run_fuzz.py)."""

import pytest
from fuzzing import CI_PROGRAMS
from fuzzing.runner import ALL_BUILDS, Stats, check, run_property
from fuzzing.strategy import (
    NC,
    NL,
    ZONES,
    Bin,
    Both,
    Cond,
    Lit,
    Prog,
    Read,
    Scan,
    Where,
    programs,
    valid_levels,
)
from hypothesis import settings


pytestmark = pytest.mark.compile


def test_generated_programs_agree_with_stock_and_numpy():
    stats = Stats(log=print)
    # Two locals, not three as in `make fuzz`: compiling is the cost, and gt4py's own
    # optimisation takes minutes on some programs with a dozen concat_where.
    run_property(
        settings.get_profile("fuzz-ci"), stats, reduce_seconds=600, strategy=programs(**CI_PROGRAMS)
    )
    print(stats.summary())
    # The property holds trivially if nothing is inlined: most programs must exercise the rewrite.
    assert stats.inlined["sound"] >= stats.programs // 2, stats.summary()


#: Issue 34's shape, as the generator draws it: a scan reading one `concat_where` local at
#: two levels (`decay2(t0(K + 1), t0)`); gt4py passes `t0` to the scan's nested SDFG twice.
TWO_LEVEL_SCAN = Prog(
    dtype="float64",
    fields=("a", "b"),
    cells=(),
    scalars=(),
    levels=(),
    locals=(
        (
            "t0",
            Where(Cond("<", 1), Read("a"), Bin("+", Bin("*", Read("b"), Lit(0.5)), Read("a", -1))),
        ),
    ),
    outputs=(Scan(Read("t0", 1), Read("t0", 0)),),
    cell_domain=(0, NC),
    k_domain=(0, NL - 1),
    runtime_k_domain=False,
)


def test_scan_reading_a_local_at_two_levels_agrees_with_stock_and_numpy():
    outcome = check(TWO_LEVEL_SCAN, 7, ALL_BUILDS)
    assert outcome.applied["sound"] >= 1, outcome.applied


#: Issue 49's shape as the generator draws it: a scan of two computed columns, which gt4py
#: computes in one Map that the library moves into the scan's loop (docs/scan_inputs.md).
TWO_COMPUTED_COLUMNS = Prog(
    dtype="float64",
    fields=("a", "b"),
    cells=(),
    scalars=(),
    levels=(),
    locals=(("t0", Bin("+", Bin("*", Read("a"), Lit(2.0)), Read("b"))),),
    outputs=(Scan(Bin("*", Read("t0"), Read("b")), Bin("-", Read("a"), Read("t0"))),),
    cell_domain=(0, NC),
    k_domain=(0, NL),
    runtime_k_domain=False,
)


def test_scan_of_two_computed_columns_agrees_with_stock_and_numpy():
    outcome = check(TWO_COMPUTED_COLUMNS, 5, ALL_BUILDS)
    assert outcome.applied["sound"] == 2 and outcome.applied["cost_model"] == 2, (
        outcome.applied
    )  # both columns


#: Issue 32's shape as the generator draws it (`Prog.overwrite`): out0 written, read at
#: K + 1 into outR, then overwritten; gt4py leaves the two writes of out0 unordered.
WRITTEN_READ_OVERWRITTEN = Prog(
    dtype="float64",
    fields=("a", "b"),
    cells=(),
    scalars=(),
    levels=(),
    locals=(("t0", Bin("+", Bin("*", Read("a"), Lit(2.0)), Read("b"))),),
    outputs=(Bin("-", Read("t0", 1), Read("t0")),),
    cell_domain=(0, NC),
    k_domain=(0, NL - 2),
    runtime_k_domain=False,
    overwrite=True,
)


def test_racy_generated_program_equals_stock_bit_for_bit():
    """The oracle for racy programs: the library reports the race and its outputs are
    stock's bits (numpy has no defined answer for out0 and outR there)."""
    outcome = check(WRITTEN_READ_OVERWRITTEN, 11, ALL_BUILDS)
    assert outcome.races and all(n >= 1 for n in outcome.races.values()), outcome.races


#: A local read at three levels by one consumer: what `VerticalWindow` sweeps.
THREE_LEVELS = Prog(
    dtype="float64",
    fields=("a", "b"),
    cells=(),
    scalars=(),
    levels=(),
    locals=(
        (
            "t0",
            Where(Cond("<", 3), Bin("*", Read("a"), Lit(2.0)), Bin("+", Read("b"), Read("a", 1))),
        ),
    ),
    outputs=(Bin("+", Bin("-", Read("t0", 1), Read("t0")), Read("t0", 2)),),
    cell_domain=(0, NC),
    k_domain=(0, NL - 3),
    runtime_k_domain=True,
)


def test_windowed_generated_program_agrees_with_stock_and_numpy():
    outcome = check(THREE_LEVELS, 5, ALL_BUILDS)
    assert outcome.windowed["window"] >= 1, outcome.windowed


# --- layouts of Cell zones (`Prog.zones`): temporaries split in Cell as well as K ----------------

_INNER = Where(Cond("<", 3), Bin("*", Read("a"), Lit(2.0)), Bin("+", Read("b"), Read("a", 1)))


def _zones(*bounds):
    return tuple(zip(ZONES, bounds))


ZONED = {
    # The lateral boundary empty (start_cell_nudging = 0): a local split at end_cell_local
    # and on K, read by two outputs on different zones (the local's pieces and its readers
    # differ in Cell); symbolic, the K domain at run time.
    "empty-zone": Prog(
        dtype="float64",
        fields=("a", "b"),
        cells=(),
        scalars=(),
        levels=(),
        locals=(
            (
                "t0",
                Where(
                    Cond("<", 0, "end_cell_local", dim="Cell"),
                    _INNER,
                    Bin("*", Read("a"), Lit(0.5)),
                ),
            ),
        ),
        outputs=(Bin("-", Read("t0", 1), Read("t0")), Bin("+", Read("t0", -1), Read("b"))),
        cell_domain=(0, NC),
        k_domain=(1, NL - 2),
        runtime_k_domain=True,
        zones=_zones(0, 2, 4, 5),
        out_cells=(
            ("start_cell_nudging", "end_cell_local"),
            ("start_cell_interior", "end_cell_halo"),
        ),
    ),
    # The interior one cell wide (cells [2, 3)): the output is a concat_where over Cell of
    # two readers of a K-split local, one reading it at three levels (split consumers, each
    # a window candidate); static, as icon4py's setup_program compiles its bounds.
    "one-cell-zone": Prog(
        dtype="float64",
        fields=("a", "b"),
        cells=(),
        scalars=(),
        levels=(),
        locals=(("t0", _INNER),),
        outputs=(
            Where(
                Cond(">=", 0, "end_cell_local", dim="Cell"),
                Bin("+", Bin("-", Read("t0", 1), Read("t0")), Read("t0", 2)),
                Bin("*", Read("t0", 1), Lit(1.5)),
            ),
        ),
        cell_domain=(0, NC),
        k_domain=(0, NL - 3),
        runtime_k_domain=False,
        static=True,
        zones=_zones(1, 2, 3, 5),
        out_cells=(("start_cell_interior", "end_cell_halo"),),
    ),
    # Coinciding bounds (start_cell_nudging = start_cell_interior, end_cell_local =
    # end_cell_halo): a box condition (a zone on some levels) in the local, two outputs on
    # the same cells; float32, static.
    "coinciding-bounds": Prog(
        dtype="float32",
        fields=("a", "b"),
        cells=(),
        scalars=(),
        levels=(),
        locals=(
            (
                "t0",
                Where(
                    Both("&", Cond(">=", 0, "start_cell_interior", dim="Cell"), Cond("<", 9)),
                    _INNER,
                    Bin("-", Read("b"), Read("a", -1)),
                ),
            ),
        ),
        outputs=(Bin("*", Read("t0", -1), Read("t0", 1)), Read("t0")),
        cell_domain=(0, NC),
        k_domain=(2, NL - 1),
        runtime_k_domain=False,
        static=True,
        zones=_zones(2, 2, 4, 4),
        out_cells=(
            ("start_cell_nudging", "end_cell_halo"),
            ("start_cell_interior", "end_cell_local"),
        ),
    ),
}


@pytest.mark.parametrize("name", list(ZONED))
def test_generated_program_on_a_layout_of_cell_zones_agrees_with_stock_and_numpy(name):
    """The fuzzer's layouts (`Prog.zones`): outputs on zones given as int32 arguments (an
    empty zone, a one-cell zone, coinciding bounds), locals split by `concat_where` over
    Cell and K; every build equals stock and numpy, which keeps the sentinel outside each
    output's own cells."""
    prog = ZONED[name]
    assert valid_levels(prog)[slice(*prog.k_domain)].all()  # the domain reads only defined values
    assert "concat_where(Cell" in prog.source() or "concat_where((Cell" in prog.source()
    outcome = check(prog, 3, ALL_BUILDS)
    assert outcome.applied["sound"] >= 1, outcome.applied


# --- run-time bounds (issue 60): `concat_where` on an int32 argument, read through C2C, ----------
# --- at K offsets and by scans (`strategy.with_run_time_bound`) -----------------------------------


def _bounded(t0, out, bound, value, k_domain=(0, NL), static=False, dtype="float64"):
    return Prog(
        dtype=dtype,
        fields=("a", "b"),
        cells=(),
        scalars=(),
        levels=((bound, value),),
        locals=(("t0", t0),),
        outputs=(out,),
        cell_domain=(0, NC),
        k_domain=k_domain,
        runtime_k_domain=False,
        static=static,
    )


_CELL_SPLIT = Where(Cond(">=", 0, "nc", dim="Cell"), Bin("*", Read("a"), Lit(2.0)), Read("b"))

RUN_TIME_BOUNDS = {
    # Issue 60's smallest program: `t0 = concat_where(Cell >= nc, a * 2.0, b); return
    # t0(C2C[0]) - t0`, symbolic (gt4py's Map ranges `Max(0, nc):5`).
    "cell-neighbor": _bounded(_CELL_SPLIT, Bin("-", Read("t0", 0, 0), Read("t0")), "nc", 2),
    # The split in K, both branches computed; float32.
    "k-neighbor": _bounded(
        Where(
            Cond(">=", 0, "nk"),
            Bin("*", Read("a"), Lit(2.0)),
            Bin("+", Bin("*", Read("b"), Lit(3.0)), Lit(1.0)),
        ),
        Bin("-", Read("t0", 0, 1), Read("t0")),
        "nk",
        7,
        dtype="float32",
    ),
    # A scan reading the split local (`decay(t0) - t0(C2C[2])`); the bound at the edge
    # (nc = NC: the first branch empty).
    "cell-scan-edge": _bounded(_CELL_SPLIT, Bin("-", Scan(Read("t0")), Read("t0", 0, 2)), "nc", NC),
    # Read at K + 1 and through C2C; static (the bound a constant), at the other edge.
    "cell-vertical-static": _bounded(
        _CELL_SPLIT,
        Bin("-", Read("t0", 1), Read("t0", 0, 0)),
        "nc",
        0,
        k_domain=(0, NL - 1),
        static=True,
    ),
    # Two scans, forward and backward, split at nc (issue 60: gt4py's MapSplitter asserted
    # on the sound policy's build).
    "split-scans": _bounded(
        Bin("+", Bin("*", Read("a"), Lit(2.0)), Read("b")),
        Where(
            Cond("<", 0, "nc", dim="Cell"),
            Scan(Read("t0", 1), Read("t0")),
            Scan(Read("t0", 1), Read("t0"), forward=False),
        ),
        "nc",
        3,
        k_domain=(0, NL - 1),
    ),
}


@pytest.mark.parametrize("name", list(RUN_TIME_BOUNDS))
def test_generated_program_with_a_run_time_bound_agrees_with_stock_and_numpy(name):
    """The fuzzer's run-time bounds (`with_run_time_bound`), one program per reader: every
    build (stock, cost model, sound, window) builds it (strict mode: a build that raises
    fails) and equals stock and numpy, on clean and poisoned inputs."""
    prog = RUN_TIME_BOUNDS[name]
    assert valid_levels(prog)[slice(*prog.k_domain)].all()
    bound = prog.levels[0][0]
    assert (
        f"def fop(a: F, b: F, {bound}: int32)" in prog.source()
        and prog.run_time_bounds().startswith(bound)
    )
    check(prog, 3, ALL_BUILDS)


#: `make fuzz`'s reduction of a build the library failed and stock completed: a condition
#: no level of the K domain meets, inside another. gt4py bounds the branch's levels with
#: `Min(3, 10)` unevaluated; proving the output buffer's boxes compared `-3 + Min(3, 10) >= 0`
#: as a bool, which sympy refuses (analysis/symbolic.py now evaluates such numbers first).
UNEVALUATED_MIN = Prog(
    dtype="float64",
    fields=("a",),
    cells=(),
    scalars=(),
    levels=(),
    locals=(),
    outputs=(Where(Cond("==", 3), Where(Cond("!=", 9), Read("a", 1), Lit(2.0)), Lit(2.0)),),
    cell_domain=(2, 4),
    k_domain=(14, 18),
    runtime_k_domain=True,
    zones=(
        ("start_cell_nudging", 0),
        ("start_cell_interior", 1),
        ("end_cell_local", 4),
        ("end_cell_halo", 5),
    ),
    out_cells=(("start_cell_nudging", "end_cell_halo"),),
)


def test_a_bound_written_as_an_unevaluated_min_builds_with_the_library():
    check(UNEVALUATED_MIN, 0, ALL_BUILDS)
