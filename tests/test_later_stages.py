"""What gt4py's later stages meet on the SDFG the library leaves (issue 60): the split guard
at gt4py's split callbacks, and a copy-chain fold that never writes a program's input.
Structure only (no compile); the programs built end to end: tests/test_run_time_bounds.py.
"""

import copy
import pickle

import dace
import gt4py.next as gtx
import numpy as np
from dace.sdfg import nodes as dn
from gt4py.next.program_processors.runners.dace.transformations.auto_optimize import (
    GT4PyAutoOptHook,
)
from test_run_time_bounds import (  # issue 60's programs
    C2E2CDim,
    Cell,
    cell_split_neighbor,
    scans_split_in_cell,
)

import gt4py_dace_xforms as gx
from gt4py_dace_xforms.analysis.later_stages import split_range_computable
from gt4py_dace_xforms.integration import hooks
from gt4py_dace_xforms.integration.capture import lower_and_capture
from gt4py_dace_xforms.transformations.copy_chain import gt_remove_copy_chains


def _map(lower: str, upper: str = "32") -> dn.Map:
    return dn.Map("m", ["i", "k"], dace.subsets.Range.from_string(f"{lower}:{upper}, 0:8"))


def test_split_of_run_time_bound_beside_full_range_is_not_computable():
    nc = dace.symbolic.pystr_to_symbolic("Max(0, nc)")
    assert str(nc) == "Max(0, nc)"
    assert not split_range_computable(_map("Max(0, nc)"), _map("0"))
    assert split_range_computable(_map("0"), _map("0"))  # the same range: no split
    assert split_range_computable(_map("4"), _map("0"))  # literal bounds: split
    assert split_range_computable(_map("nc"), _map("0"))  # undecidable in gt4py's try: no split


class _Entry:
    """What horizontal split fusion passes: a MapEntry-like object with `.map`."""

    def __init__(self, m):
        self.map = m


def test_split_guard_declines_what_gt4py_cannot_compute_and_asks_the_users_callback():
    asked = []

    def user(transformation, first, second, state, sdfg):
        asked.append((first, second))
        return False

    guard = hooks.SplitGuard()
    assert guard(None, _map("Max(0, nc)"), _map("0"), None, None) is False
    assert guard(None, _Entry(_map("Max(0, nc)")), _Entry(_map("0")), None, None) is False
    assert guard(None, _map("4"), _map("0"), None, None) is True
    chained = hooks.SplitGuard(user)
    assert chained(None, _map("Max(0, nc)"), _map("0"), None, None) is False and not asked
    assert chained(None, _map("4"), _map("0"), None, None) is False and len(asked) == 1


def test_hooks_put_the_guard_at_both_split_callbacks_and_stock_gets_the_users_back():
    def user(*args):
        return True

    made = gx.optimization_hooks(
        user_hooks={GT4PyAutoOptHook.TopLevelDataFlowVerticalSplitCallBack: user}
    )
    assert made[GT4PyAutoOptHook.TopLevelDataFlowVerticalSplitCallBack] == hooks.SplitGuard(user)
    assert made[GT4PyAutoOptHook.TopLevelDataFlowHorizontalSplitCallBack] == hooks.SplitGuard(None)
    stock = hooks.without_library(made)
    assert stock == {GT4PyAutoOptHook.TopLevelDataFlowVerticalSplitCallBack: user}
    assert pickle.loads(pickle.dumps(hooks.SplitGuard())) == hooks.SplitGuard()


def _written(sdfg: dace.SDFG) -> set[str]:
    return {n.data for st in sdfg.states() for n in st.data_nodes() if st.in_degree(n) > 0}


def test_copy_chain_fold_never_writes_the_input_a_concat_node_copies_from():
    """The concat node of `concat_where(Cell >= nc, a * 2.0, b)` is written by a copy of
    `b` on `[0 : Max(0, Min(32, nc))]` and by the other branch. gt4py's `Range.covers`
    takes that copy for all of the node (it bounds `Min` by approximation), and a fold on
    its word made the branch write `b`. The proof folds the branch's own array only."""
    conn = gtx.as_connectivity([Cell, C2E2CDim], codomain=Cell, data=np.zeros((32, 3), np.int32))
    sdfg = lower_and_capture(
        cell_split_neighbor, None, {"C2E2C": conn}, stage=GT4PyAutoOptHook.TopLevelDataFlowPre
    )
    before = copy.deepcopy(sdfg)
    hooks.fuse_states(sdfg)
    assert gt_remove_copy_chains(sdfg).copy_chains_removed == 1
    inputs = {name for name, desc in before.arrays.items() if not desc.transient} - {"out"}
    assert not (_written(sdfg) & inputs), _written(sdfg)
    assert (
        len([n for n, d in sdfg.arrays.items() if d.transient and len(d.shape) == 2])
        == len([n for n, d in before.arrays.items() if d.transient and len(d.shape) == 2]) - 1
    )


def _after_step_hook(monkeypatch, trim: bool) -> dace.SDFG:
    from gt4py_dace_xforms.integration import hooks as hk

    if not trim:
        monkeypatch.setattr(hk, "gt_trim_split_hazards", lambda sdfg, **_: gx.InlineReport())
    step = GT4PyAutoOptHook.TopLevelDataFlowStep
    made = hk.optimization_hooks(gx.InlineWhereSound())
    conn = gtx.as_connectivity([Cell, C2E2CDim], codomain=Cell, data=np.zeros((32, 3), np.int32))
    return lower_and_capture(
        scans_split_in_cell,
        None,
        {"C2E2C": conn},
        stage=step,
        auto_optimize_args={"optimization_hooks": {step: made[step]}},
    )


def test_a_map_written_in_full_and_read_at_a_run_time_bound_is_trimmed(monkeypatch):
    """Two scans split at `nc` read `x`; everything sound inlines `x` into one and narrows
    the other to its column: `x`'s Map (`0:32`) is then read at `Max(0, nc):32` alone, which
    gt4py's MapSplitter matches and cannot split (its `apply` asserts). The hook shrinks the
    Map to the part read, so the splitter finds nothing to do."""
    from gt4py_dace_xforms.analysis.later_stages import splitter_failures

    left = _after_step_hook(monkeypatch, trim=False)
    (failure,) = splitter_failures(left)
    assert str(failure[2]) == "Max(0, nc):32, 0:8", failure
    monkeypatch.undo()
    trimmed = _after_step_hook(monkeypatch, trim=True)
    assert splitter_failures(trimmed) == []
    writer = next(
        st.in_edges(n)[0].src
        for st in trimmed.states()
        for n in st.data_nodes()
        if n.data == failure[1]
    )
    assert str(writer.map.range) == "Max(0, nc):32, 0:8"


def test_trim_leaves_an_sdfg_without_the_splitter_shape_exactly_as_it_was():
    """Issue 60's smallest program as gt4py hands it over: no Map is read in part at a
    run-time bound by a single reader, so nothing is trimmed and the SDFG is unchanged."""
    from gt4py_dace_xforms.transformations.split_hazards import gt_trim_split_hazards

    conn = gtx.as_connectivity([Cell, C2E2CDim], codomain=Cell, data=np.zeros((32, 3), np.int32))
    sdfg = lower_and_capture(
        cell_split_neighbor, None, {"C2E2C": conn}, stage=GT4PyAutoOptHook.TopLevelDataFlowPre
    )
    before = sdfg.hash_sdfg()
    assert gt_trim_split_hazards(sdfg).split_hazards_trimmed == [] and sdfg.hash_sdfg() == before


def _two_maps(consumer: dict, *, through: str = "tmp", schedule=None) -> tuple:
    """`w` writes `tmp` and `o2` from `a`; `c` reads `a` and `through` (`tmp`, or `o2`:
    an order the inline does not remove) over the ranges `consumer`."""
    sdfg = dace.SDFG("beside")
    for name in ("a", "o", "o2"):
        sdfg.add_array(name, ("N", "K"), dace.float64)
    sdfg.add_array("tmp", ("N", "K"), dace.float64, transient=True)
    st = sdfg.add_state()
    a, tmp, o2 = st.add_access("a"), st.add_access("tmp"), st.add_access("o2")
    _, w, _ = st.add_mapped_tasklet(
        "w",
        {"i": "0:N", "k": "0:K"},
        {"__a": dace.Memlet("a[i, k]")},
        "__t = __a + 1.0\n__u = __a * 2.0",
        {"__t": dace.Memlet("tmp[i, k]"), "__u": dace.Memlet("o2[i, k]")},
        external_edges=True,
        input_nodes={"a": a},
        output_nodes={"tmp": tmp, "o2": o2},
    )
    ix = ", ".join(consumer)
    _, c, _ = st.add_mapped_tasklet(
        "c",
        consumer,
        {"__x": dace.Memlet(f"{through}[{ix}]"), "__a": dace.Memlet(f"a[{ix}]")},
        "__o = __x + __a",
        {"__o": dace.Memlet(f"o[{ix}]")},
        external_edges=True,
        input_nodes={"a": a, through: {"tmp": tmp, "o2": o2}[through]},
        schedule=schedule or dace.ScheduleType.Default,
    )
    sdfg.validate()
    return st, w, c


def test_fused_beside_asks_what_gt4py_horizontal_fusion_asks():
    from gt4py_dace_xforms.analysis.later_stages import fused_beside

    full = {"i": "0:N", "k": "0:K"}
    st, w, c = _two_maps(full)
    assert fused_beside(st, w, c, {"a"}, "tmp")
    assert not fused_beside(st, w, c, set(), "tmp")  # nothing shared: no split fusion
    st, w, c = _two_maps({"i": "0:N", "k": "1:K"})  # overlapping: split, then fused
    assert fused_beside(st, w, c, {"a"}, "tmp")
    st, w, c = _two_maps(full, through="o2")  # still ordered after the writer
    assert not fused_beside(st, w, c, {"a"}, "tmp")
    st, w, c = _two_maps({"i": "0:N", "j": "0:K"})  # other parameters
    assert not fused_beside(st, w, c, {"a"}, "tmp")
    st, w, c = _two_maps(full, schedule=dace.ScheduleType.Sequential)
    assert not fused_beside(st, w, c, {"a"}, "tmp")
