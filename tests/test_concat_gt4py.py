"""concat_where results read at vertical offsets, lowered from gt4py: stock vs inlined vs numpy."""

import gt4py.next as gtx
import numpy as np
import pytest
from gt4py.next import Dims, float32
from gt4py.next.ffront.experimental import concat_where
from gt4py_helpers import assert_equal_to_stock, rerun, side_by_side

from gt4py_dace_xforms.measure.poison import poison_unread


pytestmark = pytest.mark.compile

Cell = gtx.Dimension("Cell")
K = gtx.Dimension("K", kind=gtx.DimensionKind.VERTICAL)
F64 = gtx.Field[Dims[Cell, K], gtx.float64]
F32 = gtx.Field[Dims[Cell, K], gtx.float32]
NC, NL = 16, 12  # literal in the programs' domains below
RNG = np.random.default_rng(5)


def field(shape=(NC, NL), dtype=np.float64):
    return gtx.as_field([Cell, K], RNG.random(shape).astype(dtype))


# --- programs -------------------------------------------------------------------------------


@gtx.field_operator
def four_offsets(a: F64, b: F64) -> F64:
    theta = concat_where(K < 2, b * 2.0, a + 1.0)
    return theta(K - 1) + 2.0 * theta + 3.0 * theta(K + 1) + 4.0 * theta(K + 2)


@gtx.program
def four_offsets_program(a: F64, b: F64, out: F64):
    four_offsets(a, b, out=out, domain={Cell: (0, 16), K: (1, 10)})


@gtx.field_operator
def nested(a: F64, b: F64, c: F64) -> F64:
    theta = concat_where(K < 1, c * 3.0, concat_where(K < 5, b * 2.0, a + 1.0))
    return theta(K + 1) - theta


@gtx.program
def nested_program(a: F64, b: F64, c: F64, out: F64):
    nested(a, b, c, out=out, domain={Cell: (0, 16), K: (0, 11)})


@gtx.field_operator
def runtime_boundary(a: F64, b: F64, surface_level: gtx.int32) -> F64:
    theta = concat_where(K < surface_level - 1, a * 0.5, b - 1.0)
    return theta(K + 1) - theta


@gtx.program
def runtime_boundary_program(a: F64, b: F64, out: F64, surface_level: gtx.int32, start: gtx.int32):
    runtime_boundary(a, b, surface_level, out=out, domain={Cell: (2, 16), K: (start, 11)})


@gtx.field_operator
def exact_inputs(
    interior: gtx.Field[Dims[Cell, K], gtx.float64], surface: gtx.Field[Dims[Cell, K], gtx.float64]
) -> F64:
    # `interior` only exists for k >= 1, where it is selected; at k = 0 it is out of bounds.
    theta = concat_where(K < 1, surface * 2.0, interior + 1.0)
    return theta(K + 1) - theta


@gtx.program
def exact_inputs_program(interior: F64, surface: F64, out: F64):
    exact_inputs(interior, surface, out=out, domain={Cell: (0, 16), K: (0, 11)})


@gtx.field_operator
def single_precision(a: F32, b: F32) -> F32:
    theta = concat_where(K < 1, b * float32(2.0), a + float32(1.0))
    return theta(K + 1) - theta


@gtx.program
def single_precision_program(a: F32, b: F32, out: F32):
    single_precision(a, b, out=out, domain={Cell: (0, 16), K: (0, 11)})


# --- numpy ----------------------------------------------------------------------------------


def _select(k_split, lower, upper):
    return np.where(np.arange(lower.shape[1])[None, :] < k_split, lower, upper)


def test_four_offsets_of_one_concat_result():
    a, b, out = field(), field(), field()
    run = side_by_side(four_offsets_program, dict(a=a, b=b, out=out), ("out",))
    assert_equal_to_stock(run)
    t = _select(2, 2.0 * b.asnumpy(), a.asnumpy() + 1.0)
    k = slice(1, NL - 2)
    ref = t[:, 0 : NL - 3] + 2 * t[:, k] + 3 * t[:, 2 : NL - 1] + 4 * t[:, 3:NL]
    np.testing.assert_allclose(run.results["inlined"]["out"][:, k], ref, rtol=1e-14)
    assert len(run.transients("stock")) >= 1 and run.transients("inlined") == []
    # One copy per distinct offset in each consumer (gt4py may split the concat node and
    # its consumers by level range before the hook runs; each piece is inlined).
    applied = run.inlined.report.applied
    assert applied and all(len(set(r.shifts)) == len(r.shifts) for r in applied)
    assert {s for r in applied for s in r.shifts} == {
        ("0", "-1"),
        ("0", "0"),
        ("0", "1"),
        ("0", "2"),
    }
    assert max(len(r.shifts) for r in applied) == 4, run.inlined.report.table()


def test_nested_concat_where_three_regions():
    a, b, c, out = field(), field(), field(), field()
    run = side_by_side(nested_program, dict(a=a, b=b, c=c, out=out), ("out",))
    assert_equal_to_stock(run)
    t = _select(1, 3.0 * c.asnumpy(), _select(5, 2.0 * b.asnumpy(), a.asnumpy() + 1.0))
    np.testing.assert_allclose(
        run.results["inlined"]["out"][:, : NL - 1], t[:, 1:] - t[:, :-1], rtol=1e-14
    )
    assert len(run.transients("inlined")) < len(run.transients("stock"))


@pytest.mark.parametrize("start", [0, 3])
def test_runtime_boundary_and_domain_start(start):
    a, b, out = field(), field(), field()
    lev = 9
    run = side_by_side(
        runtime_boundary_program,
        dict(a=a, b=b, out=out, surface_level=np.int32(lev), start=np.int32(start)),
        ("out",),
    )
    assert_equal_to_stock(run)
    t = _select(lev - 1, 0.5 * a.asnumpy(), b.asnumpy() - 1.0)
    ref = (t[:, 1:] - t[:, :-1])[2:, start:]
    np.testing.assert_allclose(run.results["inlined"]["out"][2:, start : NL - 1], ref, rtol=1e-14)
    assert run.transients("inlined") == []


def test_branch_out_of_bounds_outside_its_region_is_evaluated_lazily():
    """`interior` is sized exactly (levels 1..NL-1); the upper branch must never run at k = 0."""
    interior = gtx.as_field(gtx.domain({Cell: (0, NC), K: (1, NL)}), RNG.random((NC, NL - 1)))
    surface, out = field(), field()
    run = side_by_side(
        exact_inputs_program, dict(interior=interior, surface=surface, out=out), ("out",)
    )
    assert_equal_to_stock(run)
    t = np.empty((NC, NL))
    t[:, 0] = 2.0 * surface.asnumpy()[:, 0]
    t[:, 1:] = interior.asnumpy() + 1.0
    np.testing.assert_allclose(
        run.results["inlined"]["out"][:, : NL - 1], t[:, 1:] - t[:, :-1], rtol=1e-14
    )
    assert run.transients("inlined") == []


def test_float32():
    a, b, out = (field(dtype=np.float32) for _ in range(3))
    run = side_by_side(single_precision_program, dict(a=a, b=b, out=out), ("out",))
    assert_equal_to_stock(run, rtol=1e-6)
    t = _select(1, b.asnumpy() * np.float32(2.0), a.asnumpy() + np.float32(1.0))
    np.testing.assert_allclose(
        run.results["inlined"]["out"][:, : NL - 1], t[:, 1:] - t[:, :-1], rtol=1e-6
    )
    assert run.transients("inlined") == []


@gtx.field_operator
def eager_provable(a: F64, b: F64) -> F64:
    # `a` and `b` are also read on the whole range, so either branch can be evaluated
    # anywhere the consumer reads: the annotations from GTIR prove eager evaluation safe.
    theta = concat_where(K < 1, b * 2.0, a + 1.0)
    return theta(K + 1) - theta + a + b(K + 1)


@gtx.program
def eager_provable_program(a: F64, b: F64, out: F64):
    # Cells 0, 1, 14 and 15 are not read: poisoned inputs hold NaN there.
    eager_provable(a, b, out=out, domain={Cell: (2, 14), K: (0, 11)})


def _modes(run):
    return {r.mode for r in run.inlined.report.applied}


def test_annotations_prove_eager_evaluation():
    a, b, out = field(), field(), field()
    # Windows off: the consumer is split at k = 1, and each piece could be swept instead
    # (a window group); this is about how an inlined concat evaluates its branches.
    run = side_by_side(eager_provable_program, dict(a=a, b=b, out=out), ("out",), windows=False)
    assert_equal_to_stock(run)
    t = _select(1, 2.0 * b.asnumpy(), a.asnumpy() + 1.0)
    ref = t[:, 1:] - t[:, :-1] + a.asnumpy()[:, :-1] + b.asnumpy()[:, 1:]
    np.testing.assert_allclose(run.results["inlined"]["out"][2:14, : NL - 1], ref[2:14], rtol=1e-13)
    assert "eager" in _modes(run), run.inlined.report.table()
    assert run.transients("inlined") == []
    # The same builds on inputs that are NaN wherever the program does not read them: the
    # eager copy's discarded reads stay inside, and no selected value comes from outside.
    poisoned = poison_unread(run.inlined.sdfg, dict(a=a, b=b, out=out))
    assert (
        np.isnan(poisoned["a"].asnumpy()[[0, 1, 14, 15]]).all()
        and not np.isnan(poisoned["a"].asnumpy()[2:14]).any()
    )
    again = rerun(run, eager_provable_program, poisoned, ("out",))
    assert not np.isnan(again.results["stock"]["out"][2:14, : NL - 1]).any()
    assert_equal_to_stock(again)


def test_split_consumers_of_a_concat_are_swept_as_a_window_group():
    """gt4py splits the consumer at k = 1; with windows on, each piece is
    swept in K (a window group, docs/vertical_window.md) and the concat node goes, equal to
    stock on clean and on poisoned inputs."""
    a, b, out = field(), field(), field()
    run = side_by_side(eager_provable_program, dict(a=a, b=b, out=out), ("out",), windows=True)
    assert _modes(run) == {"window"} and len(run.inlined.report.applied) == 2, (
        run.inlined.report.table()
    )
    assert run.transients("inlined") == []
    assert_equal_to_stock(run)
    assert_equal_to_stock(
        rerun(
            run,
            eager_provable_program,
            poison_unread(run.inlined.sdfg, dict(a=a, b=b, out=out)),
            ("out",),
        )
    )


def test_lazy_when_a_branch_is_out_of_bounds_elsewhere():
    interior = gtx.as_field(gtx.domain({Cell: (0, NC), K: (1, NL)}), RNG.random((NC, NL - 1)))
    run = side_by_side(
        exact_inputs_program,
        dict(interior=interior, surface=field(), out=field()),
        ("out",),
        windows=False,
    )
    # gt4py splits the consumer at k = 1 (windows off: each piece could be swept instead,
    # a window group): the piece reading level 0 must select lazily
    # (the upper branch would read `interior` at level 0); the piece above may be eager.
    assert "lazy" in _modes(run), run.inlined.report.table()
    assert_equal_to_stock(run)


CellField = gtx.Field[Dims[Cell], gtx.float64]


@gtx.field_operator
def broadcast_branches(a: F64, s: CellField) -> F64:
    # A scalar branch below, a Cell-only field in the middle, a Cell x K field above.
    theta = concat_where(K < 1, 0.5, concat_where(K < 4, s * 2.0, a + 1.0))
    return theta(K + 1) - theta


@gtx.program
def broadcast_branches_program(a: F64, s: CellField, out: F64):
    broadcast_branches(a, s, out=out, domain={Cell: (0, 16), K: (0, 11)})


def test_scalar_and_lower_dimensional_branches_broadcast():
    a, out = field(), field()
    s = gtx.as_field([Cell], RNG.random(NC))
    run = side_by_side(broadcast_branches_program, dict(a=a, s=s, out=out), ("out",))
    assert_equal_to_stock(run)
    t = _select(
        1,
        np.full((NC, NL), 0.5),
        _select(4, np.repeat(2.0 * s.asnumpy()[:, None], NL, axis=1), a.asnumpy() + 1.0),
    )
    np.testing.assert_allclose(
        run.results["inlined"]["out"][:, : NL - 1], t[:, 1:] - t[:, :-1], rtol=1e-14
    )
    assert run.inlined.report.applied and len(run.transients("inlined")) < max(
        1, len(run.transients("stock"))
    )


def test_cell_only_field_branch_read_at_k_plus_1_compiles_and_matches_numpy():
    # `t = concat_where(K < 1, c, b); t(K + 1) - t`, `c` Cell-only (tests/user_programs.py):
    # gt4py 1.2.3's concat_where replacement raises IndexError on it, stock backend too.
    from user_programs import cell_only_branch as cell_only_branch_program

    from gt4py_dace_xforms.tools.compare import inline_build

    b, out = field(), field()
    c = gtx.as_field([Cell], RNG.random(NC))
    build = inline_build()
    cell_only_branch_program.with_backend(build.backend)(b, c, out, offset_provider={})
    t = _select(1, np.repeat(c.asnumpy()[:, None], NL, axis=1), b.asnumpy())
    np.testing.assert_allclose(out.asnumpy()[:, : NL - 1], t[:, 1:] - t[:, :-1], rtol=1e-14)
    # The library took the concat node before gt4py's replacement could see it.
    assert any(r.applied and r.removed_intermediate for r in build.report.records), (
        build.report.table()
    )
