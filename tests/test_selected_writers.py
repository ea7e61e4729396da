"""Intermediates written in the branches of an `if`/`else` on a scalar argument
(`analysis.selected`): gt4py lowers the `if` to a `ConditionalBlock` whose branches each
write the whole intermediate; later readers re-evaluate, under the same condition, the
writer of the branch that ran. Lowered from gt4py, compiled, compared with stock and numpy
for both values of the condition."""

import copy

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
from gt4py_dace_xforms.policy import InlineWhereSound
from gt4py_dace_xforms.tools.compare import inline_build, stock_build, two_d_transients
from gt4py_dace_xforms.transformations.inline_fusion_pass import (
    find_candidates,
    gt_inline_intermediates,
)


Cell = gtx.Dimension("Cell")
K = gtx.Dimension("K", kind=gtx.DimensionKind.VERTICAL)
F64 = gtx.Field[Dims[Cell, K], gtx.float64]
NC, NL = 16, 12  # literal in the programs' domains
RNG = np.random.default_rng(11)


@gtx.field_operator
def choose(a: F64, b: F64, flag: bool) -> F64:
    if flag:
        t = a * 2.0 + b
    else:
        t = b - 1.0
    return t(K + 1) - t


@gtx.program
def choose_program(a: F64, b: F64, flag: bool, out: F64):
    choose(a, b, flag, out=out, domain={Cell: (0, 16), K: (0, 11)})


@gtx.field_operator
def choose_concat(a: F64, b: F64, level: gtx.int32) -> F64:
    # One branch is itself a concat (two writers inside the branch), the other a Map.
    if level > 2:
        t = concat_where(K < 1, b * 3.0, a + b)
    else:
        t = a * b
    return t(K + 1) + t(K - 1)


@gtx.program
def choose_concat_program(a: F64, b: F64, level: gtx.int32, out: F64):
    choose_concat(a, b, level, out=out, domain={Cell: (0, 16), K: (1, 11)})


def _step(program, **kwargs):
    taken = capture_stages(
        program, [(GT4PyAutoOptHook.TopLevelDataFlowStep, 1)], offset_provider={}, **kwargs
    )
    return taken[(GT4PyAutoOptHook.TopLevelDataFlowStep, 1)]


@pytest.fixture(scope="module")
def choose_step():
    return _step(choose_program)


def test_writers_in_both_branches_are_one_selected_candidate(choose_step):
    found = [
        analyse_candidate(choose_step, st, node, cons)
        for st, node, cons in find_candidates(choose_step)
    ]
    selected = [c for c in found if isinstance(c, InlineCandidate) and c.selected is not None]
    assert len(selected) == 1, found
    cand = selected[0]
    assert [b.condition is None for b in cand.selected.branches] == [False, True]
    assert cand.selected.condition_symbols == {"flag"}
    assert cand.removes_intermediate and not cand.eager and len(cand.groups) == 2


def test_selected_rewrite_removes_the_intermediate(choose_step):
    sdfg = copy.deepcopy(choose_step)
    before = two_d_transients(sdfg)
    report = gt_inline_intermediates(sdfg, policy=InlineWhereSound(), validate=True)
    assert [r.mode for r in report.applied] == ["selected"], report.table()
    after = two_d_transients(sdfg)
    assert len(after) == len(before) - 1, (before, after)


def test_condition_reading_data_is_declined(choose_step):
    """A condition that reads data could change before the consumer: decline, unchanged."""
    sdfg = copy.deepcopy(choose_step)
    block = next(
        b for b in sdfg.all_control_flow_blocks() if type(b).__name__ == "ConditionalBlock"
    )
    cond, _region = block.branches[0]
    data = next(n for n, d in sdfg.arrays.items() if not d.transient and len(d.shape) == 2)
    cond.as_string = f"flag and ({data}[0, 0] > 0)"
    before = sdfg.to_json()
    for st, node, cons in find_candidates(sdfg):
        verdict = analyse_candidate(sdfg, st, node, cons)
        assert not isinstance(verdict, InlineCandidate) or verdict.selected is None
    assert sdfg.to_json() == before


def _field():
    return gtx.as_field([Cell, K], RNG.random((NC, NL)))


@pytest.mark.compile
def test_both_conditions_match_stock_and_numpy():
    stock, inlined = stock_build(), inline_build(policy=InlineWhereSound())
    a, b = _field(), _field()
    for flag in (True, False):
        args = dict(a=a, b=b, flag=flag, out=_field())
        got, ref_stock = (
            run_out(choose_program, inlined, args),
            run_out(choose_program, stock, args),
        )
        t = 2.0 * a.asnumpy() + b.asnumpy() if flag else b.asnumpy() - 1.0
        np.testing.assert_allclose(
            got[:, : NL - 1], ref_stock[:, : NL - 1], rtol=1e-14
        )  # FMA contraction
        np.testing.assert_allclose(got[:, : NL - 1], t[:, 1:] - t[:, :-1], rtol=1e-14)
    assert "selected" in {r.mode for r in inlined.report.applied}, inlined.report.table()
    assert len(two_d_transients(inlined.sdfg)) < len(two_d_transients(stock.sdfg))
    first = len(inlined.report.applied)

    for level in (5, 1):
        args = dict(a=a, b=b, level=np.int32(level), out=_field())
        got, ref_stock = (
            run_out(choose_concat_program, inlined, args),
            run_out(choose_concat_program, stock, args),
        )
        an, bn = a.asnumpy(), b.asnumpy()
        t = np.where(np.arange(NL)[None, :] < 1, 3.0 * bn, an + bn) if level > 2 else an * bn
        np.testing.assert_allclose(got[:, 1 : NL - 1], ref_stock[:, 1 : NL - 1], rtol=1e-14)
        np.testing.assert_allclose(got[:, 1 : NL - 1], t[:, 2:] + t[:, :-2], rtol=1e-14)
    assert "selected" in {r.mode for r in inlined.report.applied[first:]}, inlined.report.table()
    assert len(two_d_transients(inlined.sdfg)) < len(two_d_transients(stock.sdfg))


def test_cost_model_charges_the_costliest_branch_on_cpu_and_gpu(choose_step):
    """A scalar condition does not diverge: the GPU model charges the costliest branch
    plus the test, as the CPU model does, not the sum of the branches."""
    from gt4py_dace_xforms.policy import CostModel

    cand = next(
        c
        for c in (
            analyse_candidate(choose_step, st, n, m) for st, n, m in find_candidates(choose_step)
        )
        if isinstance(c, InlineCandidate)
    )
    cpu, gpu = CostModel("cpu"), CostModel("gpu")
    ops = {m.target: m.estimate(choose_step, cand)["ops_per_copy"] for m in (cpu, gpu)}
    # `2.0 * a + b` (2 operations) is the costlier branch, `b - 1.0` (1) the other.
    assert ops["cpu"] == ops["gpu"] == 2 + cpu.branch_ops, ops
