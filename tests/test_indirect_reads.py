"""Reads of a temporary through a neighbor table (`t(E2C[1])`): inlined at the deref tasklet."""

import copy

import neighbor_programs as npg
import numpy as np
import pytest
from dace.sdfg import nodes as dn
from gt4py.next.program_processors.runners.dace.transformations.auto_optimize import (
    GT4PyAutoOptHook,
)

import gt4py_dace_xforms as gx
from gt4py_dace_xforms.analysis.candidate import analyse_candidate
from gt4py_dace_xforms.analysis.indirect import match_indirect_read
from gt4py_dace_xforms.analysis.producer import Decline
from gt4py_dace_xforms.integration import capture
from gt4py_dace_xforms.tools.compare import inline_build, stock_build, two_d_transients
from gt4py_dace_xforms.transformations.inline_fusion_pass import find_candidates


STEP = (GT4PyAutoOptHook.TopLevelDataFlowStep, 1)


def _step_sdfg(program):
    _, provider = npg.inputs()
    return capture.capture_stages(program, [STEP], offset_provider=provider)[STEP]


def _only_candidate(sdfg):
    (cand,) = [c for c in find_candidates(sdfg) if c[1].data in two_d_transients(sdfg)]
    return cand


def test_neighbor_reads_are_sound_one_copy_per_deref():
    sdfg = _step_sdfg(npg.edge_difference)
    state, node, consumer = _only_candidate(sdfg)
    cand = analyse_candidate(sdfg, state, node, consumer)
    assert not isinstance(cand, Decline), cand
    assert cand.groups == () and len(cand.indirect) == 2 and cand.removes_intermediate
    assert cand.copies == 2

    report = gx.gt_inline_intermediates(sdfg, policy=gx.InlineWhereSound())
    assert [r.intermediate for r in report.applied] == [node.data]
    assert node.data not in sdfg.arrays
    copies = [
        n for n in state.nodes() if isinstance(n, dn.NestedSDFG) and n.label.startswith("inline_")
    ]
    assert len(copies) == 2
    # The deref tasklets are left copying the copies' values (their output edges untouched).
    derefs = [n for n in state.nodes() if isinstance(n, dn.Tasklet) and "deref" in n.label]
    assert len(derefs) == 2
    for t in derefs:
        assert [e.src for e in state.in_edges(t)] and all(
            isinstance(e.src, dn.AccessNode) for e in state.in_edges(t)
        )
        assert "[" not in t.code.as_string


def test_neighbor_reduction_reads_inside_the_local_map_are_inlined_there():
    """`neighbor_sum(t(E2C), axis=E2CDim)`: the deref tasklet sits in a Map over the
    neighbors and receives `t[0:N, k]` (squeezed to one dimension)."""
    sdfg = _step_sdfg(npg.edge_sum)
    state, node, consumer = _only_candidate(sdfg)
    cand = analyse_candidate(sdfg, state, node, consumer)
    assert not isinstance(cand, Decline), cand
    (read,) = cand.indirect
    assert len(read.inner_maps) == 1 and state.entry_node(read.tasklet) is read.inner_maps[0]
    report = gx.gt_inline_intermediates(sdfg, policy=gx.InlineWhereSound())
    assert report.applied and node.data not in sdfg.arrays
    (copy_node,) = [
        n for n in state.nodes() if isinstance(n, dn.NestedSDFG) and n.label.startswith("inline_")
    ]
    assert state.entry_node(copy_node) is read.inner_maps[0]


def test_a_producer_that_misses_part_of_the_array_is_declined_unchanged():
    sdfg = _step_sdfg(npg.edge_difference)
    state, node, consumer = _only_candidate(sdfg)
    writer = next(e.src for e in state.in_edges(node))
    entry = state.entry_node(writer)
    b, e, s = entry.map.range[0]
    entry.map.range[0] = (b + 1, e, s)  # cell 0 is no longer computed
    before = sdfg.hash_sdfg()
    result = analyse_candidate(sdfg, state, node, consumer)
    assert isinstance(result, Decline) and "write all of dimension 0" in result.reason
    report = gx.gt_inline_intermediates(sdfg, policy=gx.InlineWhereSound(), validate=False)
    assert not report.applied and sdfg.hash_sdfg() == before


def test_a_tasklet_that_computes_with_the_field_is_no_indirect_read():
    sdfg = _step_sdfg(npg.edge_difference)
    state, node, consumer = _only_candidate(sdfg)
    edge = next(e for e in state.out_edges(consumer) if e.data.data == node.data)
    tasklet = edge.dst
    out = next(iter(tasklet.out_connectors))
    tasklet.code.as_string = tasklet.code.as_string.replace(f"{out} =", f"{out} = 1.0 +")
    result = match_indirect_read(state, edge, 2)
    assert isinstance(result, Decline) and "more than `out = field[index]`" in result.reason
    assert isinstance(analyse_candidate(sdfg, state, node, consumer), Decline)


@pytest.fixture(scope="module")
def builds():
    return {
        "stock": stock_build(),
        "sound": inline_build(policy=gx.InlineWhereSound()),
        "model": inline_build(),
    }


@pytest.mark.compile
@pytest.mark.parametrize("program", ["edge_difference", "edge_sum", "edge_difference_and_shift"])
def test_compiled_equal_to_stock_and_numpy(builds, program):
    prog = getattr(npg, program)
    base, provider = npg.inputs()
    extra = {"nlev": np.int32(6)} if program == "edge_difference_and_shift" else {}
    results = {}
    for name, build in builds.items():
        args = {k: copy.deepcopy(v) for k, v in base.items()}
        prog.with_backend(build.backend)(**args, **extra, offset_provider=provider)
        results[name] = args["out"].asnumpy()
    for name in ("sound", "model"):
        np.testing.assert_allclose(
            results[name], results["stock"], rtol=1e-14, atol=0, err_msg=name
        )
    if program in ("edge_difference", "edge_sum"):
        table = provider["E2C"].asnumpy()
        expected = getattr(npg, f"{program}_numpy")(base["a"].asnumpy(), base["b"].asnumpy(), table)
        np.testing.assert_allclose(results["sound"], expected, rtol=1e-14)
    sound_report = builds["sound"].report
    assert any(
        r.applied and any(s[0].startswith("[") for s in r.shifts) for r in sound_report.records
    )
