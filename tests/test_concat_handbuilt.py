"""Concat mode on hand-built SDFGs: lazy selection, copies, three regions, states, declines."""

import copy

import dace
import numpy as np
import pytest
from dace.sdfg import nodes as dn

import gt4py_dace_xforms as gx

SOUND = gx.InlineWhereSound()  # these tests are about soundness: inline whatever is sound
from builders import compare_before_after, inlined_copies, transient_arrays

RNG = np.random.default_rng(11)
SYMS = dict(N=5, K=8)


def _concat_sdfg(name, *, regions, reads=("i, k", "i, k + 1"), consumer_k="0:K-1", cross_state=False,
                 clobber_between=False, copy_surface=False, read_in_both_states=False, full_input=False):
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
            s1.add_nedge(s1.add_access("surface"), tmp, dace.Memlet("surface[0:N, 0:1] -> [0:N, 0:1]"))
            continue
        s1.add_mapped_tasklet(f"branch{n}", {"i": "0:N", "k": krange}, {"__x": dace.Memlet(f"{data}[{index}]")},
                              code, {"__o": dace.Memlet("tmp[i, k]")}, external_edges=True, output_nodes={"tmp": tmp})
    if read_in_both_states:
        sdfg.add_array("early", ["N", "K"], dace.float64)
        s1.add_mapped_tasklet("early_reader", {"i": "0:N", "k": "1:K"}, {"__x": dace.Memlet("tmp[i, k - 1]")},
                              "__o = 3.0 * __x", {"__o": dace.Memlet("early[i, k]")}, external_edges=True,
                              input_nodes={"tmp": tmp})
    if cross_state:
        mid = sdfg.add_state_after(s1, "middle")
        if clobber_between:
            mid.add_mapped_tasklet("clobber", {"i": "0:N"}, {}, "__o = 0.0", {"__o": dace.Memlet("surface[i, 0]")},
                                   external_edges=True)
        s2 = sdfg.add_state_after(mid, "consume")
        src = s2.add_access("tmp")
    else:
        s2, src = s1, tmp
    conns = {f"__t{n}": dace.Memlet(f"tmp[{r}]") for n, r in enumerate(reads)}
    s2.add_mapped_tasklet("consumer", {"i": "0:N", "k": consumer_k}, conns,
                          "__o = " + " + ".join(f"{n + 1}.0 * __t{n}" for n in range(len(reads))),
                          {"__o": dace.Memlet("out[i, k]")}, external_edges=True, input_nodes={"tmp": src})
    sdfg.validate()
    return sdfg


TWO = [("0:1", "surface", "i, 0", "__o = 2.0 * __x"), ("1:K", "interior", "i, k - 1", "__o = __x + 1.0")]
THREE = [("0:1", "surface", "i, 0", "__o = 2.0 * __x"),
         ("1:3", "interior", "i, k - 1", "__o = __x - 5.0"),
         ("3:K", "interior", "i, k - 1", "__o = __x + 1.0")]


def _theta(arrays, three=False):
    n, k = SYMS["N"], SYMS["K"]
    t = np.empty((n, k))
    t[:, 0] = 2.0 * arrays["surface"][:, 0]
    t[:, 1:] = arrays["interior"] + 1.0
    if three:
        t[:, 1:3] = arrays["interior"][:, 0:2] - 5.0
    return t


def _arrays(sdfg):
    return {n: RNG.random([int(dace.symbolic.evaluate(s, SYMS)) for s in d.shape])
            for n, d in sdfg.arrays.items() if not d.transient}


def _inline(sdfg):
    after = copy.deepcopy(sdfg)
    return after, gx.gt_inline_fusion(after, cost_model=SOUND)


def _conditional_blocks(sdfg):
    return [b for n in (x for st in sdfg.states() for x in st.nodes() if isinstance(x, dn.NestedSDFG))
            for b in n.sdfg.all_control_flow_blocks() if isinstance(b, dace.sdfg.state.ConditionalBlock)]


@pytest.mark.compile
def test_concat_read_in_the_same_and_in_a_later_state():
    sdfg = _concat_sdfg("concat_both_states", regions=TWO, cross_state=True, read_in_both_states=True)
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
    sdfg = _concat_sdfg(f"concat_{variant}", regions=THREE if three else TWO,
                        copy_surface=variant == "copy_branch", cross_state=variant == "cross_state")
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
    report = gx.gt_inline_fusion(sdfg, cost_model=SOUND)
    assert not report.applied and "disjoint" in report.declined[0].reason
    assert sdfg.hash_sdfg() == h


def test_decline_input_written_between_states():
    sdfg = _concat_sdfg("clobbered", regions=TWO, cross_state=True, clobber_between=True)
    h = sdfg.hash_sdfg()
    report = gx.gt_inline_fusion(sdfg, cost_model=SOUND)
    assert not report.applied
    assert "'surface' is written in state 'middle'" in report.declined[0].reason, report.table()
    assert sdfg.hash_sdfg() == h


def test_decline_union_does_not_cover_read():
    """Level 1 is written by no branch, and the consumer reads it."""
    sdfg = _concat_sdfg("gap", regions=[TWO[0], ("2:K", "interior", "i, k - 1", "__o = __x + 1.0")])
    h = sdfg.hash_sdfg()
    report = gx.gt_inline_fusion(sdfg, cost_model=SOUND)
    assert not report.applied and "cover" in report.declined[0].reason, report.table()
    assert sdfg.hash_sdfg() == h
