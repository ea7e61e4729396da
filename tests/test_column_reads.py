"""`NestedColumnRead` (docs/scans.md): a scan that reads only the column of its Map
iteration gets only that column, and gt4py's Map fusion can then fuse the Map writing
the columns with it. Hand-built SDFGs in gt4py's shape: a column Map (a nested SDFG per
cell writing `T[i, 0:K]`, as a vertical window does), then a scan Map whose nested SDFG
receives `T[0:i + 1, 0:K]` whole and reads `t[i, k]` in a loop over K."""

import copy

import dace
import numpy as np
import pytest
from dace.sdfg.state import LoopRegion
from gt4py.next.program_processors.runners.dace import transformations as gtx_transformations

import gt4py_dace_xforms as gx
from gt4py_dace_xforms.analysis.column_reads import column_read_plan
from gt4py_dace_xforms.analysis.producer import Decline
from gt4py_dace_xforms.tools.compare import two_d_transients


N, K = 6, 5


def _column_producer() -> dace.SDFG:
    """`o[k] = 2 a[k] + 1` over one column."""
    inner = dace.SDFG("col")
    inner.add_array("a", (K,), dace.float64)
    inner.add_array("o", (K,), dace.float64)
    loop = LoopRegion("levels", f"k < {K}", "k", "k = 0", "k = k + 1")
    inner.add_node(loop, is_start_block=True)
    body = loop.add_state("level", is_start_block=True)
    t = body.add_tasklet("lvl", {"__a"}, {"__o"}, "__o = 2.0 * __a + 1.0")
    body.add_edge(body.add_access("a"), None, t, "__a", dace.Memlet("a[k]"))
    body.add_edge(t, "__o", body.add_access("o"), None, dace.Memlet("o[k]"))
    return inner


def _scan(read: str, writes_input: bool = False, rows: int = N) -> dace.SDFG:
    """`s = 0.5 s + t[read]; r[k] = s` for k in 0..K, `t` the whole array, `s` from 0."""
    inner = dace.SDFG("scan")
    inner.add_symbol("i", dace.int32)
    inner.add_array("t", (rows, K), dace.float64)
    inner.add_array("r", (K,), dace.float64)
    inner.add_scalar("s", dace.float64, transient=True)
    init = inner.add_state("init", is_start_block=True)
    z = init.add_tasklet("zero", {}, {"__s"}, "__s = 0.0")
    init.add_edge(z, "__s", init.add_access("s"), None, dace.Memlet("s[0]"))
    loop = LoopRegion("sweep", f"k < {K}", "k", "k = 0", "k = k + 1")
    inner.add_node(loop)
    inner.add_edge(init, loop, dace.InterstateEdge())
    body = loop.add_state("step", is_start_block=True)
    tl = body.add_tasklet(
        "step", {"__s", "__t"}, {"__s_out", "__r"}, "__s_out = 0.5 * __s + __t\n__r = __s_out"
    )
    body.add_edge(body.add_access("s"), None, tl, "__s", dace.Memlet("s[0]"))
    body.add_edge(body.add_access("t"), None, tl, "__t", dace.Memlet(f"t[{read}]"))
    body.add_edge(tl, "__s_out", body.add_access("s"), None, dace.Memlet("s[0]"))
    body.add_edge(tl, "__r", body.add_access("r"), None, dace.Memlet("r[k]"))
    if writes_input:  # a write of the array it receives (declined)
        w = body.add_tasklet("clobber", {}, {"__x"}, "__x = 0.0")
        body.add_edge(w, "__x", body.add_access("t"), None, dace.Memlet("t[i, k]"))
    return inner


def build(
    read: str = "i, k",
    memlet: str = "0:i + 1, 0:K",
    writes_input: bool = False,
    dynamic: bool = False,
    start: int = 0,
):
    """`start`: both Maps run over `start:N` and `T` holds only those columns, from its
    first point (`T[i - start]`), as gt4py lays out a transient of a domain that does not
    start at 0 (the scan then reads `t[i - start, k]` through `T[0:i - start + 1]`)."""
    sdfg = dace.SDFG(f"column_read_{abs(hash((read, memlet, writes_input, dynamic, start)))}")
    sdfg.add_array("a", (N, K), dace.float64)
    sdfg.add_array("out", (N, K), dace.float64)
    sdfg.add_array("T", (N - start, K), dace.float64, transient=True)
    st = sdfg.add_state("s")
    a, tn, out = st.add_access("a"), st.add_access("T"), st.add_access("out")
    col_index = f"i - {start}" if start else "i"
    # the column producer
    me, mx = st.add_map("columns", {"i": f"{start}:{N}"})
    col = st.add_nested_sdfg(_column_producer(), {"a": None}, {"o": None})
    st.add_memlet_path(a, me, col, dst_conn="a", memlet=dace.Memlet(f"a[i, 0:{K}]"))
    st.add_memlet_path(col, mx, tn, src_conn="o", memlet=dace.Memlet(f"T[{col_index}, 0:{K}]"))
    # the scan, given T as gt4py gives it
    se, sx = st.add_map("scan_map", {"i": f"{start}:{N}"})
    scan = st.add_nested_sdfg(
        _scan(read, writes_input, rows=N - start),
        {"t": None},
        {"r": None, **({"t": None} if writes_input else {})},
        symbol_mapping={"i": "i"},
    )
    st.add_memlet_path(
        tn,
        se,
        scan,
        dst_conn="t",
        memlet=dace.Memlet(f"T[{memlet.replace('K', str(K))}]", dynamic=dynamic),
    )
    st.add_memlet_path(scan, sx, out, src_conn="r", memlet=dace.Memlet(f"out[i, 0:{K}]"))
    if writes_input:
        st.add_memlet_path(
            scan, sx, st.add_access("T"), src_conn="t", memlet=dace.Memlet(f"T[{col_index}, 0:{K}]")
        )
    sdfg.validate()
    return sdfg


#: The scan over `START:N`, `T` laid out from `START` (gt4py's transients of an inner domain).
START = 2
OFFSET = dict(start=START, read=f"i - {START}, k", memlet=f"0:i - {START - 1}, 0:K")


def _scan_edge(sdfg):
    st = sdfg.start_state
    node = next(n for n in st.nodes() if isinstance(n, dace.nodes.NestedSDFG) and n.label == "scan")
    return st, next(e for e in st.in_edges(node) if e.dst_conn == "t")


def _numpy(start: int = 0):
    """The input and `out` (zero outside the columns `start:N` the Maps run over)."""
    a = np.random.default_rng(0).random((N, K))
    t = 2.0 * a + 1.0
    out = np.zeros((N, K))
    s = np.zeros(N)
    for k in range(K):
        s = 0.5 * s + t[:, k]
        out[start:, k] = s[start:]
    return a, out


def test_the_plan_holds_and_the_scan_gets_one_column():
    sdfg = build()
    st, edge = _scan_edge(sdfg)
    plan = column_read_plan(sdfg, st, edge)
    assert not isinstance(plan, Decline), plan.reason
    assert (plan.dim, plan.param, plan.connector) == (0, "i", "t")
    assert gx.gt_narrow_column_reads(sdfg).column_reads == [("T", "scan")]
    sdfg.validate()
    st, edge = _scan_edge(sdfg)
    assert str(edge.data.subset) == f"i, 0:{K}"
    assert tuple(edge.dst.sdfg.arrays["t"].shape) == (K,)
    # what the narrowing is for: gt4py's Map fusion now fuses the column Map with the scan
    assert two_d_transients(sdfg) == ["T"]
    fused = sdfg.apply_transformations_repeated(
        gtx_transformations.MapFusionVertical(only_toplevel_maps=True)
    )
    assert fused == 1 and two_d_transients(sdfg) == []
    sdfg.validate()


def test_a_transient_laid_out_from_the_domains_first_point():
    """gt4py's scans over an inner domain (`start_cell_nudging:end_cell_local`) read
    `t[i - start, k]` through `T[0:i - start + 1]`: the column is `i - start`."""
    sdfg = build(**OFFSET)
    st, edge = _scan_edge(sdfg)
    plan = column_read_plan(sdfg, st, edge)
    assert not isinstance(plan, Decline), plan.reason
    assert (plan.dim, plan.param, str(plan.index)) == (0, "i", f"i - {START}")
    assert gx.gt_narrow_column_reads(sdfg).column_reads == [("T", "scan")]
    sdfg.validate()
    st, edge = _scan_edge(sdfg)
    assert str(edge.data.subset) == f"i - {START}, 0:{K}"
    fused = sdfg.apply_transformations_repeated(
        gtx_transformations.MapFusionVertical(only_toplevel_maps=True)
    )
    assert fused == 1 and two_d_transients(sdfg) == []


def test_a_neighbour_column_is_narrowed_but_not_fused():
    """A scan that reads column `i + 1` gets that column alone (it reads nothing else);
    the column Map writes column `i`, so gt4py's Map fusion still does not fuse them."""
    sdfg = build(read="i + 1, k", memlet="0:i + 2, 0:K")
    assert gx.gt_narrow_column_reads(sdfg).column_reads == [("T", "scan")]
    sdfg.validate()
    _st, edge = _scan_edge(sdfg)
    assert str(edge.data.subset) == f"i + 1, 0:{K}"
    assert (
        sdfg.apply_transformations_repeated(
            gtx_transformations.MapFusionVertical(only_toplevel_maps=True)
        )
        == 0
    )
    assert two_d_transients(sdfg) == ["T"]


def test_without_it_gt4py_does_not_fuse():
    sdfg = build()
    assert (
        sdfg.apply_transformations_repeated(
            gtx_transformations.MapFusionVertical(only_toplevel_maps=True)
        )
        == 0
    )
    assert two_d_transients(sdfg) == ["T"]


@pytest.mark.compile
@pytest.mark.parametrize("variant", [{}, OFFSET], ids=["from-0", "from-the-domain-start"])
def test_narrowed_and_fused_compute_the_same(variant):
    a, want = _numpy(variant.get("start", 0))
    reference = build(**variant)
    narrowed = build(**variant)
    assert narrowed.apply_transformations_repeated(gx.NestedColumnRead) == 1
    fused = copy.deepcopy(narrowed)
    assert (
        fused.apply_transformations_repeated(
            gtx_transformations.MapFusionVertical(only_toplevel_maps=True)
        )
        == 1
    )
    for s in (reference, narrowed, fused):
        out = np.zeros((N, K))
        s(a=a.copy(), out=out)
        np.testing.assert_allclose(out, want, rtol=1e-14, err_msg=s.name)


HOSTILE = [
    (dict(read="2 * i, k", memlet="0:2 * i + 1, 0:K"), "at the Map's index"),
    (dict(read="k, k"), "at the Map's index"),
    (dict(writes_input=True), "writes 't'"),
    (dict(dynamic=True), "dynamic"),
]
HOSTILE_IDS = [
    "twice-the-index",
    "index-from-the-loop-variable",
    "nested-sdfg-writes-it",
    "dynamic-memlet",
]


@pytest.mark.parametrize("variant, reason", HOSTILE, ids=HOSTILE_IDS)
def test_hostile_variants_are_declined_unchanged(variant, reason):
    sdfg = build(**variant)
    before = sdfg.hash_sdfg()
    st, edge = _scan_edge(sdfg)
    plan = column_read_plan(sdfg, st, edge)
    assert isinstance(plan, Decline) and reason in plan.reason, plan
    assert gx.gt_narrow_column_reads(sdfg).column_reads == []
    assert sdfg.apply_transformations_repeated(gx.NestedColumnRead) == 0
    assert sdfg.hash_sdfg() == before


def test_can_be_applied_never_raises_on_a_broken_match():
    sdfg = build()
    st, edge = _scan_edge(sdfg)
    xf = gx.NestedColumnRead()
    xf.setup_match(
        sdfg,
        sdfg.cfg_id,
        sdfg.node_id(st),
        {
            gx.NestedColumnRead.map_entry: st.node_id(edge.src),
            gx.NestedColumnRead.nested: st.node_id(edge.dst),
        },
        0,
    )
    del edge.dst.sdfg.arrays[
        "t"
    ]  # the nested SDFG lost its array: the analysis fails, the matcher declines
    assert xf.can_be_applied(st, 0, sdfg) is False


def test_policies_and_report():
    assert gx.CostModel("cpu").column_reads_on and not gx.CostModel("gpu").column_reads_on
    assert (
        gx.CostModel("gpu", column_reads=True).column_reads_on
        and gx.InlineWhereSound().column_reads
    )
    assert not gx.CostModel("cpu", column_reads=False).column_reads_on
    from gt4py_dace_xforms.policy.default import InlineOnly

    assert not InlineOnly(("T",)).narrows_column_reads(build())
    sdfg = build()
    report = gx.gt_inline_intermediates(sdfg, policy=gx.CostModel("cpu", column_reads=True))
    assert report.column_reads == [("T", "scan")]
    assert "column read (the scan gets one column of it): T in scan" in report.table()
    off = build()
    assert gx.gt_inline_intermediates(off, policy=gx.CostModel("gpu")).column_reads == []


def test_transformation_properties_round_trip_and_it_is_registered():
    from dace.transformation.transformation import PatternTransformation

    assert gx.NestedColumnRead in PatternTransformation.subclasses_recursive()
    xf = gx.NestedColumnRead()
    assert type(xf).from_json(xf.to_json()).to_json() == xf.to_json()
