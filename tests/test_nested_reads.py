"""Temporaries read inside a nested SDFG of the consumer: the columns a scan reads level by
level (`analysis.nested_reads`). gt4py passes the column whole into the scan's nested SDFG;
the copies evaluate the producer inside the scan's loop, at the level read. Lowered from
gt4py, compiled with "everything sound" (and with the CPU cost model, which prices a scan's
reads per level; `scan_guard` declines what feeds a scan), and
compared with stock and numpy."""

import copy

import dace
import gt4py.next as gtx
import numpy as np
import pytest
from gt4py.next import Dims
from gt4py.next.ffront.experimental import concat_where
from gt4py.next.program_processors.runners.dace.transformations.auto_optimize import (
    GT4PyAutoOptHook,
)
from gt4py_helpers import run_out

from gt4py_dace_xforms.analysis.candidate import InlineCandidate, analyse_candidate
from gt4py_dace_xforms.integration.capture import capture_stages
from gt4py_dace_xforms.policy import CostModel, InlineWhereSound
from gt4py_dace_xforms.tools.compare import inline_build, stock_build, two_d_transients
from gt4py_dace_xforms.transformations.column_reads import gt_narrow_column_reads
from gt4py_dace_xforms.transformations.inline_fusion_pass import (
    find_candidates,
    gt_inline_intermediates,
)


Cell = gtx.Dimension("Cell")
K = gtx.Dimension("K", kind=gtx.DimensionKind.VERTICAL)
F64 = gtx.Field[Dims[Cell, K], gtx.float64]
NC, NL = 16, 12  # literal in the programs' domains
RNG = np.random.default_rng(17)


@gtx.scan_operator(axis=K, forward=True, init=0.0)
def decay(state: float, x: float) -> float:
    return 0.5 * state + x


@gtx.field_operator
def scan_of_temporary(a: F64, b: F64) -> F64:
    return decay(a * 2.0 + b)


@gtx.program
def scan_of_temporary_program(a: F64, b: F64, out: F64):
    scan_of_temporary(a, b, out=out, domain={Cell: (0, 16), K: (0, 12)})


@gtx.field_operator
def scan_of_concat(a: F64, b: F64) -> F64:
    return decay(concat_where(K < 3, a - 1.0, b * a))


@gtx.program
def scan_of_concat_program(a: F64, b: F64, out: F64):
    scan_of_concat(a, b, out=out, domain={Cell: (0, 16), K: (0, 12)})


def _decay(x):
    out, state = np.empty_like(x), np.zeros(x.shape[0])
    for k in range(x.shape[1]):
        state = 0.5 * state + x[:, k]
        out[:, k] = state
    return out


@pytest.fixture(scope="module")
def scan_step():
    taken = capture_stages(
        scan_of_temporary_program, [(GT4PyAutoOptHook.TopLevelDataFlowStep, 1)], offset_provider={}
    )
    return taken[(GT4PyAutoOptHook.TopLevelDataFlowStep, 1)]


def _nested(sdfg):
    found = [analyse_candidate(sdfg, st, n, m) for st, n, m in find_candidates(sdfg)]
    return [c for c in found if isinstance(c, InlineCandidate) and c.nested]


def test_scan_column_is_a_nested_read(scan_step):
    [cand] = _nested(scan_step)
    assert cand.removes_intermediate and cand.producer is not None and not cand.groups
    assert len(cand.nested) == 1 and len(cand.nested[0].groups) == 1  # one level read per iteration


def test_scan_guard_declines_what_feeds_a_scan_twice_per_level_and_sound_inlines_it(scan_step):
    """`scan_guard` keeps what a scan would evaluate more than once per level (upstream
    measured such pushed shifts as a loss on the GPU); a column read once per level moves
    its Map into the loop with nothing evaluated twice (`analysis/scan_inputs.py`), which
    the guard lets through."""
    model = gt_inline_intermediates(
        copy.deepcopy(scan_step), policy=CostModel("cpu", scan_guard=True)
    )
    assert [r.reason.startswith("scan inputs: the output of") for r in model.applied] == [True], (
        model.table()
    )
    step = capture_stages(
        scan_reads_at_two_levels, [(GT4PyAutoOptHook.TopLevelDataFlowStep, 1)], offset_provider={}
    )
    twice = step[(GT4PyAutoOptHook.TopLevelDataFlowStep, 1)]
    model = gt_inline_intermediates(twice, policy=CostModel("cpu", scan_guard=True))
    assert any("feeds a scan" in r.reason for r in model.declined), model.table()
    sdfg = copy.deepcopy(scan_step)
    before = two_d_transients(sdfg)
    report = gt_inline_intermediates(sdfg, policy=InlineWhereSound(), validate=True)
    assert any(r.shifts and r.shifts[0][0].startswith("scan") for r in report.applied), (
        report.table()
    )
    assert len(two_d_transients(sdfg)) == len(before) - 1


def test_cpu_cost_model_prices_a_scan_read_per_level(scan_step):
    """Without the guard (the CPU's default) the estimate decides: the scan reads one level
    per iteration of its loop, so the copy runs on every element of the temporary (the
    Map over the columns alone would undercount by the 12 levels); `a * 2 + b` read once
    per level removes the temporary with nothing recomputed."""
    [cand] = _nested(scan_step)
    decision = CostModel("cpu").decide(scan_step, cand)
    volume = 16 * 12
    assert decision.accept and decision.figures["points"] >= volume, decision
    sdfg = copy.deepcopy(scan_step)
    report = gt_inline_intermediates(sdfg, policy=CostModel("cpu"))
    assert any(r.shifts and r.shifts[0][0].startswith("scan") for r in report.applied), (
        report.table()
    )


def test_persistent_transients_decline_a_scan_argument_on_the_cpu(scan_step):
    """The same read with persistent transients: nothing is recomputed, but the work moves
    into the scan's loop for no allocation saved (bench `scan`, PERSISTENT: 1.15x-1.19x
    stock), so the CPU model declines it and leaves the SDFG as it was, but for the scan's
    column read, which it narrows (`NestedColumnRead`: nothing moves into the loop)."""
    [cand] = _nested(scan_step)
    decision = CostModel("cpu", transient_memory_mode="PERSISTENT").decide(scan_step, cand)
    assert not decision.accept and "scan's loop" in decision.reason, decision
    assert decision.figures["in_scan_loop"] and decision.figures["recomputed_points"] == 0
    sdfg = copy.deepcopy(scan_step)
    expected = copy.deepcopy(scan_step)
    assert gt_narrow_column_reads(expected).column_reads == [(cand.intermediate.data, "scan_0")]
    report = gt_inline_intermediates(
        sdfg, policy=CostModel("cpu", transient_memory_mode="PERSISTENT")
    )
    assert not report.applied and report.column_reads == [(cand.intermediate.data, "scan_0")]
    assert sdfg.hash_sdfg() == expected.hash_sdfg()


def test_nested_sdfg_writing_the_column_is_declined(scan_step):
    """A scan that writes the array it was passed (hand-edited): declined, unchanged."""
    sdfg = copy.deepcopy(scan_step)
    [cand] = _nested(sdfg)
    read = cand.nested[0]
    group = read.groups[0]
    st, tasklet = group.state, group.edges[0].dst
    # The tasklet's result also goes back into the column, at the element it read.
    out_conn = next(iter(st.out_edges(tasklet))).src_conn
    st.add_edge(
        tasklet,
        out_conn,
        st.add_access(read.connector),
        None,
        dace.Memlet(data=read.connector, subset=str(group.edges[0].data.subset)),
    )
    before = sdfg.to_json()
    assert not _nested(sdfg)
    verdicts = [analyse_candidate(sdfg, s, n, m) for s, n, m in find_candidates(sdfg)]
    assert any(
        getattr(v, "reason", "") == "nested read: the nested SDFG writes the array"
        for v in verdicts
    ), verdicts
    assert sdfg.to_json() == before


@pytest.mark.compile
@pytest.mark.parametrize(
    "policy", [InlineWhereSound(), CostModel("cpu")], ids=["sound", "cpu_model"]
)
def test_scans_of_temporaries_match_stock_and_numpy(policy):
    stock, inlined = stock_build(), inline_build(policy=policy)
    a, b = (gtx.as_field([Cell, K], RNG.random((NC, NL))) for _ in range(2))
    an, bn = a.asnumpy(), b.asnumpy()
    cases = [
        (scan_of_temporary_program, 2.0 * an + bn),
        (scan_of_concat_program, np.where(np.arange(NL)[None, :] < 3, an - 1.0, bn * an)),
    ]
    for program, t in cases:
        seen = len(inlined.report.applied)
        args = dict(a=a, b=b, out=gtx.as_field([Cell, K], np.zeros((NC, NL))))
        got, ref = run_out(program, inlined, args), run_out(program, stock, args)
        np.testing.assert_allclose(got, ref, rtol=1e-14)  # FMA contraction at most
        np.testing.assert_allclose(got, _decay(t), rtol=1e-13)
        applied = inlined.report.applied[seen:]
        assert any(r.shifts and r.shifts[0][0].startswith("scan") for r in applied), (
            inlined.report.table()
        )
        assert len(two_d_transients(inlined.sdfg)) < len(two_d_transients(stock.sdfg))


@gtx.scan_operator(axis=K, forward=True, init=0.0)
def damped(
    acc: gtx.float64, lower: gtx.float64, upper: gtx.float64, dz: gtx.float64
) -> gtx.float64:
    return 0.75 * acc + (lower - upper) * dz


@gtx.field_operator
def _scan_reads_at_two_levels(top: F64, wgt: F64, x: F64, dz: F64) -> F64:
    x_ic = concat_where(K < 1, top, wgt * x + (1.0 - wgt) * x(K - 1))
    return damped(x_ic(K + 1), x_ic, dz)


@gtx.program
def scan_reads_at_two_levels(top: F64, wgt: F64, x: F64, dz: F64, out: F64):
    _scan_reads_at_two_levels(top, wgt, x, dz, out=out, domain={Cell: (0, 17), K: (0, 12)})


def test_scan_reading_one_column_at_two_levels_is_two_nested_reads():
    """gt4py passes `x_ic` to the scan twice (once per level it reads): two nested reads of
    one nested SDFG, which share the producer's inputs there (issue 34: the second added
    `top` again and the user's build failed with FileExistsError)."""
    step = capture_stages(
        scan_reads_at_two_levels, [(GT4PyAutoOptHook.TopLevelDataFlowStep, 1)], offset_provider={}
    )
    sdfg = step[(GT4PyAutoOptHook.TopLevelDataFlowStep, 1)]
    [cand] = _nested(sdfg)
    assert len(cand.nested) == 2 and len({id(r.node) for r in cand.nested}) == 1
    report = gt_inline_intermediates(sdfg, policy=InlineWhereSound(), validate=True)
    assert [r.removed_intermediate for r in report.applied] == [True], report.table()
    [node] = {r.node for r in cand.nested}
    assert sorted(c for c in node.in_connectors if c in ("top", "wgt", "x")) == ["top", "wgt", "x"]


@pytest.mark.compile
def test_scan_reading_one_column_at_two_levels_matches_stock_and_numpy():
    nc, nl = 17, 13
    args = {n: gtx.as_field([Cell, K], RNG.random((nc, nl))) for n in ("top", "wgt", "x", "dz")}
    args["out"] = gtx.as_field([Cell, K], np.zeros((nc, nl)))
    top, wgt, x, dz = (args[n].asnumpy() for n in ("top", "wgt", "x", "dz"))
    x_ic = np.empty_like(x)
    x_ic[:, 0] = top[:, 0]
    x_ic[:, 1:] = wgt[:, 1:] * x[:, 1:] + (1.0 - wgt[:, 1:]) * x[:, :-1]
    want, acc = np.zeros((nc, nl)), np.zeros(nc)
    for k in range(12):
        acc = 0.75 * acc + (x_ic[:, k + 1] - x_ic[:, k]) * dz[:, k]
        want[:, k] = acc
    ref = run_out(scan_reads_at_two_levels, stock_build(), args)
    np.testing.assert_allclose(ref, want, rtol=1e-12)
    for policy in (None, InlineWhereSound()):  # the default backend's cost model, everything sound
        build = inline_build(policy=policy)
        got = run_out(scan_reads_at_two_levels, build, args)
        np.testing.assert_allclose(got, ref, rtol=1e-13, atol=1e-15)
        assert not build.report.failures, build.report.failures
        assert any(r.shifts and r.shifts[0][0].startswith("scan") for r in build.report.applied), (
            build.report.table()
        )


# --- a window: copies at consecutive levels, one evaluation per level -------------------------


@gtx.scan_operator(axis=K, forward=False, init=0.0)
def damped_down(
    acc: gtx.float64, lower: gtx.float64, upper: gtx.float64, dz: gtx.float64
) -> gtx.float64:
    return 0.75 * acc + (lower - upper) * dz


@gtx.scan_operator(axis=K, forward=True, init=0.0)
def three_levels(acc: gtx.float64, a: gtx.float64, b: gtx.float64, c: gtx.float64) -> gtx.float64:
    return 0.5 * acc + a - 2.0 * b + c


@gtx.field_operator
def _x_ic(top: F64, wgt: F64, x: F64) -> F64:
    return concat_where(K < 1, top, wgt * x + (1.0 - wgt) * x(K - 1))


@gtx.field_operator
def _down_at_two_levels(top: F64, wgt: F64, x: F64, dz: F64) -> F64:
    x_ic = _x_ic(top, wgt, x)
    return damped_down(x_ic(K + 1), x_ic, dz)


@gtx.field_operator
def _at_three_levels(top: F64, wgt: F64, x: F64, dz: F64) -> F64:
    x_ic = _x_ic(top, wgt, x)
    return three_levels(x_ic, x_ic(K + 1), x_ic(K + 2))


@gtx.field_operator
def _two_levels_apart(top: F64, wgt: F64, x: F64, dz: F64) -> F64:
    x_ic = _x_ic(top, wgt, x)
    return damped(x_ic(K + 2), x_ic, dz)


@gtx.program
def down_at_two_levels(top: F64, wgt: F64, x: F64, dz: F64, out: F64):
    _down_at_two_levels(top, wgt, x, dz, out=out, domain={Cell: (0, 17), K: (0, 11)})


@gtx.program
def at_three_levels(top: F64, wgt: F64, x: F64, dz: F64, out: F64):
    _at_three_levels(top, wgt, x, dz, out=out, domain={Cell: (0, 17), K: (0, 11)})


@gtx.program
def two_levels_apart(top: F64, wgt: F64, x: F64, dz: F64, out: F64):
    _two_levels_apart(top, wgt, x, dz, out=out, domain={Cell: (0, 17), K: (0, 11)})


def _numpy_x_ic(top, wgt, x):
    x_ic = np.empty_like(x)
    x_ic[:, 0] = top[:, 0]
    x_ic[:, 1:] = wgt[:, 1:] * x[:, 1:] + (1.0 - wgt[:, 1:]) * x[:, :-1]
    return x_ic


def _numpy_scan(levels, step, forward=True):
    out, acc = np.zeros((levels[0].shape[0], 11)), np.zeros(levels[0].shape[0])
    for k in range(11) if forward else range(10, -1, -1):
        acc = step(acc, k)
        out[:, k] = acc
    return out


WINDOW_CASES = {
    # program, window (carried copies, copies left in the loop body) or None, numpy
    "reads k+1, k; backward": (
        down_at_two_levels,
        (1, 1),
        lambda t, dz: _numpy_scan(
            [t], lambda acc, k: 0.75 * acc + (t[:, k + 1] - t[:, k]) * dz[:, k], forward=False
        ),
    ),
    "reads k, k+1, k+2; forward": (
        at_three_levels,
        (2, 1),
        lambda t, dz: _numpy_scan(
            [t], lambda acc, k: 0.5 * acc + t[:, k] - 2.0 * t[:, k + 1] + t[:, k + 2]
        ),
    ),
    "reads k+2, k; not consecutive": (
        two_levels_apart,
        None,
        lambda t, dz: _numpy_scan(
            [t], lambda acc, k: 0.75 * acc + (t[:, k + 2] - t[:, k]) * dz[:, k]
        ),
    ),
}


def _window_parts(sdfg):
    """(copies in window fill blocks, copies in the loop bodies' other states) of `sdfg`'s scans."""
    fill = body = 0
    for node, parent in sdfg.all_nodes_recursive():
        if isinstance(node, dace.nodes.NestedSDFG) and node.label.startswith("inline_"):
            if parent.label.startswith("window_fill_"):
                fill += 1
            else:
                body += 1
    return fill, body


@pytest.mark.parametrize("case", list(WINDOW_CASES), ids=list(WINDOW_CASES))
def test_a_scan_reading_consecutive_levels_evaluates_one_per_level(case):
    """gt4py passes `x_ic` to the scan once per level it reads; the copies at consecutive
    levels keep one in the loop (the level the sweep reaches first: `k` going down, `k + 2`
    going up) and carry the others from the iterations before, evaluated for the first
    level before the loop (`transformations/scan_window.py`). Levels two apart are not a
    window: both copies stay."""
    program, window, _ = WINDOW_CASES[case]
    step = capture_stages(program, [(GT4PyAutoOptHook.TopLevelDataFlowStep, 1)], offset_provider={})
    sdfg = step[(GT4PyAutoOptHook.TopLevelDataFlowStep, 1)]
    [cand] = _nested(sdfg)
    copies = CostModel("cpu").estimate(sdfg, cand)["copies"]  # what the rewrite evaluates per level
    report = gt_inline_intermediates(sdfg, policy=InlineWhereSound(), validate=True)
    assert [r.removed_intermediate for r in report.applied] == [True], report.table()
    fill, body = _window_parts(sdfg)
    shifts = [
        n
        for n, _ in sdfg.all_nodes_recursive()
        if isinstance(n, dace.nodes.Tasklet) and n.label.startswith("window_shift_")
    ]
    if window is None:
        assert (fill, body, shifts, copies) == (0, 2, [], 2), (fill, body, copies)
    else:
        assert (fill, body) == window and len(shifts) == 1 and copies == 1


@pytest.mark.compile
def test_windowed_scans_match_stock_and_numpy():
    nc, nl = 17, 13
    args = {n: gtx.as_field([Cell, K], RNG.random((nc, nl))) for n in ("top", "wgt", "x", "dz")}
    t = _numpy_x_ic(*(args[n].asnumpy() for n in ("top", "wgt", "x")))
    dz = args["dz"].asnumpy()
    stock, built = stock_build(), inline_build(policy=InlineWhereSound())
    for case, (program, window, want) in WINDOW_CASES.items():
        run_args = {**args, "out": gtx.as_field([Cell, K], np.zeros((nc, nl)))}
        ref = run_out(program, stock, run_args)[:, :11]
        np.testing.assert_allclose(ref, want(t, dz), rtol=1e-12, err_msg=case)
        got = run_out(program, built, run_args)[:, :11]
        np.testing.assert_allclose(got, ref, rtol=1e-13, atol=1e-15, err_msg=case)
        assert not built.report.failures, built.report.failures
        shifts = [
            n
            for n, _ in built.post_sdfgs[-1].all_nodes_recursive()
            if isinstance(n, dace.nodes.Tasklet) and n.label.startswith("window_shift_")
        ]
        assert bool(shifts) == (window is not None), case


@gtx.program
def at_two_levels_symbolic(top: F64, wgt: F64, x: F64, dz: F64, out: F64, nlev: gtx.int32):
    _scan_reads_at_two_levels(top, wgt, x, dz, out=out, domain={Cell: (0, 17), K: (0, nlev)})


def test_a_window_needs_a_loop_that_provably_runs_its_first_level():
    """With the levels a symbol (`nlev`), the loop may run no iteration at all, and the
    carried level, evaluated before the loop, might then read outside what the program
    reads: no window, both copies stay in the loop (the cost model prices two)."""
    from gt4py_dace_xforms.analysis.scan_window import scan_window_plan

    step = capture_stages(
        at_two_levels_symbolic, [(GT4PyAutoOptHook.TopLevelDataFlowStep, 1)], offset_provider={}
    )
    sdfg = step[(GT4PyAutoOptHook.TopLevelDataFlowStep, 1)]
    [cand] = _nested(sdfg)
    assert CostModel("cpu").estimate(sdfg, cand)["copies"] == 2
    gt_inline_intermediates(sdfg, policy=InlineWhereSound(), validate=True)
    assert _window_parts(sdfg) == (0, 2)
    (scan,) = {
        n
        for n, _ in sdfg.all_nodes_recursive()
        if isinstance(n, dace.nodes.NestedSDFG) and n.label.startswith("scan")
    }
    (state,) = {
        st
        for st in scan.sdfg.all_states()
        for n in st.nodes()
        if isinstance(n, dace.nodes.NestedSDFG)
    }
    copies = [n for n in state.nodes() if isinstance(n, dace.nodes.NestedSDFG)]
    decline = scan_window_plan(scan.sdfg, state, copies)
    assert "cannot be proven to run its first level" in decline.reason, decline
