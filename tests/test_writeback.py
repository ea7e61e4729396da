"""Write-back copies (analysis/writeback.py, transformations/writeback.py): a temporary that
gt4py copies into a program output and also reads shifted. Written as a Map, the copy is
a reader like any other; when every reader is inlined the temporary goes away. Lowered
from gt4py, compiled, compared with stock and numpy."""

import copy
import dataclasses

import dace
import gt4py.next as gtx
import numpy as np
import pytest
from gt4py.next import Dims
from gt4py.next.program_processors.runners.dace.transformations.auto_optimize import (
    GT4PyAutoOptHook,
)

import gt4py_dace_xforms as gx
from gt4py_dace_xforms.analysis.writeback import writeback_copies
from gt4py_dace_xforms.integration.capture import capture_stages
from gt4py_dace_xforms.tools.compare import inline_build, stock_build, two_d_transients
from gt4py_dace_xforms.transformations.inline_fusion_pass import convert_writeback_copies


Cell = gtx.Dimension("Cell")
K = gtx.Dimension("K", kind=gtx.DimensionKind.VERTICAL)
F64 = gtx.Field[Dims[Cell, K], gtx.float64]
NC, NL = 16, 12
RNG = np.random.default_rng(5)


@gtx.field_operator
def theta_and_difference(a: F64, b: F64) -> tuple[F64, F64]:
    t = a * 2.0 + b
    return t, t(K + 1) - t


@gtx.program
def writeback_program(a: F64, b: F64, t_out: F64, d_out: F64):
    # `t` is computed on levels 0..11 for the shifted read; `t_out` receives 0..10.
    theta_and_difference(a, b, out=(t_out, d_out), domain={Cell: (0, 16), K: (0, 11)})


@pytest.fixture(scope="module")
def step():
    s = (GT4PyAutoOptHook.TopLevelDataFlowStep, 1)
    return capture_stages(writeback_program, [s], offset_provider={})[s]


def test_gt4py_leaves_a_write_back_copy_the_library_finds(step):
    (name,) = two_d_transients(step)
    (found,) = writeback_copies(step, name)
    assert found.target.data == "t_out" and found.source.data == name


@pytest.mark.parametrize("policy", [gx.CostModel("cpu", writeback_copies=True, writeback_retarget=False),
                                    gx.InlineWhereSound(writeback_retarget=False)],
                         ids=["model", "sound"])  # fmt: skip
def test_every_reader_inlined_removes_the_temporary(step, policy):
    sdfg = copy.deepcopy(step)
    report = gx.gt_inline_intermediates(sdfg, policy=policy)
    assert {r.consumer for r in report.applied} == {
        "map_3_fieldop",
        f"writeback_{two_d_transients(step)[0]}_t_out_map",
    }
    assert two_d_transients(sdfg) == [] and report.writebacks_retargeted == []


@pytest.mark.parametrize("policy", [gx.CostModel("cpu", writeback_max_offsets=2),
                                    gx.CostModel("gpu", writeback_max_offsets=2), gx.InlineWhereSound()],
                         ids=["cpu", "gpu", "sound"])  # fmt: skip
def test_where_the_writers_can_write_the_output_the_copy_is_not_a_map(step, policy):
    """With retargeting (the default), the reader is inlined and the producer writes
    `t_out` itself (docs/writeback.md): no Map recomputes the producer for the copy.
    (The reader reads `t` at two levels: the cost model's default takes one,
    `writeback_max_offsets`, see test_the_default_model_leaves_a_two_offset_group.)"""
    sdfg = copy.deepcopy(step)
    (name,) = two_d_transients(step)
    converting = (
        dataclasses.replace(policy, writeback_copies=True)
        if isinstance(policy, gx.CostModel)
        else policy
    )
    assert convert_writeback_copies(sdfg, converting) == []
    report = gx.gt_inline_intermediates(sdfg, policy=policy)
    assert {r.consumer for r in report.applied} == {"map_3_fieldop"}
    assert report.writebacks_retargeted == [name] and two_d_transients(sdfg) == []


def test_the_default_model_leaves_a_two_offset_group(step):
    """`t(K + 1) - t`: two recomputations of points the producer writes anyway (for
    `t_out`); the default CPU model declines them (docs/cost_model.md) and changes nothing."""
    sdfg = copy.deepcopy(step)
    before = sdfg.hash_sdfg()
    report = gx.gt_inline_intermediates(sdfg, policy=gx.CostModel("cpu"))
    assert not report.applied and "read at 2 offsets" in report.declined[0].reason
    assert sdfg.hash_sdfg() == before


def test_declined_group_leaves_the_sdfg_unchanged(step):
    """Recomputation priced out: the trial on a copy is dropped, the copy stays a copy."""
    sdfg = copy.deepcopy(step)
    before = sdfg.hash_sdfg()
    model = gx.CostModel("cpu", bytes_per_op=1e6, writeback_copies=True, writeback_retarget=False)
    assert convert_writeback_copies(sdfg, model) == []
    assert sdfg.hash_sdfg() == before


@pytest.mark.parametrize("pick", [0, -1], ids=["top-first", "bottom-first"])
def test_viewer_click_through_converts_the_copy_and_reaches_the_pass(step, pick):
    """The viewer's route (tests/test_viewer.py): `WriteBackToMap` and `WriteBackRetarget`
    are listed next to `InlineFuser`; clicked in either order, the SDFG ends where
    `gt_inline_intermediates` ends: the reader inlined, the buffer retargeted (WriteBackToMap
    defers to it)."""
    from test_viewer import click_through

    sdfg = copy.deepcopy(step)
    clicked = click_through(sdfg, pick)
    name = two_d_transients(step)[0]
    assert clicked == [name, f"retarget:{name}"], clicked
    assert two_d_transients(sdfg) == []


def test_write_back_to_map_declines_unchanged_when_a_tasklet_reads_the_temporary(step):
    sdfg = copy.deepcopy(step)
    (name,) = two_d_transients(sdfg)
    (wb,) = writeback_copies(sdfg, name)
    peek = wb.state.add_tasklet("peek", {"__t"}, {"__o"}, "__o = __t")
    wb.state.add_edge(wb.source, None, peek, "__t", dace.Memlet(f"{name}[0, 0]"))
    # Into an array of its own: a second write of `d_out` here would be a race (docs/races.md).
    sdfg.add_array("peeked", [1], dace.float64)
    wb.state.add_edge(peek, "__o", wb.state.add_access("peeked"), None, dace.Memlet("peeked[0]"))
    before = sdfg.hash_sdfg()
    xf = gx.WriteBackToMap()
    xf.setup_match(sdfg, sdfg.cfg_id, sdfg.node_id(wb.state),
                   {gx.WriteBackToMap.source: wb.state.node_id(wb.source),
                    gx.WriteBackToMap.target: wb.state.node_id(wb.target)}, 0)  # fmt: skip
    assert not xf.can_be_applied(wb.state, 0, sdfg)
    assert "readers other than Maps" in xf.why_not(wb.state, sdfg)
    assert sdfg.hash_sdfg() == before


@pytest.mark.compile
def test_write_back_program_matches_stock_and_numpy():
    a, b = (gtx.as_field([Cell, K], RNG.random((NC, NL))) for _ in range(2))
    builds = {"stock": stock_build(), "model": inline_build(policy=gx.CostModel("cpu", writeback_max_offsets=2)),
              "map": inline_build(policy=gx.CostModel("cpu", writeback_copies=True, writeback_retarget=False)),
              "sound": inline_build(policy=gx.InlineWhereSound())}  # fmt: skip
    t = 2.0 * a.asnumpy() + b.asnumpy()
    for label, build in builds.items():
        args = dict(a=a, b=b, t_out=gtx.zeros({Cell: NC, K: NL}, dtype=gtx.float64),
                    d_out=gtx.zeros({Cell: NC, K: NL}, dtype=gtx.float64))  # fmt: skip
        writeback_program.with_backend(build.backend)(**args, offset_provider={})
        np.testing.assert_allclose(
            args["t_out"].asnumpy()[:, : NL - 1], t[:, : NL - 1], rtol=1e-14, err_msg=label
        )
        np.testing.assert_allclose(args["d_out"].asnumpy()[:, : NL - 1], t[:, 1:] - t[:, :-1], rtol=1e-13,
                                   err_msg=label)  # fmt: skip
        assert np.all(args["t_out"].asnumpy()[:, NL - 1] == 0.0), (
            label
        )  # the extra level does not leak
    assert len(two_d_transients(builds["stock"].sdfg)) == 1
    assert all(two_d_transients(builds[k].sdfg) == [] for k in ("model", "map", "sound"))
