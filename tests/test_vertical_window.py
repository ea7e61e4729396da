"""Vertical windows (issue 30): an intermediate read at k, k+1, ... by one consumer is
evaluated once per level in a K sweep of the consumer, the levels read kept in registers.
Hand-built shapes (applied and compiled against the original; declines leave the SDFG
unchanged) and gt4py programs through a backend that applies `VerticalWindow` at the
library's stage, compared with stock and numpy."""

import copy
import dataclasses
import functools

import dace
import gt4py.next as gtx
import numpy as np
import pytest
from builders import compare_before_after, producer_consumer, transient_arrays
from dace.sdfg.state import LoopRegion
from gt4py.next.program_processors.runners.dace.transformations.auto_optimize import (
    GT4PyAutoOptHook,
)

import gt4py_dace_xforms as gx
from gt4py_dace_xforms.analysis.candidate import analyse_candidate
from gt4py_dace_xforms.analysis.producer import Decline
from gt4py_dace_xforms.analysis.window import WindowPlan, analyse_window
from gt4py_dace_xforms.cli import demo
from gt4py_dace_xforms.integration import compat
from gt4py_dace_xforms.integration.backends import annotating_translator, optimize_args
from gt4py_dace_xforms.report import ReportFolder
from gt4py_dace_xforms.tools.compare import stock_build
from gt4py_dace_xforms.transformations.inline_fusion_pass import find_candidates


RNG = np.random.default_rng(30)
SYMS = dict(N=5, K=9)


def _shape(name, reads, consumer_k="0:K-2", consumer_i="0:N", **kw):
    return producer_consumer(
        name,
        producer_ranges={"i": "0:N", "k": "0:K"},
        consumer_ranges={"i": consumer_i, "k": consumer_k},
        write="i, k",
        reads=reads,
        **kw,
    )


def _plans(sdfg, max_width=8):
    found = []
    for st, node, entry in find_candidates(sdfg):
        cand = analyse_candidate(sdfg, st, node, entry)
        found.append(cand if isinstance(cand, Decline) else analyse_window(sdfg, cand, max_width))
    return found


def _loops(sdfg):
    return [
        r
        for sd in sdfg.all_sdfgs_recursive()
        for r in sd.all_control_flow_regions()
        if isinstance(r, LoopRegion)
    ]


@pytest.mark.parametrize(
    "reads",
    [
        ["i, k", "i, k + 1"],
        ["i, k", "i, k + 1", "i, k + 2"],
        ["i, k + 2", "i, k", "i, k + 1", "i, k"],
    ],
    ids=["two_levels", "three_levels", "three_levels_unordered_repeated"],
)
def test_window_plan_has_one_slot_per_level(reads):
    [plan] = _plans(_shape("plan", reads))
    assert isinstance(plan, WindowPlan), plan
    assert plan.kparam == "k" and plan.kdim == 1 and plan.width == len(set(reads))
    assert plan.offsets == tuple(range(plan.width)) and plan.top.shift[1] == str(plan.width - 1)


@pytest.mark.compile
@pytest.mark.parametrize(
    "reads",
    [["i, k", "i, k + 1"], ["i, k + 1", "i, k + 2", "i, k"]],
    ids=["two_levels", "three_levels"],
)
def test_window_removes_the_intermediate_and_computes_the_same(reads):
    before = _shape("window_" + str(len(reads)), reads)
    after = copy.deepcopy(before)
    assert after.apply_transformations(gx.VerticalWindow) == 1
    after.validate()
    assert transient_arrays(after, 2) == []
    [loop_fill, loop_sweep] = sorted(_loops(after), key=lambda r: r.label)
    assert {loop_fill.label, loop_sweep.label} == {"fill_window", "sweep"}
    arrays = {"a": RNG.random((5, 9)), "out": RNG.random((5, 9))}
    compare_before_after(before, after, arrays, SYMS)


@pytest.mark.compile
def test_window_sweeps_whichever_dimension_the_reads_differ_in():
    """Reads at i and i + 1 (a Cartesian horizontal shift): swept in i, parallel in k."""
    before = producer_consumer(
        "window_in_i",
        producer_ranges={"i": "0:N", "k": "0:K"},
        consumer_ranges={"i": "0:N-1", "k": "0:K"},
        write="i, k",
        reads=["i, k", "i + 1, k"],
    )
    [plan] = _plans(before)
    assert isinstance(plan, WindowPlan) and (plan.kparam, plan.kdim) == ("i", 0)
    after = copy.deepcopy(before)
    assert after.apply_transformations(gx.VerticalWindow) == 1
    compare_before_after(before, after, {"a": RNG.random((5, 9)), "out": RNG.random((5, 9))}, SYMS)


@pytest.mark.compile
def test_window_of_a_shifted_start_and_a_negative_offset():
    """Reads at k - 1 and k on k in [1, K): the fill starts below the consumer's range."""
    before = _shape("window_negative", ["i, k - 1", "i, k"], consumer_k="1:K")
    after = copy.deepcopy(before)
    assert after.apply_transformations(gx.VerticalWindow) == 1
    compare_before_after(before, after, {"a": RNG.random((5, 9)), "out": RNG.random((5, 9))}, SYMS)


@pytest.mark.compile
def test_window_consumer_reading_the_producers_input_too():
    """The consumer reads `a`, which the producer reads as well: one feed of `a` into the
    sweep, no connector of the consumer left dangling."""
    sdfg = dace.SDFG("window_shared_input")
    for name in ("a", "out"):
        sdfg.add_array(name, ["N", "K"], dace.float64)
    sdfg.add_array("tmp", ["N", "K"], dace.float64, transient=True)
    st = sdfg.add_state("main")
    a, tmp = st.add_access("a"), st.add_access("tmp")
    st.add_mapped_tasklet(
        "producer",
        {"i": "0:N", "k": "0:K"},
        {"__a": dace.Memlet("a[i, k]")},
        "__o = 2.0 * __a + 1.0",
        {"__o": dace.Memlet("tmp[i, k]")},
        external_edges=True,
        input_nodes={"a": a},
        output_nodes={"tmp": tmp},
    )
    st.add_mapped_tasklet(
        "consumer",
        {"i": "0:N", "k": "0:K-1"},
        {
            "__t0": dace.Memlet("tmp[i, k]"),
            "__t1": dace.Memlet("tmp[i, k + 1]"),
            "__a": dace.Memlet("a[i, k]"),
        },
        "__o = __t1 - __t0 + __a",
        {"__o": dace.Memlet("out[i, k]")},
        external_edges=True,
        input_nodes={"tmp": tmp, "a": a},
    )
    sdfg.validate()
    after = copy.deepcopy(sdfg)
    assert after.apply_transformations(gx.VerticalWindow) == 1
    after.validate()
    entry = next(n for n in after.states()[0].nodes() if isinstance(n, dace.nodes.MapEntry))
    st2 = after.states()[0]
    assert all(
        any(True for _ in st2.out_edges_by_connector(entry, c)) for c in entry.out_connectors
    )
    compare_before_after(sdfg, after, {"a": RNG.random((5, 9)), "out": RNG.random((5, 9))}, SYMS)


DECLINES = {
    "one_offset": (dict(reads=["i, k + 1"]), "one element read per iteration"),
    "gap": (dict(reads=["i, k", "i, k + 2"]), "leave a gap"),
    "too_wide": (
        dict(reads=["i, k", "i, k + 1", "i, k + 2"], max_width=2),
        "exceed the window's bound",
    ),
    "two_dimensions": (
        dict(reads=["i, k", "i + 1, k + 1"], consumer_i="0:N-1"),
        "differ in dimensions [0, 1]",
    ),
}


@pytest.mark.parametrize("case", sorted(DECLINES))
def test_window_declines_and_leaves_the_sdfg_unchanged(case):
    kw, why = DECLINES[case]
    kw = dict(kw)
    max_width = kw.pop("max_width", 8)
    sdfg = _shape(case, **kw)
    before = sdfg.hash_sdfg()
    plans = _plans(sdfg, max_width)
    assert len(plans) == 1 and isinstance(plans[0], Decline) and why in plans[0].reason, plans
    xf = gx.VerticalWindow()
    xf.max_width = max_width
    assert sdfg.apply_transformations(xf) == 0
    assert sdfg.hash_sdfg() == before


def test_window_declines_a_second_reader_unchanged():
    sdfg = _shape("second_reader", ["i, k", "i, k + 1"])
    sdfg.add_array("keep", ["N", "K"], dace.float64)
    st = sdfg.states()[0]
    tmp = next(n for n in st.data_nodes() if n.data == "tmp")
    st.add_mapped_tasklet(
        "other",
        {"i": "0:N", "k": "0:K"},
        {"__t": dace.Memlet("tmp[i, k]")},
        "__o = __t",
        {"__o": dace.Memlet("keep[i, k]")},
        external_edges=True,
        input_nodes={"tmp": tmp},
    )
    before = sdfg.hash_sdfg()
    assert any(isinstance(p, Decline) and "other readers keep" in p.reason for p in _plans(sdfg))
    assert sdfg.apply_transformations(gx.VerticalWindow) == 0 and sdfg.hash_sdfg() == before


def _split_consumers(name, second_reads=("i, k", "i, k + 1")):
    """`tmp` read at k and k + 1 by two Maps, one over the rows 0:3 and one over 3:5 (gt4py's
    consumer split at a decomposed rank's halo; literal rows, as in the static build)."""
    sdfg = dace.SDFG(name)
    for arr in ("a", "out"):
        sdfg.add_array(arr, [5, "K"], dace.float64)
    sdfg.add_array("tmp", [5, "K"], dace.float64, transient=True)
    st = sdfg.add_state("main")
    tmp = st.add_access("tmp")
    st.add_mapped_tasklet(
        "producer",
        {"i": "0:5", "k": "0:K"},
        {"__a": dace.Memlet("a[i, k]")},
        "__o = 2.0 * __a + 1.0",
        {"__o": dace.Memlet("tmp[i, k]")},
        external_edges=True,
        output_nodes={"tmp": tmp},
    )
    out = st.add_access("out")
    for label, rows, reads in (
        ("local", "0:3", ("i, k", "i, k + 1")),
        ("halo", "3:5", second_reads),
    ):
        conns = {f"__t{n}": dace.Memlet(f"tmp[{r}]") for n, r in enumerate(reads)}
        code = "__o = " + " - ".join(f"__t{n}" for n in reversed(range(len(reads))))
        st.add_mapped_tasklet(
            label,
            {"i": rows, "k": "0:K-1"},
            conns,
            code,
            {"__o": dace.Memlet("out[i, k]")},
            external_edges=True,
            input_nodes={"tmp": tmp},
            output_nodes={"out": out},
        )
    sdfg.validate()
    return sdfg


@pytest.mark.compile
def test_window_group_sweeps_every_reader_and_removes_the_intermediate():
    before = _split_consumers("window_group")
    after = copy.deepcopy(before)
    assert gx.gt_apply_vertical_windows(after).windowed == ["tmp"]
    after.validate()
    assert (
        transient_arrays(after, 2) == []
        and len([r for r in _loops(after) if r.label == "sweep"]) == 2
    )
    arrays = {"a": RNG.random((5, 9)), "out": RNG.random((5, 9))}
    compare_before_after(before, after, arrays, dict(K=9))


def test_window_group_is_priced_as_one_decision_by_the_cost_model():
    sdfg = _split_consumers("window_group_priced")
    report = gx.gt_inline_intermediates(sdfg, policy=gx.CostModel("cpu", windows=True))
    windows = [r for r in report.applied if r.mode == "window"]
    assert [r.consumer for r in windows] == ["local_map", "halo_map"], report.table()
    assert windows[-1].removed_intermediate and windows[0].figures["window_group_size"] == 2
    assert "tmp" not in sdfg.arrays


def test_window_group_with_a_reader_that_cannot_sweep_leaves_the_sdfg_unchanged():
    sdfg = _split_consumers("window_group_declined", second_reads=("i, k",))
    before = sdfg.hash_sdfg()
    assert gx.gt_apply_vertical_windows(sdfg).windowed == [] and sdfg.hash_sdfg() == before


def test_vertical_window_shared_sweeps_one_reader_of_several():
    sdfg = _split_consumers("window_shared")
    assert sdfg.apply_transformations(gx.VerticalWindow) == 0
    xf = gx.VerticalWindow()
    xf.shared = True
    assert sdfg.apply_transformations(xf) == 1 and "tmp" in sdfg.arrays
    sdfg.validate()


def test_vertical_window_properties_round_trip_through_json():
    xf = gx.VerticalWindow()
    xf.max_width, xf.shared = 3, True
    again = dace.transformation.PatternTransformation.from_json(xf.to_json())
    assert isinstance(again, gx.VerticalWindow) and again.max_width == 3 and again.shared


# ---- gt4py programs --------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _WindowHook:
    """`gt_apply_vertical_windows` as a hook that pickles (gt4py builds in worker processes); the
    windowed names go to `found`."""

    found: ReportFolder

    def __call__(self, sdfg) -> None:
        self.found.append(gx.gt_apply_vertical_windows(sdfg).windowed)


def _window_backend(found: ReportFolder):
    """gt4py's dace backend with `gt_apply_vertical_windows` at the library's stage."""
    hook = _WindowHook(found)
    return compat.make_dace_toolchain(
        compat.DaCeConfig(gpu=False, auto_optimize=True),
        name_postfix=f"_window_test{id(found)}",
        translation=functools.partial(
            annotating_translator,
            auto_optimize_args=optimize_args({GT4PyAutoOptHook.TopLevelDataFlowStep: hook}),
        ),
    )


@pytest.mark.compile
@pytest.mark.parametrize("case", [1, 2], ids=["concat_where_computed", "three_level_sum"])
def test_gt4py_programs_windowed_match_stock_and_numpy(case, tmp_path):
    _, program, reference, short = demo.CASES[case]
    nlev = 12
    x, y = RNG.random((64, nlev)), RNG.random((64, nlev))
    names = ("interior", "surface") if case == 1 else ("a", "b")
    want = reference(x, y, nlev)
    found = ReportFolder(str(tmp_path / "windowed"))
    results = {}
    for label, backend in (("stock", stock_build().backend), ("window", _window_backend(found))):
        out = gtx.as_field([demo.Cell, demo.K], np.full((64, nlev), -7.0))
        args = {
            names[0]: gtx.as_field([demo.Cell, demo.K], x),
            names[1]: gtx.as_field([demo.Cell, demo.K], y),
        }
        program.with_backend(backend)(**args, out=out, nlev=np.int32(nlev), offset_provider={})
        results[label] = out.asnumpy()
    assert sum(len(r) for r in found.read()) == 1, found.read()
    np.testing.assert_allclose(results["window"][:, : nlev - short], want, rtol=1e-14)
    np.testing.assert_array_equal(results["window"], results["stock"])
