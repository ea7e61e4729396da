"""Concat mode on hand-built SDFGs: lazy selection, copies, three regions, states, declines."""

import copy

import dace
import numpy as np
import pytest
from builders import compare_before_after, inlined_copies, transient_arrays
from dace.sdfg import nodes as dn

import gt4py_dace_xforms as gx


SOUND = gx.InlineWhereSound()  # these tests are about soundness: inline whatever is sound


RNG = np.random.default_rng(11)
SYMS = dict(N=5, K=8)


def _concat_sdfg(
    name,
    *,
    regions,
    reads=("i, k", "i, k + 1"),
    consumer_k="0:K-1",
    cross_state=False,
    clobber_between=False,
    copy_surface=False,
    read_in_both_states=False,
    full_input=False,
):
    """`tmp` written by one Map per region (`(k_range, input, index, code)`), read at `reads`.

    The upper branch reads `interior`, which has one level fewer than `tmp`: evaluating
    it at k = 0 would read `interior[i, -1]` (out of bounds), so only lazy selection is
    correct. With `copy_surface`, the first region is a copy from `surface` instead.
    """
    sdfg = dace.SDFG(name)
    sdfg.add_array("surface", ["N", 1], dace.float64)
    sdfg.add_array("interior", ["N", "K - 1"], dace.float64)
    sdfg.add_array("out", ["N", "K"], dace.float64)
    sdfg.add_array("tmp", ["N", "K"], dace.float64, transient=True)
    if full_input:
        sdfg.add_array("full", ["N", "K"], dace.float64)
    s1 = sdfg.add_state("produce")
    tmp = s1.add_access("tmp")
    for n, (krange, data, index, code) in enumerate(regions):
        if copy_surface and n == 0:
            s1.add_nedge(
                s1.add_access("surface"), tmp, dace.Memlet("surface[0:N, 0:1] -> [0:N, 0:1]")
            )
            continue
        s1.add_mapped_tasklet(
            f"branch{n}",
            {"i": "0:N", "k": krange},
            {"__x": dace.Memlet(f"{data}[{index}]")},
            code,
            {"__o": dace.Memlet("tmp[i, k]")},
            external_edges=True,
            output_nodes={"tmp": tmp},
        )
    if read_in_both_states:
        sdfg.add_array("early", ["N", "K"], dace.float64)
        s1.add_mapped_tasklet(
            "early_reader",
            {"i": "0:N", "k": "1:K"},
            {"__x": dace.Memlet("tmp[i, k - 1]")},
            "__o = 3.0 * __x",
            {"__o": dace.Memlet("early[i, k]")},
            external_edges=True,
            input_nodes={"tmp": tmp},
        )
    if cross_state:
        mid = sdfg.add_state_after(s1, "middle")
        if clobber_between:
            mid.add_mapped_tasklet(
                "clobber",
                {"i": "0:N"},
                {},
                "__o = 0.0",
                {"__o": dace.Memlet("surface[i, 0]")},
                external_edges=True,
            )
        s2 = sdfg.add_state_after(mid, "consume")
        src = s2.add_access("tmp")
    else:
        s2, src = s1, tmp
    conns = {f"__t{n}": dace.Memlet(f"tmp[{r}]") for n, r in enumerate(reads)}
    s2.add_mapped_tasklet(
        "consumer",
        {"i": "0:N", "k": consumer_k},
        conns,
        "__o = " + " + ".join(f"{n + 1}.0 * __t{n}" for n in range(len(reads))),
        {"__o": dace.Memlet("out[i, k]")},
        external_edges=True,
        input_nodes={"tmp": src},
    )
    sdfg.validate()
    return sdfg


TWO = [
    ("0:1", "surface", "i, 0", "__o = 2.0 * __x"),
    ("1:K", "interior", "i, k - 1", "__o = __x + 1.0"),
]
THREE = [
    ("0:1", "surface", "i, 0", "__o = 2.0 * __x"),
    ("1:3", "interior", "i, k - 1", "__o = __x - 5.0"),
    ("3:K", "interior", "i, k - 1", "__o = __x + 1.0"),
]


def _theta(arrays, three=False):
    n, k = SYMS["N"], SYMS["K"]
    t = np.empty((n, k))
    t[:, 0] = 2.0 * arrays["surface"][:, 0]
    t[:, 1:] = arrays["interior"] + 1.0
    if three:
        t[:, 1:3] = arrays["interior"][:, 0:2] - 5.0
    return t


def _arrays(sdfg):
    return {
        n: RNG.random([int(dace.symbolic.evaluate(s, SYMS)) for s in d.shape])
        for n, d in sdfg.arrays.items()
        if not d.transient
    }


def _inline(sdfg):
    after = copy.deepcopy(sdfg)
    return after, gx.gt_inline_intermediates(after, policy=SOUND)


def _conditional_blocks(sdfg):
    return [
        b
        for n in (x for st in sdfg.states() for x in st.nodes() if isinstance(x, dn.NestedSDFG))
        for b in n.sdfg.all_control_flow_blocks()
        if isinstance(b, dace.sdfg.state.ConditionalBlock)
    ]


@pytest.mark.compile
def test_concat_read_in_the_same_and_in_a_later_state():
    sdfg = _concat_sdfg(
        "concat_both_states", regions=TWO, cross_state=True, read_in_both_states=True
    )
    after, report = _inline(sdfg)
    assert len(report.applied) == 2 and report.applied[-1].removed_intermediate, report.table()
    assert transient_arrays(after) == [] and inlined_copies(after) == 3
    arrays = _arrays(sdfg)
    arrays["early"] = np.zeros_like(arrays["out"])
    got = compare_before_after(sdfg, after, arrays, SYMS, outputs=("out", "early"))
    t = _theta(arrays)
    np.testing.assert_allclose(got["early"][:, 1:], 3.0 * t[:, :-1], rtol=1e-14)
    np.testing.assert_allclose(got["out"][:, :-1], t[:, :-1] + 2.0 * t[:, 1:], rtol=1e-14)


@pytest.mark.compile
@pytest.mark.parametrize("variant", ["two_maps", "three_maps", "copy_branch", "cross_state"])
def test_concat_read_at_k_and_k1_lazy_equals_untransformed_and_numpy(variant):
    three = variant == "three_maps"
    sdfg = _concat_sdfg(
        f"concat_{variant}",
        regions=THREE if three else TWO,
        copy_surface=variant == "copy_branch",
        cross_state=variant == "cross_state",
    )
    after, report = _inline(sdfg)
    assert [r.intermediate for r in report.applied] == ["tmp"], report.table()
    assert transient_arrays(after) == [] and inlined_copies(after) == 2
    assert len(_conditional_blocks(after)) == 2  # one lazy selection per distinct offset
    arrays = _arrays(sdfg)
    got = compare_before_after(sdfg, after, arrays, SYMS)
    t = _theta(arrays, three)
    if variant == "copy_branch":
        t[:, 0] = arrays["surface"][:, 0]
    np.testing.assert_allclose(got["out"][:, :-1], t[:, :-1] + 2.0 * t[:, 1:], rtol=1e-14)


def test_decline_overlapping_regions():
    sdfg = _concat_sdfg("overlap", regions=[("0:2", "surface", "i, 0", "__o = __x"), TWO[1]])
    h = sdfg.hash_sdfg()
    report = gx.gt_inline_intermediates(sdfg, policy=SOUND)
    assert not report.applied and "disjoint" in report.declined[0].reason
    assert sdfg.hash_sdfg() == h


def test_decline_input_written_between_states():
    sdfg = _concat_sdfg("clobbered", regions=TWO, cross_state=True, clobber_between=True)
    h = sdfg.hash_sdfg()
    report = gx.gt_inline_intermediates(sdfg, policy=SOUND)
    assert not report.applied
    assert "'surface' is written in state 'middle'" in report.declined[0].reason, report.table()
    assert sdfg.hash_sdfg() == h


def test_decline_union_does_not_cover_read():
    """Level 1 is written by no branch, and the consumer reads it."""
    sdfg = _concat_sdfg("gap", regions=[TWO[0], ("2:K", "interior", "i, k - 1", "__o = __x + 1.0")])
    h = sdfg.hash_sdfg()
    report = gx.gt_inline_intermediates(sdfg, policy=SOUND)
    assert not report.applied and "cover" in report.declined[0].reason, report.table()
    assert sdfg.hash_sdfg() == h


# ---- a writer no read reaches (compute_advection_in_corrector_vertical_momentum) -------

DN, DK = 16, 8


def _unread_branch_sdfg(name="unread_branch"):
    """Two concat nodes, as gt4py left them in icon4py's corrector advection: `tmp` is
    written by Map A on levels 0:2 and by Map D on 2:K, where D reads `mid`; `mid` by A on
    0:2 and by Map B on 2:K. C reads both nodes on 0:2 only, E reads `mid` on 2:K. Stock:
    gt4py splits `mid` by its writers and fuses A into C, B into E (no array left)."""
    sdfg = dace.SDFG(name)
    for data in ("a", "b", "out1", "out2"):
        sdfg.add_array(data, [DN, DK], dace.float64)
    sdfg.add_transient("mid", [DN, DK], dace.float64)
    sdfg.add_transient("tmp", [DN, DK], dace.float64)
    st = sdfg.add_state("main")
    mid, tmp = st.add_access("mid"), st.add_access("tmp")
    lower, upper = {"i": f"0:{DN}", "k": "0:2"}, {"i": f"0:{DN}", "k": f"2:{DK}"}
    st.add_mapped_tasklet(
        "A",
        lower,
        {"__a": dace.Memlet("a[i, k]")},
        "__m = 2.0 * __a\n__t = __a + 1.0",
        {"__m": dace.Memlet("mid[i, k]"), "__t": dace.Memlet("tmp[i, k]")},
        external_edges=True,
        output_nodes={"mid": mid, "tmp": tmp},
    )
    st.add_mapped_tasklet(
        "B",
        upper,
        {"__b": dace.Memlet("b[i, k]")},
        "__m = 3.0 * __b",
        {"__m": dace.Memlet("mid[i, k]")},
        external_edges=True,
        output_nodes={"mid": mid},
    )
    st.add_mapped_tasklet(
        "D",
        upper,
        {"__m": dace.Memlet("mid[i, k]")},
        "__t = __m + 1.0",
        {"__t": dace.Memlet("tmp[i, k]")},
        external_edges=True,
        input_nodes={"mid": mid},
        output_nodes={"tmp": tmp},
    )
    st.add_mapped_tasklet(
        "C",
        lower,
        {"__t": dace.Memlet("tmp[i, k]"), "__m": dace.Memlet("mid[i, k]")},
        "__o = __t * __m",
        {"__o": dace.Memlet("out1[i, k]")},
        external_edges=True,
        input_nodes={"mid": mid, "tmp": tmp},
    )
    st.add_mapped_tasklet(
        "E",
        upper,
        {"__m": dace.Memlet("mid[i, k]")},
        "__o = 5.0 * __m",
        {"__o": dace.Memlet("out2[i, k]")},
        external_edges=True,
        input_nodes={"mid": mid},
    )
    sdfg.validate()
    return sdfg


def _map_entry(sdfg, label):
    [entry] = [
        n
        for st in sdfg.states()
        for n in st.nodes()
        if isinstance(n, dn.MapEntry) and n.map.label.startswith(label)
    ]
    return entry


def _consumer_reads(sdfg, label):
    st = sdfg.states()[0]
    return sorted(
        (e.data.data, str(e.data.subset))
        for e in st.in_edges(_map_entry(sdfg, label))
        if e.data.data
    )


def _tmp_candidate(sdfg, consumer="C"):
    from gt4py_dace_xforms.analysis.candidate import InlineCandidate, analyse_candidate

    st = sdfg.states()[0]
    [tmp] = [n for n in st.data_nodes() if n.data == "tmp"]
    cand = analyse_candidate(sdfg, st, tmp, _map_entry(sdfg, consumer))
    assert isinstance(cand, InlineCandidate), cand
    return cand


def test_unread_writer_is_left_out_of_the_copy_only():
    """C's copy of `tmp` evaluates A alone: D's region (2:K) is disjoint from every read.
    `writers` keeps both, in the node's order: the checks and the cost model see D too."""
    cand = _tmp_candidate(_unread_branch_sdfg())
    assert [b.slice.map_entry.map.label for b in cand.concat.branches] == ["A_map"]
    assert [b.slice.map_entry.map.label for b in cand.concat.unread] == ["D_map"]
    assert [b.slice.map_entry.map.label for b in cand.concat.writers] == ["A_map", "D_map"]


def test_unread_writer_is_priced_as_before():
    """The cost model prices every writer (figures and decision as with no writer left
    out), so leaving one out of the copies changes which candidates are taken nowhere
    (icon4py's compute_perturbed_quantities_and_interpolation: priced with the branches
    read, it took gtir_tmp_15's group first, and gtir_tmp_63 then stayed)."""
    import dataclasses

    from gt4py_dace_xforms.analysis.concat import ConcatAnalysis

    sdfg = _unread_branch_sdfg("unread_branch_priced")
    cand = _tmp_candidate(sdfg)
    whole = dataclasses.replace(
        cand, concat=ConcatAnalysis(cand.concat.writers, cand.concat.split_dims)
    )
    for model in (gx.CostModel("cpu"), gx.CostModel("gpu")):
        assert model.estimate(sdfg, cand) == model.estimate(sdfg, whole)
        mine, before = model.decide(sdfg, cand), model.decide(sdfg, whole)
        assert (mine.accept, mine.reason) == (before.accept, before.reason)


def test_unread_writer_and_its_inputs_stay_out_of_the_consumer():
    """Before: a lazy selection of both writers, with all of `mid` passed to C."""
    from gt4py_dace_xforms.policy import InlineOnly

    sdfg = _unread_branch_sdfg("unread_branch_applied")
    after = copy.deepcopy(sdfg)
    report = gx.gt_inline_intermediates(after, policy=InlineOnly(intermediates=("tmp",)))
    assert [(r.intermediate, r.removed_intermediate) for r in report.applied] == [("tmp", True)], (
        report.table()
    )
    assert _consumer_reads(after, "C") == [("a", f"0:{DN}, 0:{DK}"), ("mid", f"0:{DN}, 0:2")]
    assert not _conditional_blocks(after) and inlined_copies(after) == 1
    # D wrote only `tmp`: it goes with it; `mid` stays for C's own read and E.
    assert "tmp" not in after.arrays and "mid" in after.arrays
    assert not any(
        isinstance(n, dn.MapEntry) and n.map.label.startswith("D")
        for n in after.states()[0].nodes()
    )


def test_unread_writer_leaves_gt4py_no_more_than_stock():
    """The library's inline, then gt4py's optimizer (as after the hook's first round),
    keeps no more arrays, nor bytes, than gt4py alone: both remove everything (with D's
    inputs passed, C's read of all of `mid` kept `mid_split_0`, 16 x 2 levels)."""
    from gt4py.next.program_processors.runners.dace import transformations as gtx_transformations

    from gt4py_dace_xforms.policy import InlineOnly
    from gt4py_dace_xforms.tools.traffic import sdfg_traffic

    sdfg = _unread_branch_sdfg("unread_branch_gt4py")
    stock = gtx_transformations.gt_auto_optimize(copy.deepcopy(sdfg), gpu=False, validate=True)
    after = copy.deepcopy(sdfg)
    assert gx.gt_inline_intermediates(after, policy=InlineOnly(intermediates=("tmp",))).applied
    library = gtx_transformations.gt_auto_optimize(after, gpu=False, validate=True)
    stock_bytes = {n: t.total_bytes for n, t in sdfg_traffic(stock).items()}
    library_bytes = {n: t.total_bytes for n, t in sdfg_traffic(library).items()}
    assert set(library_bytes) <= set(stock_bytes), (library_bytes, stock_bytes)
    assert sum(library_bytes.values()) <= sum(stock_bytes.values())
    assert transient_arrays(library, ndim=2) == transient_arrays(stock, ndim=2) == []


@pytest.mark.compile
def test_unread_writer_inline_equals_untransformed_and_numpy():
    from gt4py_dace_xforms.policy import InlineOnly

    sdfg = _unread_branch_sdfg("unread_branch_run")
    after = copy.deepcopy(sdfg)
    assert gx.gt_inline_intermediates(after, policy=InlineOnly(intermediates=("tmp",))).applied
    rng = np.random.default_rng(5)
    arrays = {n: rng.random((DN, DK)) for n in ("a", "b", "out1", "out2")}
    got = compare_before_after(sdfg, after, arrays, {}, outputs=("out1", "out2"))
    a, b = arrays["a"], arrays["b"]
    np.testing.assert_allclose(got["out1"][:, :2], (a[:, :2] + 1.0) * 2.0 * a[:, :2], rtol=1e-14)
    np.testing.assert_allclose(got["out2"][:, 2:], 15.0 * b[:, 2:], rtol=1e-14)


#: Three regions, the last one reading its own field `full`, which no read below level 3 reaches.
THREE_FULL = [
    TWO[0],
    ("1:3", "interior", "i, k - 1", "__o = __x - 5.0"),
    ("3:K", "full", "i, k", "__o = __x + 1.0"),
]


@pytest.mark.compile
def test_unread_last_writer_lazy_selection_of_the_others_equals_untransformed_and_numpy():
    """Reads at k and k + 1 for k < 2 reach regions 0:1 and 1:3, not 3:K: each copy selects
    between the first two (the last one read is now the `else`), and `full` is not passed."""
    sdfg = _concat_sdfg("unread_last_writer", regions=THREE_FULL, consumer_k="0:2", full_input=True)
    after, report = _inline(sdfg)
    assert [r.intermediate for r in report.applied] == ["tmp"], report.table()
    assert transient_arrays(after) == [] and inlined_copies(after) == 2
    blocks = _conditional_blocks(after)
    assert len(blocks) == 2 and all(len(b.branches) == 2 for b in blocks)
    consumer = _map_entry(after, "consumer")
    assert sorted(e.data.data for e in after.states()[0].in_edges(consumer)) == [
        "interior",
        "surface",
    ]
    arrays = _arrays(sdfg)
    got = compare_before_after(sdfg, after, arrays, SYMS)
    t = _theta(arrays, three=True)
    np.testing.assert_allclose(got["out"][:, :2], t[:, :2] + 2.0 * t[:, 1:3], rtol=1e-14)
