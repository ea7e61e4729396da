"""`OutputAsBuffer` (analysis/output_buffer.py, transformations/output_buffer.py,
docs/writeback.md): a write-back buffer that other dataflow reads becomes the output it
is copied into. Hand-built SDFGs in gt4py's shape (a Map writes `T`, Maps, nested SDFGs and
branches read it in later states, a copy into the output at the end), each compiled and
compared with the untransformed SDFG and numpy; the hostile variants must decline and leave
the SDFG unchanged."""

import copy
import json

import dace
import gt4py.next as gtx
import numpy as np
import pytest
from dace.sdfg.state import ConditionalBlock, ControlFlowRegion, LoopRegion
from gt4py.next.ffront.experimental import concat_where

import gt4py_dace_xforms as gx
from gt4py_dace_xforms.analysis.output_buffer import output_buffer_plan
from gt4py_dace_xforms.analysis.producer import Decline
from gt4py_dace_xforms.tools.compare import two_d_transients


N, K = 8, 6


def _writer(state, code="__t = 2.0 * __a + 1.0", extra_in=None, extra_out=None, levels=K):
    inputs = {"__a": dace.Memlet("a[i, k]"), **(extra_in or {})}
    outputs = {"__t": dace.Memlet("T[i, k]"), **(extra_out or {})}
    state.add_mapped_tasklet("producer", {"i": f"0:{N}", "k": f"0:{levels}"}, inputs, code, outputs,
                             external_edges=True)  # fmt: skip


def _nested_reader(sdfg, state):
    """A nested SDFG that receives all of `T` (as gt4py passes fields) and reads it at k + 1."""
    inner = dace.SDFG("reader_nested")
    inner.add_array("x", (N, K), dace.float64)
    inner.add_array("y", (N, K), dace.float64)
    ist = inner.add_state("body")
    ist.add_mapped_tasklet("nested_read", {"i": f"0:{N}", "k": f"0:{K - 1}"}, {"__x": dace.Memlet("x[i, k + 1]")},
                           "__y = 3.0 * __x", {"__y": dace.Memlet("y[i, k]")}, external_edges=True)  # fmt: skip
    node = state.add_nested_sdfg(inner, {"x"}, {"y"})
    state.add_edge(state.add_access("T"), None, node, "x", dace.Memlet(f"T[0:{N}, 0:{K}]"))
    state.add_edge(node, "y", state.add_access("H"), None, dace.Memlet(f"H[0:{N}, 0:{K}]"))


def build(
    *,
    reader: str = "map",
    writers: str = "map",
    shift: int = 1,
    between: str = "",
    copy_in: str = "",
    extra: str = "",
):
    """`T[i, k] = 2 a[i, k] + 1` (state `w`), read at `k + 1` into `H` (state `r`), copied
    whole into `G[:, shift:]` (state `c`). Variants move the pieces or add what must make
    the rewrite decline."""
    sdfg = dace.SDFG(f"outbuf_{reader}_{writers}_{shift}_{between}_{copy_in}_{extra}")
    sdfg.add_array("a", (N, K + 1), dace.float64)
    sdfg.add_array("G", (N, K + shift), dace.float64)
    sdfg.add_array("H", (N, K), dace.float64)
    sdfg.add_array("H2", (N, K), dace.float64)
    sdfg.add_array(
        "T", (N, K + (1 if extra == "wider_buffer" else 0)), dace.float64, transient=True
    )
    sdfg.add_symbol("flag", dace.int32)
    w = sdfg.add_state("w", is_start_block=True)
    if writers == "map":
        _writer(w)
    elif writers == "two_outputs":  # gt4py's multi-output Maps (the solvers' next_rho / next_exner)
        _writer(
            w, code="__t = 2.0 * __a + 1.0\n__h = __a", extra_out={"__h": dace.Memlet("H2[i, k]")}
        )
    elif writers == "in_place_shift":  # T[k] becomes G[k + shift], but the writer reads G[k]
        _writer(w, code="__t = 2.0 * __a + __g", extra_in={"__g": dace.Memlet("G[i, k]")})
    elif writers == "branches":  # an if/else whose branches both write T
        w.add_nedge(w.add_access("a"), w.add_access("H2"), dace.Memlet(f"a[0:{N}, 0:{K}]"))
        cond = ConditionalBlock("choose")
        sdfg.add_node(cond)
        sdfg.add_edge(w, cond, dace.InterstateEdge())
        for label, code, test in (
            ("then", "__t = 2.0 * __a + 1.0", "flag > 0"),
            ("else", "__t = __a - 1.0", None),
        ):
            region = ControlFlowRegion(f"{label}_region", sdfg=sdfg)
            st = region.add_state(f"{label}_state", is_start_block=True)
            _writer(st, code=code)
            cond.add_branch(dace.properties.CodeBlock(test) if test else None, region)
        w = cond
    last = w
    if between:
        mid = (
            sdfg.add_state_after(last, "mid")
            if isinstance(last, dace.SDFGState)
            else sdfg.add_state("mid")
        )
        if not isinstance(last, dace.SDFGState):
            sdfg.add_edge(last, mid, dace.InterstateEdge())
        if between == "reads_g":
            mid.add_nedge(
                mid.add_access("G"), mid.add_access("H2"), dace.Memlet(f"G[0:{N}, 0:{K}]")
            )
        elif between == "writes_g":
            mid.add_nedge(mid.add_access("a"), mid.add_access("G"), dace.Memlet(f"a[0:{N}, 0:{K}]"))
        elif between == "writes_t":  # a second writer state (the same values, so numpy still holds)
            _writer(mid)
        elif between == "loop":
            loop = LoopRegion("loop", "j < 2", "j", "j = 0", "j = j + 1")
            sdfg.add_node(loop)
            sdfg.add_edge(mid, loop, dace.InterstateEdge())
            body = loop.add_state("body", is_start_block=True)
            body.add_mapped_tasklet("loop_read", {"i": f"0:{N}"}, {"__t": dace.Memlet("T[i, 0]")}, "__h = __t",
                                    {"__h": dace.Memlet("H2[i, 0]")}, external_edges=True)  # fmt: skip
            mid = loop
        last = mid
    r = sdfg.add_state("r")
    sdfg.add_edge(last, r, dace.InterstateEdge())
    if reader == "map":
        r.add_mapped_tasklet("reader", {"i": f"0:{N}", "k": f"0:{K - 1}"}, {"__t": dace.Memlet("T[i, k + 1]")},
                             "__h = 3.0 * __t", {"__h": dace.Memlet("H[i, k]")}, external_edges=True)  # fmt: skip
    elif reader == "nested":
        _nested_reader(sdfg, r)
    elif reader == "outside":  # reads the level the copy does not take
        r.add_mapped_tasklet("reader", {"i": f"0:{N}"}, {"__t": dace.Memlet(f"T[i, {K}]")}, "__h = __t",
                             {"__h": dace.Memlet("H[i, 0]")}, external_edges=True)  # fmt: skip
    c = sdfg.add_state("c")
    if copy_in == "branch":  # the copy runs only where flag > 0
        sdfg.add_edge(r, c, dace.InterstateEdge("flag > 0"))
        end = sdfg.add_state("end")
        sdfg.add_edge(r, end, dace.InterstateEdge("flag <= 0"))
        sdfg.add_edge(c, end, dace.InterstateEdge())
    else:
        sdfg.add_edge(r, c, dace.InterstateEdge())
    t, g = c.add_access("T"), c.add_access("G")
    if extra == "tiles":  # gt4py splits the copy of a concat_where result at the branch boundary
        c.add_nedge(
            t,
            g,
            dace.Memlet(data="T", subset=f"0:{N}, 0:2", other_subset=f"0:{N}, {shift}:{2 + shift}"),
        )
        c.add_nedge(
            t,
            g,
            dace.Memlet(
                data="T", subset=f"0:{N}, 2:{K}", other_subset=f"0:{N}, {2 + shift}:{K + shift}"
            ),
        )
    else:
        c.add_nedge(
            t,
            g,
            dace.Memlet(
                data="T", subset=f"0:{N}, 0:{K}", other_subset=f"0:{N}, {shift}:{K + shift}"
            ),
        )
    if extra == "read_after_copy":  # a reader of G after the copy, in the copy's state
        c.add_mapped_tasklet("after", {"i": f"0:{N}"}, {"__g": dace.Memlet(f"G[i, {shift}]")}, "__h = __g",
                             {"__h": dace.Memlet("H2[i, 0]")}, external_edges=True, input_nodes={"G": g})  # fmt: skip
    sdfg.validate()
    return sdfg


def _inputs(seed=0):
    rng = np.random.default_rng(seed)
    return {"a": rng.random((N, K + 1))}


def _run(sdfg, shift=1, flag=1):
    out = {"G": np.full((N, K + shift), -7.0), "H": np.zeros((N, K)), "H2": np.zeros((N, K))}
    sdfg(**_inputs(), **out, flag=flag)
    return out


def _numpy(shift=1, flag=1, writers="map"):
    a = _inputs()["a"]
    t = 2.0 * a[:, :K] + 1.0 if (flag > 0 or writers != "branches") else a[:, :K] - 1.0
    g = np.full((N, K + shift), -7.0)
    g[:, shift:] = t
    h = np.zeros((N, K))
    h[:, : K - 1] = 3.0 * t[:, 1:]
    return g, h


APPLY = [
    dict(),
    dict(shift=0),
    dict(reader="nested"),
    dict(writers="two_outputs"),
    dict(writers="branches"),
    dict(extra="tiles"),
    dict(extra="read_after_copy"),
    dict(between="writes_t"),
]
APPLY_IDS = [
    "map-reader",
    "no-shift",
    "nested-sdfg-reader",
    "multi-output-writer",
    "if-else-writers",
    "split-copies",
    "reader-after-copy",
    "writers-in-two-states",
]


@pytest.mark.parametrize("variant", APPLY, ids=APPLY_IDS)
def test_the_plan_holds_and_the_buffer_goes(variant):
    sdfg = build(**variant)
    plan = output_buffer_plan(sdfg, "T")
    assert not isinstance(plan, Decline), plan.reason
    assert [str(s) for s in plan.shift] == ["0", str(variant.get("shift", 1))]
    assert gx.gt_use_outputs_as_buffers(sdfg).outputs_as_buffers == ["T"]
    sdfg.validate()
    assert "T" not in sdfg.arrays and two_d_transients(sdfg) == []
    # the copy is gone: no AccessNode -> AccessNode edge into G is left
    assert not any(isinstance(e.src, dace.nodes.AccessNode) and e.dst.data == "G" for st in sdfg.states()
                   for e in st.edges() if isinstance(e.dst, dace.nodes.AccessNode))  # fmt: skip


@pytest.mark.compile
@pytest.mark.parametrize("variant", APPLY, ids=APPLY_IDS)
def test_outputs_equal_the_untransformed_sdfg_and_numpy(variant):
    sdfg = build(**variant)
    reference = copy.deepcopy(sdfg)
    assert sdfg.apply_transformations_repeated(gx.OutputAsBuffer) == 1
    shift = variant.get("shift", 1)
    flags = (1, 0) if variant.get("writers") == "branches" else (1,)
    for flag in flags:
        got, ref = _run(sdfg, shift, flag), _run(reference, shift, flag)
        g, h = _numpy(shift, flag, variant.get("writers", "map"))
        for name in ("G", "H", "H2"):
            np.testing.assert_array_equal(got[name], ref[name], err_msg=name)
        np.testing.assert_array_equal(got["G"], g)
        np.testing.assert_array_equal(got["H"], h)


HOSTILE = [
    (dict(between="reads_g"), "'G' is accessed in state 'mid'"),
    (dict(between="writes_g"), "'G' is accessed in state 'mid'"),
    (dict(reader="outside", extra="wider_buffer"), "reads the buffer outside the copied box"),
    (dict(writers="in_place_shift"), "'G' is accessed in state 'w'"),
    (dict(copy_in="branch"), "does not run on every path"),
    (dict(between="loop"), "inside a loop"),
]
HOSTILE_IDS = [
    "output-read-in-between",
    "output-written-in-between",
    "reader-outside-the-copied-box",
    "in-place-update-read-at-a-shift",
    "copy-only-on-one-path",
    "buffer-read-in-a-loop",
]


@pytest.mark.parametrize("variant, reason", HOSTILE, ids=HOSTILE_IDS)
def test_hostile_variants_are_declined_unchanged(variant, reason):
    sdfg = build(**variant)
    before = sdfg.hash_sdfg()
    plan = output_buffer_plan(sdfg, "T")
    assert isinstance(plan, Decline) and reason in plan.reason, plan
    assert sdfg.apply_transformations_repeated(gx.OutputAsBuffer) == 0
    assert gx.gt_use_outputs_as_buffers(sdfg).outputs_as_buffers == []
    assert sdfg.hash_sdfg() == before


def test_a_write_after_the_copy_is_declined():
    sdfg = build()
    c = next(s for s in sdfg.states() if s.label == "c")
    late = sdfg.add_state_after(c, "late")
    _writer(
        late, code="__t = __a"
    )  # dead in the original; moved to G it would overwrite the output
    before = sdfg.hash_sdfg()
    plan = output_buffer_plan(sdfg, "T")
    assert isinstance(plan, Decline) and "written after its write-back copy" in plan.reason
    assert sdfg.hash_sdfg() == before


def test_an_unprovable_symbolic_box_is_declined():
    """The copy takes `m` levels of a buffer with `nlev`; `m >= nlev` is not known."""
    sdfg = dace.SDFG("outbuf_symbolic")
    for s in ("nlev", "m"):
        sdfg.add_symbol(s, dace.int32)
    sdfg.add_array("a", (N, "nlev"), dace.float64)
    sdfg.add_array("G", (N, "m"), dace.float64)
    sdfg.add_array("H", (N, "nlev"), dace.float64)
    sdfg.add_array("T", (N, "nlev"), dace.float64, transient=True)
    w = sdfg.add_state("w")
    w.add_mapped_tasklet("producer", {"i": f"0:{N}", "k": "0:nlev"}, {"__a": dace.Memlet("a[i, k]")}, "__t = __a",
                         {"__t": dace.Memlet("T[i, k]")}, external_edges=True)  # fmt: skip
    r = sdfg.add_state_after(w, "r")
    r.add_mapped_tasklet("reader", {"i": f"0:{N}", "k": "0:nlev"}, {"__t": dace.Memlet("T[i, k]")}, "__h = __t",
                         {"__h": dace.Memlet("H[i, k]")}, external_edges=True)  # fmt: skip
    c = sdfg.add_state_after(r, "c")
    c.add_nedge(
        c.add_access("T"),
        c.add_access("G"),
        dace.Memlet(data="T", subset=f"0:{N}, 0:m", other_subset=f"0:{N}, 0:m"),
    )
    sdfg.validate()
    before = sdfg.hash_sdfg()
    plan = output_buffer_plan(sdfg, "T")
    assert isinstance(plan, Decline) and "outside the copied box" in plan.reason, plan
    assert (
        sdfg.apply_transformations_repeated(gx.OutputAsBuffer) == 0 and sdfg.hash_sdfg() == before
    )


def test_can_be_applied_never_raises_on_a_broken_match():
    sdfg = build()
    c = next(s for s in sdfg.states() if s.label == "c")
    xf = gx.OutputAsBuffer()
    t = next(n for n in c.data_nodes() if n.data == "T")
    xf.setup_match(sdfg, sdfg.cfg_id, sdfg.node_id(c), {gx.OutputAsBuffer.source: c.node_id(t),
                                                        gx.OutputAsBuffer.target: c.node_id(t)}, 0)  # fmt: skip
    sdfg.remove_data(
        "G", validate=False
    )  # a dangling AccessNode: the analysis fails, the matcher declines
    assert xf.can_be_applied(c, 0, sdfg) is False


@pytest.mark.parametrize(
    "policy",
    [gx.CostModel("cpu"), gx.CostModel("gpu"), gx.InlineWhereSound()],
    ids=["cost-model-cpu", "cost-model-gpu", "everything-sound"],
)
def test_the_pass_prefers_it_over_inlining_the_readers(policy):
    """The Map reader could be inlined (recomputing `T` there) and the writer retargeted;
    the output as buffer recomputes nothing, so the pass takes it first and records it as
    its own mode, with the copy traffic it saves."""
    sdfg = build()
    report = gx.gt_inline_intermediates(sdfg, policy=policy)
    assert (
        report.outputs_as_buffers == ["T"]
        and report.inlined == []
        and report.writebacks_retargeted == []
    )
    (rec,) = [r for r in report.applied if r.mode == "output_buffer"]
    assert rec.consumer == "G" and rec.removed_intermediate
    assert rec.figures["output_buffer_saved_bytes"] == 2 * 8 * N * K
    assert "output as buffer" in report.table() and "recomputes nothing" in "\n".join(
        report.cost_lines()
    )
    assert two_d_transients(sdfg) == []


def test_policies_can_opt_out_and_pinned_sets_are_respected():
    sdfg = build()
    before = sdfg.hash_sdfg()
    off = gx.CostModel("cpu", output_buffers=False, writeback_retarget=False)
    assert gx.gt_inline_intermediates(copy.deepcopy(sdfg), policy=off).outputs_as_buffers == []
    from gt4py_dace_xforms.policy.default import InlineOnly

    assert (
        gx.gt_inline_intermediates(
            copy.deepcopy(sdfg), policy=InlineOnly(("X",))
        ).outputs_as_buffers
        == []
    )
    assert gx.gt_inline_intermediates(
        copy.deepcopy(sdfg), policy=InlineOnly(("T",))
    ).outputs_as_buffers == ["T"]
    assert sdfg.hash_sdfg() == before


def test_transformation_properties_round_trip_and_it_is_registered():
    from dace.transformation.transformation import PatternTransformation

    assert gx.OutputAsBuffer in PatternTransformation.subclasses_recursive()
    xf = gx.OutputAsBuffer()
    assert type(xf).from_json(xf.to_json()).to_json() == xf.to_json()


def build_copied_twice(later: bool = False, overwrite: str = ""):
    """`build()`'s `T`, also copied whole into a second output `G2`: in the copy's state, or
    (`later`) in a state after it, with `overwrite` ("G" or "G and G2") written in between."""
    sdfg = build()
    sdfg.add_array("G2", (N, K), dace.float64)
    c = next(s for s in sdfg.states() if s.label == "c")
    whole = dace.Memlet(data="T", subset=f"0:{N}, 0:{K}", other_subset=f"0:{N}, 0:{K}")
    if not later:
        t = next(n for n in c.data_nodes() if n.data == "T")
        c.add_nedge(t, c.add_access("G2"), whole)
        sdfg.validate()
        return sdfg
    last = c
    if overwrite:
        last = sdfg.add_state_after(c, "overwrite")
        for out in overwrite.split(" and "):
            last.add_nedge(
                last.add_access("a"), last.add_access(out), dace.Memlet(f"a[0:{N}, 0:{K}]")
            )
    late = sdfg.add_state_after(last, "late")
    late.add_nedge(late.add_access("T"), late.add_access("G2"), whole)
    sdfg.validate()
    return sdfg


COPIED_TWICE = [(dict(), "G"), (dict(later=True), "G"), (dict(later=True, overwrite="G"), "G2")]
COPIED_TWICE_IDS = [
    "second-copy-in-the-same-state",
    "second-copy-later",
    "first-output-overwritten-before-the-second-copy",
]


@pytest.mark.parametrize("variant, target", COPIED_TWICE, ids=COPIED_TWICE_IDS)
def test_a_buffer_copied_into_two_outputs_becomes_one_of_them(variant, target):
    """One output takes the buffer's place, the other copy reads that output: the first
    whose lifetime is clear (an overwrite of `G` before `G2`'s copy leaves only `G2`)."""
    sdfg = build_copied_twice(**variant)
    plan = output_buffer_plan(sdfg, "T")
    assert not isinstance(plan, Decline), plan.reason
    assert plan.target == target
    assert gx.gt_use_outputs_as_buffers(sdfg).outputs_as_buffers == ["T"]
    sdfg.validate()
    assert "T" not in sdfg.arrays and two_d_transients(sdfg) == []
    other = "G2" if target == "G" else "G"
    copies = [(e.src.data, e.dst.data) for st in sdfg.states() for e in st.edges()
              if isinstance(e.src, dace.nodes.AccessNode) and isinstance(e.dst, dace.nodes.AccessNode)]  # fmt: skip
    assert (target, other) in copies


@pytest.mark.compile
@pytest.mark.parametrize("variant, target", COPIED_TWICE, ids=COPIED_TWICE_IDS)
def test_a_buffer_copied_into_two_outputs_computes_the_same(variant, target):
    sdfg = build_copied_twice(**variant)
    reference = copy.deepcopy(sdfg)
    assert sdfg.apply_transformations_repeated(gx.OutputAsBuffer) == 1
    runs = []
    for s in (sdfg, reference):
        out = {
            "G": np.full((N, K + 1), -7.0),
            "G2": np.zeros((N, K)),
            "H": np.zeros((N, K)),
            "H2": np.zeros((N, K)),
        }
        s(**_inputs(), **out, flag=1)
        runs.append(out)
    g, h = _numpy()
    t = g[:, 1:].copy()
    if variant.get("overwrite"):
        g[:, :K] = _inputs()["a"][:, :K]
    for name in ("G", "G2", "H", "H2"):
        np.testing.assert_array_equal(runs[0][name], runs[1][name], err_msg=name)
    np.testing.assert_array_equal(runs[0]["G"], g)
    np.testing.assert_array_equal(runs[0]["G2"], t)
    np.testing.assert_array_equal(runs[0]["H"], h)


def test_a_buffer_copied_into_two_outputs_both_touched_is_declined_unchanged():
    sdfg = build_copied_twice(later=True, overwrite="G and G2")
    before = sdfg.hash_sdfg()
    plan = output_buffer_plan(sdfg, "T")
    assert isinstance(plan, Decline) and plan.reason.startswith(
        "no copy's target can be the buffer"
    ), plan
    assert "'G' in 'c'" in plan.reason and "'G2' in 'late'" in plan.reason
    assert sdfg.apply_transformations_repeated(gx.OutputAsBuffer) == 0
    assert (
        gx.gt_use_outputs_as_buffers(sdfg).outputs_as_buffers == [] and sdfg.hash_sdfg() == before
    )


# A limited-area rank's `concat_where` on an output with a boundary zone at both ends
# (icon4py's `compute_rho_theta_pgrad_and_update_vn`, static, decomposed): one Map writes
# `T` and `T2` on every edge, only the two zones are copied into `G` and `G2`, other Maps
# write the interior of `G` and `G2` into the same AccessNodes, and a Map reads `G` from
# there.
NB, KB = 40, 5
LO, MID, HI = 6, 20, 34  # copied: [0:LO] and [HI:NB]; interior writers: [LO:MID], [MID:HI]


def build_boundary(
    *,
    outputs: int = 2,
    tiles: bool = False,
    overlap: bool = False,
    shifts: bool = False,
    reader_outside: bool = False,
    lost_points: bool = False,
    reads_buffer: bool = False,
    global_other: bool = False,
):
    """See above. Variants: `tiles` (the first zone copied in two pieces), and what must
    make the rewrite decline: an interior writer overlapping a zone (`overlap`), the
    second zone copied at another shift (`shifts`), a reader of `T` or (`lost_points`)
    of `T2` between the zones, an interior writer reading `T` (`reads_buffer`), or the
    writer's other output a program output (`global_other`)."""
    sdfg = dace.SDFG(
        "outbuf_zones_"
        + "_".join(k for k, v in sorted(locals().items()) if v is True)
        + f"_{outputs}"
    )
    for n in ("a", "b", "G", "G2", "H", "H2"):
        sdfg.add_array(n, (NB, KB), dace.float64)
    sdfg.add_array("T", (NB, KB), dace.float64, transient=True)
    if outputs == 2:
        sdfg.add_array("T2", (NB, KB), dace.float64, transient=True)
    st = sdfg.add_state("s")
    t, g, g2 = st.add_access("T"), st.add_access("G"), st.add_access("G2")
    outs, code, out_nodes = {"__t": dace.Memlet("T[i, k]")}, "__t = 2.0 * __a + 1.0", {"T": t}
    if outputs == 2:
        t2 = st.add_access("T2")
        outs["__u"], code, out_nodes["T2"] = dace.Memlet("T2[i, k]"), code + "\n__u = __a - __b", t2
    if global_other:
        outs["__w"], code = dace.Memlet("H2[i, k]"), code + "\n__w = __a"
    st.add_mapped_tasklet("boundary", {"i": f"0:{NB}", "k": f"0:{KB}"},
                          {"__a": dace.Memlet("a[i, k]"), "__b": dace.Memlet("b[i, k]")}, code, outs,
                          external_edges=True, output_nodes=out_nodes)  # fmt: skip
    zones = [(0, 3), (3, LO), (HI, NB)] if tiles else [(0, LO), (HI, NB)]
    for src, dst in [(t, g)] + ([(t2, g2)] if outputs == 2 else []):
        for j, (lo, hi) in enumerate(zones):
            ks, kd = (
                (f"0:{KB - 1}", f"1:{KB}")
                if shifts and j == len(zones) - 1
                else (f"0:{KB}", f"0:{KB}")
            )
            st.add_nedge(
                src,
                dst,
                dace.Memlet(
                    data=src.data, subset=f"{lo}:{hi}, {ks}", other_subset=f"{lo}:{hi}, {kd}"
                ),
            )
    for j, (lo, hi) in enumerate(((LO - 2 if overlap else LO, MID), (MID, HI))):
        ins, code, in_nodes = (
            {"__b": dace.Memlet("b[i, k]")},
            "__g = 3.0 * __b\n__g2 = __b + 1.0",
            {},
        )
        if reads_buffer and j == 0:
            ins["__t"], code, in_nodes = (
                dace.Memlet("T[0, k]"),
                "__g = 3.0 * __b + __t\n__g2 = __b + 1.0",
                {"T": t},
            )
        st.add_mapped_tasklet(f"interior_{j}", {"i": f"{lo}:{hi}", "k": f"0:{KB}"}, ins, code,
                              {"__g": dace.Memlet("G[i, k]"), "__g2": dace.Memlet("G2[i, k]")}, external_edges=True,
                              input_nodes=in_nodes, output_nodes={"G": g, "G2": g2})  # fmt: skip
    st.add_mapped_tasklet("reader", {"i": f"0:{NB}", "k": f"0:{KB}"}, {"__g": dace.Memlet("G[i, k]")},
                          "__h = 2.0 * __g", {"__h": dace.Memlet("H[i, k]")}, external_edges=True,
                          input_nodes={"G": g})  # fmt: skip
    for flag, data, node in ((reader_outside, "T", t), (lost_points, "T2", out_nodes.get("T2"))):
        if flag:
            st.add_mapped_tasklet(f"{data}_between", {"k": f"0:{KB}"}, {"__x": dace.Memlet(f"{data}[10, k]")},
                                  "__y = __x", {"__y": dace.Memlet("H2[0, k]")}, external_edges=True,
                                  input_nodes={data: node})  # fmt: skip
    sdfg.validate()
    return sdfg


def _zones_numpy(a, b, outputs=2):
    g, g2 = 3.0 * b, b + 1.0
    for lo, hi in ((0, LO), (HI, NB)):
        g[lo:hi] = 2.0 * a[lo:hi] + 1.0
        g2[lo:hi] = (
            a[lo:hi] - b[lo:hi] if outputs == 2 else -7.0
        )  # one output: nothing writes G2's zones
    return {"G": g, "G2": g2, "H": 2.0 * g}


ZONES = [dict(), dict(outputs=1), dict(tiles=True)]
ZONES_IDS = ["two-outputs", "one-output", "first-zone-in-two-copies"]


@pytest.mark.parametrize("variant", ZONES, ids=ZONES_IDS)
def test_copies_of_disjoint_zones_make_the_output_the_buffer(variant):
    """Both buffers go; the writer Map is split into one Map per zone (writing `G` and
    `G2` there), the interior writers and the reader of `G` keep the one node of `G`."""
    sdfg = build_boundary(**variant)
    names = ["T", "T2"] if variant.get("outputs", 2) == 2 else ["T"]
    plan = output_buffer_plan(sdfg, "T")
    assert not isinstance(plan, Decline), plan.reason
    assert [tuple((int(lo), int(hi)) for lo, hi in box) for box in plan.copied] == [
        ((0, LO), (0, KB)),
        ((HI, NB), (0, KB)),
    ]
    (split,) = plan.splits
    assert [[(p, int(lo), int(hi)) for p, lo, hi in piece] for piece in split.pieces] == [
        [("i", 0, LO - 1), ("k", 0, KB - 1)],
        [("i", HI, NB - 1), ("k", 0, KB - 1)],
    ]
    assert plan.saved_elements() == 2 * LO * KB
    assert gx.gt_use_outputs_as_buffers(sdfg).outputs_as_buffers == names
    sdfg.validate()
    assert not set(names) & set(sdfg.arrays) and two_d_transients(sdfg) == []
    (st,) = sdfg.states()
    writers = sorted((n.map.label, str(n.map.range)) for n in st.nodes()
                     if isinstance(n, dace.nodes.MapEntry) and n.map.label.startswith("boundary"))  # fmt: skip
    assert writers == [
        ("boundary_map", f"0:{LO}, 0:{KB}"),
        ("boundary_map_box1", f"{HI}:{NB}, 0:{KB}"),
    ]
    for out in ("G", "G2"):
        (node,) = [n for n in st.data_nodes() if n.data == out]
        assert st.in_degree(node) == 2 + (2 if out == "G" or len(names) == 2 else 0)
    assert not any(isinstance(e.src, dace.nodes.AccessNode) and isinstance(e.dst, dace.nodes.AccessNode)
                   for e in st.edges())  # fmt: skip


def test_the_policy_takes_the_zones():
    """`decide_output_buffer` prices the two zones' copies (both buffers) and takes them."""
    sdfg = build_boundary()
    report = gx.gt_inline_intermediates(sdfg, policy=gx.CostModel("cpu"))
    assert report.outputs_as_buffers == ["T", "T2"], report.table()
    recs = [r for r in report.applied if r.mode == "output_buffer"]
    assert [r.figures["output_buffer_saved_bytes"] for r in recs] == [2 * 8 * 2 * LO * KB] * 2
    assert two_d_transients(sdfg) == []


@pytest.mark.compile
@pytest.mark.parametrize("variant", ZONES, ids=ZONES_IDS)
def test_copies_of_disjoint_zones_compute_the_same(variant):
    sdfg = build_boundary(**variant)
    reference = copy.deepcopy(sdfg)
    n = 2 if variant.get("outputs", 2) == 2 else 1
    assert sdfg.apply_transformations_repeated(gx.OutputAsBuffer) == n
    got, a, b = _run_zones(sdfg, reference, seed=3)
    expected = _zones_numpy(a, b, variant.get("outputs", 2))
    for o in expected:
        np.testing.assert_array_equal(got[o], expected[o], err_msg=o)


def _run_zones(sdfg, reference, seed: int):
    """Both SDFGs on the same random inputs; asserts every output equal; returns the
    transformed SDFG's outputs and the inputs."""
    rng = np.random.default_rng(seed)
    a, b = rng.random((NB, KB)), rng.random((NB, KB))
    runs = []
    for s in (sdfg, reference):
        out = {o: np.full((NB, KB), -7.0) for o in ("G", "G2", "H", "H2")}
        s(a=a.copy(), b=b.copy(), **out)
        runs.append(out)
    for o in ("G", "G2", "H", "H2"):
        np.testing.assert_array_equal(runs[0][o], runs[1][o], err_msg=o)
    return runs[0], a, b


ZONES_HOSTILE = [
    (dict(overlap=True), "'interior_0_map' writes 'G' where the buffer is copied"),
    (dict(shifts=True), "shift differently"),
    (dict(reader_outside=True), "reads the buffer outside the copied box"),
    (dict(lost_points=True), "'T2', which is read outside the points it would keep"),
    (dict(outputs=1, reads_buffer=True), "'interior_0_map' writes 'G' after reading the buffer"),
    (dict(outputs=1, global_other=True), "also writes 'H2', not a transient array"),
]
ZONES_HOSTILE_IDS = [
    "interior-writer-overlaps-a-zone",
    "zones-at-two-shifts",
    "buffer-read-between-the-zones",
    "other-output-read-between-the-zones",
    "interior-writer-reads-the-buffer",
    "other-output-a-program-output",
]


@pytest.mark.parametrize("variant, reason", ZONES_HOSTILE, ids=ZONES_HOSTILE_IDS)
def test_hostile_zone_variants_are_declined_unchanged(variant, reason):
    sdfg = build_boundary(**variant)
    before = json.dumps(sdfg.to_json(), sort_keys=True, default=str)
    plan = output_buffer_plan(sdfg, "T")
    assert isinstance(plan, Decline) and reason in plan.reason, plan
    assert sdfg.apply_transformations_repeated(gx.OutputAsBuffer) == 0
    assert gx.gt_use_outputs_as_buffers(sdfg).outputs_as_buffers == []
    assert json.dumps(sdfg.to_json(), sort_keys=True, default=str) == before


@pytest.mark.compile
def test_a_split_for_one_buffer_keeps_the_other_buffer_whole_where_it_is_read():
    """An interior writer reads `T` (inside a zone): `T` stays, `T2` becomes `G2`; the
    split Map keeps writing `T` on both zones, all that is read of it."""
    sdfg = build_boundary(reads_buffer=True)
    reference = copy.deepcopy(sdfg)
    assert isinstance(output_buffer_plan(sdfg, "T"), Decline)
    assert gx.gt_use_outputs_as_buffers(sdfg).outputs_as_buffers == ["T2"]
    sdfg.validate()
    assert "T" in sdfg.arrays and "T2" not in sdfg.arrays
    _run_zones(sdfg, reference, seed=4)


# --- the same shape lowered by gt4py --------------------------------------------------------
Cell = gtx.Dimension("Cell")
KDim = gtx.Dimension("K", kind=gtx.DimensionKind.VERTICAL)
CF = gtx.Field[gtx.Dims[Cell, KDim], gtx.float64]


@gtx.field_operator
def _zones_op(x: CF, y: CF, lo: gtx.int32, hi: gtx.int32) -> tuple[CF, CF]:
    t = concat_where((Cell < lo) | (Cell >= hi), 2.0 * x + 1.0, 3.0 * y)
    return t, t * y


@gtx.program
def zones_program(
    x: CF, y: CF, out: CF, out2: CF, lo: gtx.int32, hi: gtx.int32, n: gtx.int32, nlev: gtx.int32
):
    _zones_op(x, y, lo, hi, out=(out, out2), domain={Cell: (0, n), KDim: (0, nlev)})


@pytest.mark.compile
def test_the_zones_lowered_from_gt4py_static():
    """Static bounds (icon4py's model run): gt4py computes `2 x + 1` on every cell into a
    transient, copies its two zones into `out`, writes the interior of `out` with `3 y`
    into the same node and reads `out` there for `out2`. Stock keeps the transient; the
    library writes the zones of `out` directly (the writer split in two Maps)."""
    from gt4py_dace_xforms.tools.compare import inline_build, stock_build
    from gt4py_dace_xforms.tools.static import compile_static

    static = {"lo": np.int32(LO), "hi": np.int32(HI), "n": np.int32(NB), "nlev": np.int32(KB)}
    rng = np.random.default_rng(5)
    x, y = rng.random((NB, KB)), rng.random((NB, KB))
    builds = {"stock": stock_build(), "library": inline_build()}
    outs = {}
    for name, build in builds.items():
        compiled = compile_static(zones_program, build.backend, static, {})
        fields = [
            gtx.as_field([Cell, KDim], v.copy())
            for v in (x, y, np.zeros((NB, KB)), np.zeros((NB, KB)))
        ]
        compiled(*fields, **static, offset_provider={})
        outs[name] = [f.asnumpy() for f in fields[2:]]
    t = 3.0 * y
    t[:LO], t[HI:] = 2.0 * x[:LO] + 1.0, 2.0 * x[HI:] + 1.0
    for got in outs.values():
        np.testing.assert_allclose(got[0], t, rtol=1e-15)
        np.testing.assert_allclose(got[1], t * y, rtol=1e-15)
    np.testing.assert_array_equal(outs["library"][0], outs["stock"][0])
    assert (
        len(two_d_transients(builds["stock"].sdfg)) == 1
        and two_d_transients(builds["library"].sdfg) == []
    )
    assert len(builds["library"].report.outputs_as_buffers) == 1
