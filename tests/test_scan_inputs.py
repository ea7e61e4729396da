"""A scan's inputs computed in its own loop (issue 49; `analysis/scan_inputs.py`,
`analysis/nested_reads.py`). Hand-built SDFGs in the shape of icon4py's implicit solvers:
one Map over (cells, levels) writes several coefficient arrays (with work shared between
them), a scan Map's nested SDFG reads each one level per iteration of its loop over K,
either as gt4py passes a column in the static build (`T[i, 0:K]` into a 1-D array: the
cell dimension squeezed) or whole (`T[0:N, 0:K]`, read at `t[i, k]`). All outputs of the
Map move into the loop together; nothing is evaluated twice. Compiled and compared with
numpy and the untransformed SDFG; declines leave the SDFG as it was."""

import copy

import dace
import numpy as np
import pytest
from dace.sdfg.state import LoopRegion

import gt4py_dace_xforms as gx
from gt4py_dace_xforms.analysis.candidate import InlineCandidate, analyse_candidate
from gt4py_dace_xforms.analysis.producer import Decline
from gt4py_dace_xforms.analysis.scan_inputs import scan_input_set
from gt4py_dace_xforms.tools.compare import two_d_transients
from gt4py_dace_xforms.transformations.inline_fusion_pass import find_candidates


N, K = 7, 6


def _scan(squeezed: bool, reads: dict[str, str]) -> dace.SDFG:
    """`s = 0.5 s + t0[.] * t1[.]` for k in 0..K (a forward sweep), `r[k] = s`; `reads`:
    array -> index read inside the loop."""
    inner = dace.SDFG("scan")
    if not squeezed:
        inner.add_symbol("i", dace.int32)
    for name in reads:
        inner.add_array(name, (K,) if squeezed else (N, K), dace.float64)
    inner.add_array("r", (K,), dace.float64)
    inner.add_scalar("s", dace.float64, transient=True)
    init = inner.add_state("init", is_start_block=True)
    z = init.add_tasklet("zero", {}, {"__s"}, "__s = 0.0")
    init.add_edge(z, "__s", init.add_access("s"), None, dace.Memlet("s[0]"))
    loop = LoopRegion("sweep", f"k < {K}", "k", "k = 0", "k = k + 1")
    inner.add_node(loop)
    inner.add_edge(init, loop, dace.InterstateEdge())
    body = loop.add_state("step", is_start_block=True)
    conns = {
        f"__{n}_{j}": (n, idx)
        for j, (n, idx) in enumerate((n, i) for n, ii in reads.items() for i in ii.split(";"))
    }
    code = "__s_out = 0.5 * __s + " + " * ".join(conns) + "\n__r = __s_out"
    tl = body.add_tasklet(
        "step", dict.fromkeys(["__s", *conns]), dict.fromkeys(["__s_out", "__r"]), code
    )
    body.add_edge(body.add_access("s"), None, tl, "__s", dace.Memlet("s[0]"))
    for conn, (name, idx) in conns.items():
        body.add_edge(body.add_access(name), None, tl, conn, dace.Memlet(f"{name}[{idx}]"))
    body.add_edge(tl, "__s_out", body.add_access("s"), None, dace.Memlet("s[0]"))
    body.add_edge(tl, "__r", body.add_access("r"), None, dace.Memlet("r[k]"))
    return inner


def build(
    squeezed: bool = True,
    reads: dict[str, str] | None = None,
    producer_reads_out: bool = False,
    upstream: bool = False,
    t1_elsewhere: bool = False,
) -> dace.SDFG:
    """Coefficients `T0 = w * w + v`, `T1 = w * w * 2 - v` (the square shared) in one Map,
    then the scan over the cells. `producer_reads_out`: the Map also reads `out`, which
    the scan writes (declined). `upstream`: `w` is a transient `W = a + 1` of a Map of its
    own, which reaches the scan only through the coefficients (a second-level input, as
    the solvers' `z_alpha`). `t1_elsewhere`: a second Map copies `T1` to `out2`, so the
    coefficients are not a scan-input set and `T1` stays materialized."""
    reads = reads or ({"t0": "k", "t1": "k"} if squeezed else {"t0": "i, k", "t1": "i, k"})
    sdfg = dace.SDFG(
        f"scan_inputs_{abs(hash((squeezed, tuple(reads.items()), producer_reads_out, upstream, t1_elsewhere)))}"
    )
    for name in ("w", "v", "out"):
        sdfg.add_array(name, (N, K), dace.float64)
    for name in ("T0", "T1"):
        sdfg.add_array(name, (N, K), dace.float64, transient=True)
    st = sdfg.add_state("s")
    me, mx = st.add_map("coefficients", {"i": f"0:{N}", "k": f"0:{K}"})
    sq = st.add_tasklet("square", {"__w"}, {"__q"}, "__q = __w * __w")
    extra = " + 0.0 * __o" if producer_reads_out else ""
    t0 = st.add_tasklet(
        "coef0",
        dict.fromkeys(["__q", "__v", *(["__o"] if producer_reads_out else [])]),
        {"__t"},
        f"__t = __q + __v{extra}",
    )
    t1 = st.add_tasklet("coef1", {"__q", "__v"}, {"__t"}, "__t = 2.0 * __q - __v")
    if upstream:
        sdfg.arrays["w"].transient = True
        sdfg.add_array("a", (N, K), dace.float64)
        w = st.add_access("w")
        pe, px = st.add_map("upstream", {"i": f"0:{N}", "k": f"0:{K}"})
        up = st.add_tasklet("plus_one", {"__a"}, {"__w"}, "__w = __a + 1.0")
        st.add_memlet_path(
            st.add_access("a"), pe, up, dst_conn="__a", memlet=dace.Memlet("a[i, k]")
        )
        st.add_memlet_path(up, px, w, src_conn="__w", memlet=dace.Memlet("w[i, k]"))
    else:
        w = st.add_access("w")
    v = st.add_access("v")
    st.add_memlet_path(w, me, sq, dst_conn="__w", memlet=dace.Memlet("w[i, k]"))
    q = "__q_" + sdfg.label[-6:]
    sdfg.add_scalar(q, dace.float64, transient=True)
    qn = st.add_access(q)
    st.add_edge(sq, "__q", qn, None, dace.Memlet(f"{q}[0]"))
    st.add_edge(qn, None, t0, "__q", dace.Memlet(f"{q}[0]"))
    st.add_edge(qn, None, t1, "__q", dace.Memlet(f"{q}[0]"))
    st.add_memlet_path(v, me, t0, dst_conn="__v", memlet=dace.Memlet("v[i, k]"))
    st.add_memlet_path(v, me, t1, dst_conn="__v", memlet=dace.Memlet("v[i, k]"))
    if producer_reads_out:
        st.add_memlet_path(
            st.add_access("out"), me, t0, dst_conn="__o", memlet=dace.Memlet("out[i, k]")
        )
    tn = {"t0": st.add_access("T0"), "t1": st.add_access("T1")}
    st.add_memlet_path(t0, mx, tn["t0"], src_conn="__t", memlet=dace.Memlet("T0[i, k]"))
    st.add_memlet_path(t1, mx, tn["t1"], src_conn="__t", memlet=dace.Memlet("T1[i, k]"))
    se, sx = st.add_map("scan_map", {"i": f"0:{N}"})
    scan = st.add_nested_sdfg(
        _scan(squeezed, reads),
        dict.fromkeys(reads),
        {"r": None},
        symbol_mapping={} if squeezed else {"i": "i"},
    )
    for name in reads:
        subset = f"{name.upper()}[i, 0:{K}]" if squeezed else f"{name.upper()}[0:{N}, 0:{K}]"
        st.add_memlet_path(tn[name], se, scan, dst_conn=name, memlet=dace.Memlet(subset))
    st.add_memlet_path(
        scan, sx, st.add_access("out"), src_conn="r", memlet=dace.Memlet(f"out[i, 0:{K}]")
    )
    if t1_elsewhere:
        sdfg.add_array("out2", (N, K), dace.float64)
        ce, cx = st.add_map("copy_t1", {"i": f"0:{N}", "k": f"0:{K}"})
        cp = st.add_tasklet("copy", {"__t"}, {"__o"}, "__o = __t")
        st.add_memlet_path(tn["t1"], ce, cp, dst_conn="__t", memlet=dace.Memlet("T1[i, k]"))
        st.add_memlet_path(
            cp, cx, st.add_access("out2"), src_conn="__o", memlet=dace.Memlet("out2[i, k]")
        )
    sdfg.validate()
    return sdfg


def _numpy(w, v):
    q = w * w
    t0, t1 = q + v, 2.0 * q - v
    out, s = np.zeros((N, K)), np.zeros(N)
    for k in range(K):
        s = 0.5 * s + t0[:, k] * t1[:, k]
        out[:, k] = s
    return out


def _candidates(sdfg):
    found = [analyse_candidate(sdfg, st, n, m) for st, n, m in find_candidates(sdfg)]
    return {c.intermediate.data: c for c in found if isinstance(c, InlineCandidate)}, [
        c for c in found if isinstance(c, Decline)
    ]


def _run(sdfg):
    rng = np.random.default_rng(3)
    w, v = rng.random((N, K)), rng.random((N, K))
    out = np.zeros((N, K))
    if "a" in sdfg.arrays:  # `upstream`: w = a + 1 is computed
        sdfg.compile()(a=w - 1.0, v=v.copy(), out=out)
    else:
        sdfg.compile()(w=w.copy(), v=v.copy(), out=out)
    return w, v, out


@pytest.mark.parametrize("squeezed", [True, False], ids=["column", "whole"])
def test_every_output_of_the_map_is_a_scan_input_of_one_set(squeezed):
    """Both coefficient arrays are nested reads of the same scan, one level per iteration:
    one set of two, the Map's shared square counted once."""
    sdfg = build(squeezed)
    cands, _ = _candidates(sdfg)
    assert set(cands) == {"T0", "T1"}
    if squeezed:
        assert cands["T0"].nested[0].squeezed == (0,) and cands["T0"].nested[0].scope_symbols == (
            "i",
        )
    members = scan_input_set(sdfg, cands["T0"])
    assert [m.intermediate.data for m in members] == ["T0", "T1"]
    decision = gx.CostModel("cpu", fresh_page_bytes=0).decide(sdfg, cands["T0"])
    assert decision.accept and decision.reason.startswith(
        "scan inputs: all 2 outputs of coefficients"
    ), decision
    assert (
        decision.figures["recomputed_points"] == 0
        and decision.figures["scan_set_duplicated_ops"] == N * K
    )


@pytest.mark.compile
@pytest.mark.parametrize("squeezed", [True, False], ids=["column", "whole"])
def test_the_map_moves_into_the_scans_loop_and_equals_numpy(squeezed):
    sdfg = build(squeezed)
    w, v, ref = _run(copy.deepcopy(sdfg))
    report = gx.gt_inline_intermediates(
        sdfg, policy=gx.CostModel("cpu", fresh_page_bytes=0), validate=True
    )
    assert sorted(r.intermediate for r in report.applied) == ["T0", "T1"], report.table()
    assert two_d_transients(sdfg) == [] and not any(
        isinstance(n, dace.nodes.MapEntry) and n.map.label == "coefficients"
        for n in sdfg.start_state.nodes()
    )
    _, _, got = _run(sdfg)
    np.testing.assert_allclose(got, ref, rtol=1e-14)
    np.testing.assert_allclose(got, _numpy(w, v), rtol=1e-14)


def test_the_gpu_model_takes_a_set_that_duplicates_nothing_and_guards_the_rest():
    """`scan_guard` declines what feeds a scan (upstream measured pushed shifts there as a
    model-level loss); a set evaluated once per level is no such binding. Read at k and
    k - 1 (two copies per level) it is, and stays guarded."""
    sdfg = build()
    cands, _ = _candidates(sdfg)
    assert gx.CostModel("gpu").decide(sdfg, cands["T0"]).accept
    shifted = build(reads={"t0": "k", "t1": "k;Max(k - 1, 0)"})
    cands, _ = _candidates(shifted)
    assert (
        scan_input_set(shifted, cands["T1"]) is None
        and scan_input_set(shifted, cands["T0"]) is None
    )
    guarded = gx.CostModel("gpu").decide(shifted, cands["T0"])
    assert not guarded.accept and "scan_guard" in guarded.reason


def test_the_gpu_guard_lets_through_what_reaches_the_scan_only_through_moved_inputs():
    """`w` (a Map's output) reaches the scan only through the coefficients, which the GPU
    model moves into the scan's loop: no scan argument is materialized on that path, so
    `scan_guard` leaves `w` to the estimate (the solvers' `z_alpha`, issue 49). Where a
    coefficient is also read elsewhere it stays materialized, and `w` stays guarded,
    the SDFG unchanged."""
    sdfg = build(upstream=True)
    cands, _ = _candidates(sdfg)
    decision = gx.CostModel("gpu").decide(sdfg, cands["w"])
    assert decision.accept, decision
    kept = build(upstream=True, t1_elsewhere=True)
    before = kept.hash_sdfg()
    cands, _ = _candidates(kept)
    assert scan_input_set(kept, cands["T0"]) is None
    guarded = gx.CostModel("gpu").decide(kept, cands["w"])
    assert not guarded.accept and "scan_guard" in guarded.reason, guarded
    report = gx.gt_inline_intermediates(kept, policy=gx.CostModel("gpu"))
    assert "w" not in [r.intermediate for r in report.applied], report.table()
    assert not report.applied and kept.hash_sdfg() == before, report.table()


@pytest.mark.compile
def test_a_second_level_input_goes_into_the_scans_loop_on_the_gpu_model_and_equals_numpy():
    """The GPU model (compiled for the CPU here) inlines `w` into the coefficients, then
    moves them into the scan's loop: no 2-D transient is left."""
    sdfg = build(upstream=True)
    w, v, ref = _run(copy.deepcopy(sdfg))
    report = gx.gt_inline_intermediates(sdfg, policy=gx.CostModel("gpu"), validate=True)
    assert sorted(r.intermediate for r in report.applied) == ["T0", "T1", "w"], report.table()
    assert two_d_transients(sdfg) == []
    _, _, got = _run(sdfg)
    np.testing.assert_allclose(got, ref, rtol=1e-14)
    np.testing.assert_allclose(got, _numpy(w, v), rtol=1e-14)


def test_reused_memory_declines_the_set_and_keeps_the_sdfg():
    """Under an allocator that reuses the arrays' memory (glibc's default below 32 MiB) the
    CPU saves no allocation to pay for the loop's scalar work: declined as any work moved
    into a scan's loop (docs/cost_model.md), and the SDFG is left as it was."""
    sdfg = build()
    before = sdfg.hash_sdfg()
    model = gx.CostModel("cpu", fresh_page_bytes=1 << 30)
    cands, _ = _candidates(sdfg)
    decision = model.decide(sdfg, cands["T0"])
    assert not decision.accept and "evaluated inside a scan's loop" in decision.reason
    report = gx.gt_inline_intermediates(sdfg, policy=model)
    assert not report.applied and sdfg.hash_sdfg() == before


def test_a_producer_reading_the_scans_output_declines():
    """The Map reads `out`, which the scan writes in the same state: evaluated inside the
    scan's loop it would read what the scan has just written. Declined, SDFG unchanged."""
    sdfg = build(producer_reads_out=True)
    before = sdfg.hash_sdfg()
    cands, _declines = _candidates(sdfg)
    assert "T0" not in cands, cands
    report = gx.gt_inline_intermediates(sdfg, policy=gx.InlineWhereSound())
    assert "T0" not in [r.intermediate for r in report.applied], report.table()
    if not report.applied:
        assert sdfg.hash_sdfg() == before
