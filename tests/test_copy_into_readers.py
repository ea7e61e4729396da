"""`CopyIntoReaders` (docs/copy_into_readers.md): a copy `S[A] -> D[B]` is written by the
Maps that read `S` at the copied points. Hand-built SDFGs in the shape of gt4py's static
build of icon4py's first predictor substep (`exner_dynamical_increment = current_exner`
beside two Maps over the same cells, one for level 0 with the level written as a number,
one for levels 1..K-1), then that build itself (structure only)."""

import dace
import numpy as np
import pytest
from builders import deep, run

import gt4py_dace_xforms as gx  # noqa: F401  # registers the library's transformations
from gt4py_dace_xforms.analysis.copy_readers import copy_into_readers_plan
from gt4py_dace_xforms.analysis.producer import Decline
from gt4py_dace_xforms.policy import CostModel, InlineOnly
from gt4py_dace_xforms.report import InlineReport
from gt4py_dace_xforms.transformations.copy_into_readers import (
    CopyIntoReaders,
    gt_copy_into_readers,
)


N, K, START, SHIFT = 9, 5, 2, 1


def _reader(
    state, s_node, x_node, name: str, k_range: str, k_index: str, expr: str, extra: str = ""
):
    """A top-level Map over cells START..N-1 and `k_range` computing `x[i, k] = expr(s)` from
    `s[i, k_index]` (`extra`: one more parameter `j = 0:extra`)."""
    ranges = {"i": f"{START}:{N}", "k": k_range}
    if extra:
        ranges["j"] = f"0:{extra}"
    state.add_mapped_tasklet(
        name,
        ranges,
        {"__s": dace.Memlet(f"s[i, {k_index}]")},
        f"__x = {expr}",
        {"__x": dace.Memlet(f"x[i, {k_index}]")},
        external_edges=True,
        input_nodes={"s": s_node},
        output_nodes={"x": x_node},
    )


def build(
    *, level0: bool = True, extra: str = "", s_written: bool = False, d_read: bool = False
) -> dace.SDFG:
    """`x = 2 s` at level 0, `x = s + 1` above; `d[START+SHIFT : N+SHIFT, :] = s[START:N, :]`."""
    sdfg = dace.SDFG("copy_into_readers")
    sdfg.add_array("s", (N, K), dace.float64)
    sdfg.add_array("x", (N, K), dace.float64)
    sdfg.add_array("d", (N + SHIFT, K), dace.float64)
    sdfg.add_array("y", (N + SHIFT, K), dace.float64)
    st = sdfg.add_state("main")
    s, x, d = st.add_access("s"), st.add_access("x"), st.add_access("d")
    if level0:
        _reader(st, s, x, "level0", "0:1", "0", "2.0 * __s")
    _reader(st, s, x, "above", f"1:{K}", "k", "__s + 1.0", extra=extra)
    st.add_edge(
        s,
        None,
        d,
        None,
        dace.Memlet(
            data="s",
            subset=f"{START}:{N}, 0:{K}",
            other_subset=f"{START + SHIFT}:{N + SHIFT}, 0:{K}",
        ),
    )
    if s_written:  # a second node of `s` that a tasklet writes
        t = st.add_tasklet("poke", {}, {"__o"}, "__o = 7.0")
        st.add_edge(t, "__o", st.add_access("s"), None, dace.Memlet("s[0, 0]"))
    if d_read:  # `d` read again in the state, after the copy
        st.add_mapped_tasklet(
            "again",
            {"i": f"0:{N + SHIFT}", "k": f"0:{K}"},
            {"__d": dace.Memlet("d[i, k]")},
            "__y = __d",
            {"__y": dace.Memlet("y[i, k]")},
            external_edges=True,
            input_nodes={"d": d},
        )
    sdfg.validate()
    return sdfg


def _inputs():
    rng = np.random.default_rng(7)
    return {
        "s": rng.random((N, K)),
        "x": np.zeros((N, K)),
        "d": rng.random((N + SHIFT, K)),
        "y": np.zeros((N + SHIFT, K)),
    }


def _copies(sdfg: dace.SDFG) -> list:
    return [
        e
        for st in sdfg.states()
        for e in st.edges()
        if isinstance(e.src, dace.nodes.AccessNode) and isinstance(e.dst, dace.nodes.AccessNode)
    ]


@pytest.fixture(scope="module")
def before_and_after():
    before = build()
    after = deep(before)
    report = InlineReport()
    assert report.extend(gt_copy_into_readers(after, policy=CostModel())).copied_into_readers == [
        "d"
    ]
    return before, after, report


def test_the_readers_write_the_copy_and_the_results_equal_numpy_and_the_untransformed_sdfg(
    before_and_after,
):
    before, after, report = before_and_after
    assert _copies(before) and not _copies(after)
    (rec,) = report.records
    assert rec.mode == "copy_into_readers" and rec.consumer == "level0_map, above_map"
    assert rec.figures["copy_into_readers_saved_bytes"] == 8 * (N - START) * K
    writers = sorted(
        e.src.map.label
        for st in after.states()
        for n in st.data_nodes()
        if n.data == "d"
        for e in st.in_edges(n)
    )
    assert writers == ["above_map", "level0_map"]
    after.validate()
    inputs = _inputs()
    got, ref = run(after, "after", inputs, {}), run(before, "before", inputs, {})
    want_d = inputs["d"].copy()
    want_d[START + SHIFT : N + SHIFT] = inputs["s"][START:N]
    for name in ("d", "x"):
        np.testing.assert_array_equal(got[name], ref[name])
    np.testing.assert_array_equal(got["d"], want_d)
    np.testing.assert_array_equal(got["x"][START:, 0], 2.0 * inputs["s"][START:, 0])
    np.testing.assert_array_equal(got["x"][START:, 1:], inputs["s"][START:, 1:] + 1.0)


def test_apply_transformations_takes_the_same_route():
    sdfg = build()
    assert sdfg.apply_transformations(CopyIntoReaders) == 1
    assert not _copies(sdfg)
    sdfg.validate()
    assert CopyIntoReaders.from_json(CopyIntoReaders().to_json()) is not None


@pytest.mark.parametrize(
    "kwargs, reason",
    [
        ({"level0": False}, "cannot be proven to cover|leave"),
        ({"extra": "3"}, "cannot be proven to cover|leave"),
        ({"s_written": True}, "'s' is written in the state"),
        ({"d_read": True}, "'d' is also read or written by its node"),
    ],
    ids=[
        "level-0-reader-missing",
        "reader-with-another-parameter",
        "source-written",
        "target-read",
    ],
)
def test_declines_name_the_reason_and_leave_the_sdfg_unchanged(kwargs, reason):
    """A copy the readers do not tile, one whose source is also written in the state (the
    readers might see other values than the copy did), one whose target is read after it;
    a reader whose third parameter would write each point three times is no reader."""
    sdfg = build(**kwargs)
    (edge,) = [e for e in _copies(sdfg) if e.dst.data == "d"]
    plan = copy_into_readers_plan(sdfg, sdfg.states()[0], edge.src, edge.dst)
    assert isinstance(plan, Decline)
    assert __import__("re").search(reason, plan.reason), plan.reason
    h = sdfg.hash_sdfg()
    assert gt_copy_into_readers(sdfg, policy=CostModel()).copied_into_readers == []
    assert sdfg.apply_transformations(CopyIntoReaders) == 0
    assert sdfg.hash_sdfg() == h


def test_a_pinned_decision_set_declines_and_changes_nothing():
    sdfg = build()
    h = sdfg.hash_sdfg()
    assert gt_copy_into_readers(sdfg, policy=InlineOnly(("gtir_tmp_1",))).copied_into_readers == []
    assert sdfg.hash_sdfg() == h


@pytest.mark.icon4py
def test_the_first_predictor_substeps_copy_goes_into_its_readers():
    """Stock's static build of the predictor for the first substep (lam-decomposed), at
    TopLevelDataFlowPost: `current_exner -> exner_dynamical_increment` is a plain copy
    beside the Maps of level 0 and levels 1..79 that read `current_exner` at the same points;
    both write `exner_dynamical_increment` afterwards, and the copy edge is gone. (Counted
    and compared with stock by the substep bench: docs/copy_into_readers.md.)"""
    pytest.importorskip(
        "icon4py.model.atmosphere.dycore.stencils.vertically_implicit_dycore_solver"
    )
    from gt4py.next.program_processors.runners.dace.transformations.auto_optimize import (
        GT4PyAutoOptHook,
    )

    from gt4py_dace_xforms.integration.capture import capture_stages
    from gt4py_dace_xforms.tools import explain, programs
    from gt4py_dace_xforms.tools.static_values import program_static_values, static_offset_provider

    post = (GT4PyAutoOptHook.TopLevelDataFlowPost, 1)
    program = programs.load_program(
        "icon4py.model.atmosphere.dycore.stencils.vertically_implicit_dycore_solver:"
        "vertically_implicit_solver_at_predictor_step"
    )
    provider = explain.offset_provider(
        program, static_offset_provider(program, layout="lam-decomposed")
    )
    static = {**program_static_values(program, layout="lam-decomposed"), "at_first_substep": True}
    sdfg = capture_stages(program, [post], offset_provider=provider, static_args=static)[post]
    copies = [e for e in _copies(sdfg) if e.dst.data == "exner_dynamical_increment"]
    assert len(copies) == 1 and copies[0].src.data == "current_exner"
    report = InlineReport()
    assert report.extend(
        gt_copy_into_readers(sdfg, policy=CostModel(target="gpu"))
    ).copied_into_readers == ["exner_dynamical_increment"]
    assert not [e for e in _copies(sdfg) if e.dst.data == "exner_dynamical_increment"]
    (rec,) = report.records
    assert len(rec.consumer.split(", ")) == 2, rec.consumer
    sdfg.validate()
