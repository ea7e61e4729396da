"""A temporary written by the pieces of one split Map and read through a neighbor table:
the pieces merged into one Map, then the read inlined (`gt_merge_split_fragments`)."""

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
from gt4py_dace_xforms.analysis.fragments import SplitFragments, split_fragments
from gt4py_dace_xforms.analysis.producer import Decline
from gt4py_dace_xforms.integration import capture
from gt4py_dace_xforms.policy import InlineOnly
from gt4py_dace_xforms.tools.compare import inline_build, stock_build


STEP = (GT4PyAutoOptHook.TopLevelDataFlowStep, 1)
#: gt4py leaves a Map split at zone bounds as pieces; the cell producer is split so before
#: gt4py's own passes (which fuse each piece with its chain, as they do in icon4py's build).
SPLIT = {GT4PyAutoOptHook.TopLevelDataFlowPre: npg.split_producers}


def _split_sdfg(program=npg.edge_difference_of_product):
    _, provider = npg.inputs()
    return capture.capture_stages(
        program, [STEP], offset_provider=provider, optimization_hooks=SPLIT
    )[STEP]


def _pieces(sdfg):
    """The (state, node) of the one transient with several writers, and its plan."""
    ((state, node),) = [
        (st, n)
        for st in sdfg.states()
        for n in st.data_nodes()
        if st.in_degree(n) > 1 and sdfg.arrays[n.data].transient
    ]
    return state, node, split_fragments(state, node)


def test_the_split_writers_are_one_computation_whose_read_is_declined_as_they_are():
    sdfg = _split_sdfg()
    state, node, plan = _pieces(sdfg)
    assert isinstance(plan, SplitFragments), plan
    assert len(plan.entries) == 3 and plan.dim == 0
    assert (plan.lo, plan.hi) == (0, 7)
    reader = next(e.dst for e in state.out_edges(node))
    got = analyse_candidate(sdfg, state, node, reader)
    assert isinstance(got, Decline) and "indirect read of a concat node" in got.reason


def test_merged_into_one_map_then_inlined():
    sdfg = _split_sdfg()
    state, node, plan = _pieces(sdfg)
    name, kept = node.data, plan.entries[0]
    report = gx.gt_inline_intermediates(sdfg, policy=gx.InlineWhereSound())
    assert report.fragments_merged == [name]
    modes = [(r.intermediate, r.mode) for r in report.applied]
    assert (name, "merged_fragments") in modes and (name, "single") in modes, modes
    assert name not in sdfg.arrays
    assert kept not in state.nodes() or kept.map.range[0][:2] == (0, 7)
    labels = [n.map.label for n in state.nodes() if isinstance(n, dn.MapEntry)]
    assert not any("_piece" in label for label in labels), labels


def test_a_policy_that_declines_the_readers_leaves_the_pieces_as_they_are():
    sdfg = _split_sdfg()
    before = sdfg.hash_sdfg()
    report = gx.gt_inline_intermediates(sdfg, policy=InlineOnly(intermediates=()), validate=False)
    assert report.fragments_merged == [] and not report.applied
    assert sdfg.hash_sdfg() == before


def _other_code(sdfg, state, plan):
    tasklet = next(
        n for n in state.scope_subgraph(plan.entries[2]).nodes() if isinstance(n, dn.Tasklet)
    )
    out = next(iter(tasklet.out_connectors))
    tasklet.code.as_string = tasklet.code.as_string.replace(f"{out} =", f"{out} = 1.0 +", 1)


def _gap(sdfg, state, plan):
    b, e, s = plan.entries[2].map.range[0]
    plan.entries[2].map.range[0] = (b + 1, e, s)


def _other_input(sdfg, state, plan):
    # the last piece reads `b` where the others read `a` (same connector)
    edge = next(e for e in state.in_edges(plan.entries[2]) if e.data.data in ("a", "b"))
    other = "b" if edge.data.data == "a" else "a"
    src = state.add_access(other)
    state.add_edge(src, None, edge.dst, edge.dst_conn, copy.deepcopy(edge.data))
    state.edges_between(src, edge.dst)[0].data.data = other
    state.remove_edge(edge)


@pytest.mark.parametrize(
    "edit, reason",
    [
        (_other_code, "computes other than"),
        (_gap, "not proven to follow each other"),
        (_other_input, "reads other data"),
    ],
)
def test_pieces_that_are_not_one_computation_are_declined_unchanged(edit, reason):
    sdfg = _split_sdfg()
    state, node, plan = _pieces(sdfg)
    edit(sdfg, state, plan)
    got = split_fragments(state, node)
    assert isinstance(got, Decline) and reason in got.reason, got
    before = sdfg.hash_sdfg()
    report = gx.gt_inline_intermediates(sdfg, policy=gx.InlineWhereSound(), validate=False)
    assert report.fragments_merged == []
    assert sdfg.hash_sdfg() == before


@pytest.fixture(scope="module")
def builds():
    return {
        "stock": stock_build(user_hooks=SPLIT),
        "library": inline_build(policy=gx.InlineWhereSound(), user_hooks=SPLIT),
    }


@pytest.mark.compile
# edge_difference: gt4py splits `a * 2.0` to fuse one part into each piece (each with a
# transient of its own name), so the pieces are compared up to those names.
@pytest.mark.parametrize("program", ["edge_difference_of_product", "edge_difference"])
def test_compiled_equal_to_stock_and_numpy(builds, program):
    prog = getattr(npg, program)
    base, provider = npg.inputs()
    results = {}
    for name, build in builds.items():
        args = {k: copy.deepcopy(v) for k, v in base.items()}
        prog.with_backend(build.backend)(**args, offset_provider=provider)
        results[name] = args["out"].asnumpy()
    table = provider["E2C"].asnumpy()
    expected = getattr(npg, f"{program}_numpy")(base["a"].asnumpy(), base["b"].asnumpy(), table)
    # Inlined, `a * b` may be contracted into the subtraction (an FMA): equal within rounding.
    np.testing.assert_allclose(results["library"], expected, rtol=1e-13, atol=1e-14)
    np.testing.assert_allclose(results["library"], results["stock"], rtol=1e-13, atol=1e-14)
    report = builds["library"].report
    assert report.fragments_merged, report.table()
    left = [
        a for a, d in builds["library"].sdfg.arrays.items() if d.transient and len(d.shape) == 2
    ]
    assert not left, left


@pytest.mark.icon4py
def test_icon4pys_split_writers_are_merged_where_the_gpu_model_inlines_the_read():
    """icon4py's `apply_divergence_damping_and_update_vn` (static, a decomposed limited-area
    rank, no compilation): `gtir_tmp_58`, an Edge x K field read through a neighbor table, is
    written by three pieces of one Map split at zone bounds (their transients named per
    piece). The GPU model inlines the read once they are one Map; the CPU model declines it
    (its gathers at the full charge), so there they stay as they are."""
    pytest.importorskip("icon4py.model.atmosphere.dycore")
    from gt4py_dace_xforms.tools import traffic

    result = traffic.substep_traffic(
        "lam-decomposed",
        n_cells=512,
        n_levels=10,
        programs=["apply_divergence_damping_and_update_vn"],
        target="gpu",
    )
    (prog,) = result.programs
    assert prog.error is None, prog.error
    (row,) = [r for r in result.rows if r.name == "gtir_tmp_58"]
    assert row.removed and "split writers merged into one Map" in row.by, row.by
