"""More shapes: partial inlining, chains, lower-dimensional producers, constant indices, the viewer path."""

import copy

import dace
import numpy as np
import pytest
from builders import compare_before_after, inlined_copies, producer_consumer, transient_arrays
from dace.transformation.optimizer import SDFGOptimizer

import gt4py_dace_xforms as gx


SOUND = gx.InlineWhereSound()  # these tests are about soundness: inline whatever is sound


RNG = np.random.default_rng(7)


def _three_level():
    return producer_consumer(
        "viewer_three_level",
        producer_ranges={"i": "0:N", "k": "0:K"},
        consumer_ranges={"i": "0:N", "k": "0:K-2"},
        write="i, k",
        reads=["i, k", "i, k + 1", "i, k + 2"],
    )


def partial_two_consumers():
    """`tmp` feeds a shifted reader (inlinable) and a copy to `keep` (so it must stay)."""
    sdfg = _three_level()
    sdfg.name = "partial_two_consumers"
    sdfg.add_array("keep", ["N", "K"], dace.float64)
    state = sdfg.states()[0]
    tmp = next(n for n in state.data_nodes() if n.data == "tmp")
    # A plain copy is not a Map consumer: `tmp` has to stay for it.
    state.add_nedge(tmp, state.add_access("keep"), dace.Memlet("tmp[0:N, 0:K]"))
    sdfg.validate()
    return sdfg


def chain():
    """`a -> t1 -> (pointwise) -> tmp -> reads at k, k+1`: both intermediates go."""
    sdfg = dace.SDFG("chain")
    for name in ("a", "out"):
        sdfg.add_array(name, ["N", "K"], dace.float64)
    for name in ("t1", "tmp"):
        sdfg.add_array(name, ["N", "K"], dace.float64, transient=True)
    st = sdfg.add_state()
    a, t1, tmp, out = (st.add_access(n) for n in ("a", "t1", "tmp", "out"))
    full = {"i": "0:N", "k": "0:K"}
    st.add_mapped_tasklet(
        "m1",
        full,
        {"__a": dace.Memlet("a[i, k]")},
        "__o = __a * __a",
        {"__o": dace.Memlet("t1[i, k]")},
        external_edges=True,
        input_nodes={"a": a},
        output_nodes={"t1": t1},
    )
    st.add_mapped_tasklet(
        "m2",
        full,
        {"__a": dace.Memlet("t1[i, k]")},
        "__o = __a + 3.0",
        {"__o": dace.Memlet("tmp[i, k]")},
        external_edges=True,
        input_nodes={"t1": t1},
        output_nodes={"tmp": tmp},
    )
    st.add_mapped_tasklet(
        "m3",
        {"i": "0:N", "k": "0:K-1"},
        {"__x": dace.Memlet("tmp[i, k]"), "__y": dace.Memlet("tmp[i, k + 1]")},
        "__o = __y - __x",
        {"__o": dace.Memlet("out[i, k]")},
        external_edges=True,
        input_nodes={"tmp": tmp},
        output_nodes={"out": out},
    )
    sdfg.validate()
    return sdfg


def column_producer():
    """A 1-D producer over K read by a 2-D consumer at k and k+1 (fewer dimensions)."""
    sdfg = dace.SDFG("column_producer")
    sdfg.add_array("a", ["N", "K"], dace.float64)
    sdfg.add_array("out", ["N", "K"], dace.float64)
    sdfg.add_array("z", ["K"], dace.float64)
    sdfg.add_array("tmp", ["K"], dace.float64, transient=True)
    st = sdfg.add_state()
    tmp = st.add_access("tmp")
    st.add_mapped_tasklet(
        "col",
        {"k": "0:K"},
        {"__z": dace.Memlet("z[k]")},
        "__o = __z * 0.5",
        {"__o": dace.Memlet("tmp[k]")},
        external_edges=True,
        output_nodes={"tmp": tmp},
    )
    st.add_mapped_tasklet(
        "use",
        {"i": "0:N", "k": "0:K-1"},
        {
            "__a": dace.Memlet("a[i, k]"),
            "__x": dace.Memlet("tmp[k]"),
            "__y": dace.Memlet("tmp[k + 1]"),
        },
        "__o = __a * (__y - __x)",
        {"__o": dace.Memlet("out[i, k]")},
        external_edges=True,
        input_nodes={"tmp": tmp},
    )
    sdfg.validate()
    return sdfg


def constant_index():
    """The consumer reads the surface level `tmp[i, 0]` and its own level `tmp[i, k]`."""
    return producer_consumer(
        "constant_index",
        producer_ranges={"i": "0:N", "k": "0:K"},
        consumer_ranges={"i": "0:N", "k": "0:K"},
        write="i, k",
        reads=["i, 0", "i, k"],
    )


def input_written_in_between():
    """The producer reads `a`; a Map between producer and consumer overwrites `a`."""
    sdfg = _three_level()
    sdfg.name = "input_written_in_between"
    state = sdfg.states()[0]
    cons = next(
        n
        for n in state.nodes()
        if isinstance(n, dace.nodes.MapEntry) and n.map.label == "consumer_map"
    )
    tmp = next(n for n in state.data_nodes() if n.data == "tmp")
    a2 = state.add_access("a")
    state.add_mapped_tasklet(
        "clobber",
        {"i": "0:N", "k": "0:K"},
        {"__t": dace.Memlet("tmp[i, k]")},
        "__o = 0.0",
        {"__o": dace.Memlet("a[i, k]")},
        external_edges=True,
        input_nodes={"tmp": tmp},
        output_nodes={"a": a2},
    )
    state.add_nedge(a2, cons, dace.Memlet())
    sdfg.validate()
    return sdfg


def _arrays(sdfg, syms):
    return {
        name: (RNG.random([int(dace.symbolic.evaluate(s, syms)) for s in desc.shape]))
        for name, desc in sdfg.arrays.items()
        if not desc.transient
    }


SYMS = dict(N=6, K=9)


@pytest.mark.compile
def test_partial_inline_keeps_intermediate_for_other_reader():
    before = partial_two_consumers()
    after = copy.deepcopy(before)
    report = gx.gt_inline_intermediates(after, policy=SOUND)
    applied = report.applied
    assert len(applied) == 1 and not applied[0].removed_intermediate
    assert "tmp" in after.arrays and inlined_copies(after) == 3
    compare_before_after(before, after, _arrays(before, SYMS), SYMS, outputs=("out", "keep"))


@pytest.mark.compile
def test_chain_removes_both_intermediates():
    before = chain()
    after = copy.deepcopy(before)
    report = gx.gt_inline_intermediates(after, policy=SOUND)
    assert [r.intermediate for r in report.applied] == ["t1", "tmp"]
    assert transient_arrays(after) == []
    arrays = _arrays(before, SYMS)
    got = compare_before_after(before, after, arrays, SYMS)
    t = arrays["a"] ** 2 + 3.0
    np.testing.assert_allclose(got["out"][:, :-1], t[:, 1:] - t[:, :-1], rtol=1e-14)


@pytest.mark.compile
def test_lower_dimensional_producer():
    before = column_producer()
    after = copy.deepcopy(before)
    report = gx.gt_inline_intermediates(after, policy=SOUND)
    assert report.applied and "tmp" not in after.arrays
    assert sorted(report.applied[0].shifts) == [("0",), ("1",)]
    arrays = _arrays(before, SYMS)
    got = compare_before_after(before, after, arrays, SYMS)
    z = 0.5 * arrays["z"]
    np.testing.assert_allclose(
        got["out"][:, :-1], arrays["a"][:, :-1] * (z[1:] - z[:-1])[None, :], rtol=1e-14
    )


@pytest.mark.compile
def test_constant_index_read():
    before = constant_index()
    after = copy.deepcopy(before)
    report = gx.gt_inline_intermediates(after, policy=SOUND)
    assert report.applied and "tmp" not in after.arrays and inlined_copies(after) == 2
    arrays = _arrays(before, SYMS)
    got = compare_before_after(before, after, arrays, SYMS)
    t = 2.0 * arrays["a"] + 1.0
    np.testing.assert_allclose(got["out"], t[:, :1] + 2.0 * t, rtol=1e-14)


def test_decline_input_written_between_producer_and_consumer():
    sdfg = input_written_in_between()
    h = sdfg.hash_sdfg()
    report = gx.gt_inline_intermediates(sdfg, policy=SOUND)
    assert not report.applied
    assert any("written elsewhere in the state" in r.reason for r in report.declined), (
        report.table()
    )
    assert sdfg.hash_sdfg() == h


def test_max_distinct_offsets_bounds_copies():
    sdfg = _three_level()
    h = sdfg.hash_sdfg()
    assert sdfg.apply_transformations(gx.InlineFuser, options={"max_distinct_offsets": 2}) == 0
    assert sdfg.hash_sdfg() == h
    report = gx.gt_inline_intermediates(sdfg, policy=gx.InlineWhereSound(max_distinct_offsets=2))
    assert not report.applied and "exceed" in report.declined[0].reason
    assert sdfg.hash_sdfg() == h
    # The pass with the cost model, the sound policy and the transformation say the same
    # (one check, `policy.default.too_many_copies`).
    model = gx.gt_inline_intermediates(sdfg, policy=gx.CostModel("cpu", max_distinct_offsets=2))
    [fuser] = [
        m for m in SDFGOptimizer(sdfg).get_pattern_matches() if isinstance(m, gx.InlineFuser)
    ]
    fuser.max_distinct_offsets = 2
    reasons = {
        report.declined[0].reason,
        model.declined[0].reason,
        fuser.analyse(sdfg.states()[0], sdfg).reason,
    }
    assert reasons == {"3 distinct offsets exceed the bound max_distinct_offsets=2"}, reasons


def test_viewer_path_match_serialize_rebuild_apply():
    """What the DaCe VS Code extension does when a user clicks a transformation."""
    sdfg = _three_level()
    h = sdfg.hash_sdfg()
    matches = [
        m for m in SDFGOptimizer(sdfg).get_pattern_matches() if isinstance(m, gx.InlineFuser)
    ]
    assert len(matches) == 1
    assert sdfg.hash_sdfg() == h  # matching (can_be_applied) did not mutate
    matches[0].max_distinct_offsets = 5  # a user-edited property travels with the match
    js = matches[0].to_json()
    assert js["transformation"] == "InlineFuser" and js["max_distinct_offsets"] == 5
    rebuilt = dace.serialize.from_json(js)
    assert isinstance(rebuilt, gx.InlineFuser) and rebuilt.max_distinct_offsets == 5
    rebuilt._sdfg = sdfg
    rebuilt.apply_pattern()
    sdfg.validate()
    assert "tmp" not in sdfg.arrays and inlined_copies(sdfg) == 3


def test_properties_round_trip():
    x = gx.InlineFuser()
    x.max_distinct_offsets = 3
    x.allow_partial = False
    y = dace.serialize.from_json(x.to_json())
    assert (y.max_distinct_offsets, y.allow_partial) == (3, False)


def test_can_be_applied_never_raises_on_broken_match():
    """A match whose intermediate is not in the graph declines instead of raising."""
    sdfg = _three_level()
    state = sdfg.states()[0]
    h = sdfg.hash_sdfg()
    x = gx.InlineFuser()
    x.producer_exit = next(n for n in state.nodes() if isinstance(n, dace.nodes.MapExit))
    x.intermediate = dace.nodes.AccessNode("not_in_the_graph")
    x.consumer_entry = next(n for n in state.nodes() if isinstance(n, dace.nodes.MapEntry))
    assert x.can_be_applied(state, 0, sdfg) is False
    assert sdfg.hash_sdfg() == h
