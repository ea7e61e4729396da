"""`SweepPairFusion` (docs/scans.md): the forward sweep's outputs that the backward
sweep reads become a per-column buffer of one fused Map over the cells. Hand-built SDFGs
in the shape of gt4py's static build of icon4py's implicit solvers: a level-0 writer Map
(copies of a scalar into level 0 of `T` and `U`, and a side value the forward scan
reads), a forward-scan Map (a nested SDFG looping k = 1..K-1 writing `T[i, 1:K]`,
`U[i, 1:K]`), a backward-scan Map (a nested SDFG looping k = K-1..0 reading `T[i, 0:K]`,
`U[i, 0:K]`)."""

import copy
import dataclasses

import dace
import numpy as np
import pytest
from dace.sdfg.state import LoopRegion

import gt4py_dace_xforms as gx  # noqa: F401  # registers the library's transformations
from gt4py_dace_xforms.analysis.producer import Decline
from gt4py_dace_xforms.analysis.sweep_pair import sweep_pair_plan
from gt4py_dace_xforms.policy.cost_model import GpuShape
from gt4py_dace_xforms.tools.compare import two_d_transients
from gt4py_dace_xforms.transformations.inplace_update import gt_update_in_place
from gt4py_dace_xforms.transformations.output_buffer import gt_use_outputs_as_buffers
from gt4py_dace_xforms.transformations.sweep_pair import SweepPairFusion, gt_fuse_sweep_pairs


N, K = 7, 6
START = 2


def _forward(rows: int, first: int, extra_out: bool) -> dace.SDFG:
    """`p = 0.5 p + a[i, k] + s[i]`, `q = 0.3 q + a[i, k]` for k = first..K-1, from `z`;
    `t[k - first] = p`, `u[k - first] = q` (and `last = p` where `extra_out`)."""
    inner = dace.SDFG("forward")
    inner.add_symbol("i", dace.int32)
    inner.add_array("a", (N, K), dace.float64)
    inner.add_array("s", (rows,), dace.float64)
    inner.add_array("z", (1,), dace.float64)
    inner.add_array("t", (K - first,), dace.float64)
    inner.add_array("u", (K - first,), dace.float64)
    if extra_out:
        inner.add_array("last", (1,), dace.float64)
    inner.add_scalar("p", dace.float64, transient=True)
    inner.add_scalar("q", dace.float64, transient=True)
    init = inner.add_state("init", is_start_block=True)
    tl = init.add_tasklet("init", {"__z"}, {"__p", "__q"}, "__p = __z\n__q = __z")
    init.add_edge(init.add_access("z"), None, tl, "__z", dace.Memlet("z[0]"))
    init.add_edge(tl, "__p", init.add_access("p"), None, dace.Memlet("p[0]"))
    init.add_edge(tl, "__q", init.add_access("q"), None, dace.Memlet("q[0]"))
    loop = LoopRegion("fwd", f"k < {K}", "k", f"k = {first}", "k = k + 1")
    inner.add_node(loop)
    inner.add_edge(init, loop, dace.InterstateEdge())
    body = loop.add_state("step", is_start_block=True)
    tl = body.add_tasklet(
        "step",
        {"__p", "__q", "__a", "__s"},
        {"__po", "__qo", "__t", "__u"},
        "__po = 0.5 * __p + __a + __s\n__qo = 0.3 * __q + __a\n__t = __po\n__u = __qo",
    )
    body.add_edge(body.add_access("p"), None, tl, "__p", dace.Memlet("p[0]"))
    body.add_edge(body.add_access("q"), None, tl, "__q", dace.Memlet("q[0]"))
    body.add_edge(body.add_access("a"), None, tl, "__a", dace.Memlet("a[i, k]"))
    body.add_edge(body.add_access("s"), None, tl, "__s", dace.Memlet(f"s[i - {START}]"))
    body.add_edge(tl, "__po", body.add_access("p"), None, dace.Memlet("p[0]"))
    body.add_edge(tl, "__qo", body.add_access("q"), None, dace.Memlet("q[0]"))
    body.add_edge(tl, "__t", body.add_access("t"), None, dace.Memlet(f"t[k - {first}]"))
    body.add_edge(tl, "__u", body.add_access("u"), None, dace.Memlet(f"u[k - {first}]"))
    if extra_out:
        done = inner.add_state("done")
        inner.add_edge(loop, done, dace.InterstateEdge())
        c = done.add_tasklet("last", {"__p"}, {"__l"}, "__l = __p")
        done.add_edge(done.add_access("p"), None, c, "__p", dace.Memlet("p[0]"))
        done.add_edge(c, "__l", done.add_access("last"), None, dace.Memlet("last[0]"))
    return inner


def _backward(whole: bool) -> dace.SDFG:
    """`w = t[k] + u[k] w (+ b)`, `r[k] = w` for k = K-1..0, `w` from 0; `whole`: `t`
    is the whole array, read at `t[i - START, k]`, as gt4py passes a scan its fields."""
    inner = dace.SDFG("backward")
    inner.add_symbol("i", dace.int32)
    inner.add_array("t", (N - START, K) if whole else (K,), dace.float64)
    inner.add_array("u", (K,), dace.float64)
    inner.add_array("b", (1,), dace.float64)
    inner.add_array("r", (K,), dace.float64)
    inner.add_scalar("w", dace.float64, transient=True)
    init = inner.add_state("init", is_start_block=True)
    tl = init.add_tasklet("zero", {}, {"__w"}, "__w = 0.0")
    init.add_edge(tl, "__w", init.add_access("w"), None, dace.Memlet("w[0]"))
    loop = LoopRegion("bwd", "k >= 0", "k", f"k = {K - 1}", "k = k - 1")
    inner.add_node(loop)
    inner.add_edge(init, loop, dace.InterstateEdge())
    body = loop.add_state("step", is_start_block=True)
    tl = body.add_tasklet(
        "step",
        {"__w", "__t", "__u", "__b"},
        {"__wo", "__r"},
        "__wo = __t + 0.5 * __u * __w + __b\n__r = __wo",
    )
    body.add_edge(body.add_access("w"), None, tl, "__w", dace.Memlet("w[0]"))
    body.add_edge(
        body.add_access("t"),
        None,
        tl,
        "__t",
        dace.Memlet(f"t[i - {START}, k]" if whole else "t[k]"),
    )
    body.add_edge(body.add_access("u"), None, tl, "__u", dace.Memlet("u[k]"))
    body.add_edge(body.add_access("b"), None, tl, "__b", dace.Memlet("b[0]"))
    body.add_edge(tl, "__wo", body.add_access("w"), None, dace.Memlet("w[0]"))
    body.add_edge(tl, "__r", body.add_access("r"), None, dace.Memlet("r[k]"))
    return inner


def build(
    read_shift: int = 0,
    first: int = 1,
    other_reader: bool = False,
    in_between: bool = False,
    rewrites_input: bool = False,
    whole_read: bool = False,
) -> dace.SDFG:
    """The three Maps over `START:N - read_shift`; `T`, `U` hold the columns from `START`.

    Hostile variants: `read_shift` (the reader reads the next iteration's column of `T`),
    `first=2` (level 1 written by nobody), `other_reader` (another Map reads `T`),
    `in_between` (the forward scan also writes `P`; a Map turns it into `Q`, which the
    backward scan reads), `rewrites_input` (`z`, which the level-0 writer copies, is
    written again later in the state). `whole_read`: the backward scan gets `T` whole
    (`gt_fuse_sweep_pairs(narrow_columns=True)` narrows it first)."""
    sdfg = dace.SDFG(
        f"sweep_pair_{read_shift}_{first}_{other_reader}_{in_between}_{rewrites_input}_{whole_read}"
    )
    rows = N - START
    hi = N - read_shift
    rng = {"i": f"{START}:{hi}"}
    col = f"i - {START}"
    sdfg.add_array("a", (N, K), dace.float64)
    sdfg.add_array("z", (1,), dace.float64)
    sdfg.add_array("out", (N, K), dace.float64)
    for name in ("T", "U"):
        sdfg.add_array(name, (rows, K), dace.float64, transient=True)
    sdfg.add_array("S", (rows,), dace.float64, transient=True)
    sdfg.add_array("zero", (1,), dace.float64, transient=True)
    st = sdfg.add_state("s")
    a, z, out = st.add_access("a"), st.add_access("z"), st.add_access("out")
    tn, un, sn = st.add_access("T"), st.add_access("U"), st.add_access("S")
    zero = st.add_access("zero")
    zt = st.add_tasklet("zero", {}, {"__o"}, "__o = 0.0")
    st.add_edge(zt, "__o", zero, None, dace.Memlet("zero[0]"))
    # the level-0 writer: T[i, 0] = U[i, 0] = z, S[i] = 0.1 i
    le, lx = st.add_map("level0", rng)
    for name, node in (("T", tn), ("U", un)):
        c = st.add_tasklet(f"copy_{name}", {"__in"}, {"__out"}, "__out = __in")
        st.add_memlet_path(z, le, c, dst_conn="__in", memlet=dace.Memlet("z[0]"))
        st.add_memlet_path(c, lx, node, src_conn="__out", memlet=dace.Memlet(f"{name}[{col}, 0]"))
    c = st.add_tasklet("side", {}, {"__out"}, "__out = 0.1 * i")
    st.add_memlet_path(le, c, memlet=dace.Memlet())
    st.add_memlet_path(c, lx, sn, src_conn="__out", memlet=dace.Memlet(f"S[{col}]"))
    # the forward scan
    fe, fx = st.add_map("forward_map", rng)
    outs = {"t": None, "u": None, **({"last": None} if in_between else {})}
    fwd = st.add_nested_sdfg(
        _forward(rows, first, in_between),
        {"a": None, "s": None, "z": None},
        outs,
        symbol_mapping={"i": "i"},
    )
    st.add_memlet_path(a, fe, fwd, dst_conn="a", memlet=dace.Memlet(f"a[0:{N}, 0:{K}]"))
    st.add_memlet_path(sn, fe, fwd, dst_conn="s", memlet=dace.Memlet(f"S[0:{rows}]"))
    st.add_memlet_path(z, fe, fwd, dst_conn="z", memlet=dace.Memlet("z[0]"))
    st.add_memlet_path(fwd, fx, tn, src_conn="t", memlet=dace.Memlet(f"T[{col}, {first}:{K}]"))
    st.add_memlet_path(fwd, fx, un, src_conn="u", memlet=dace.Memlet(f"U[{col}, {first}:{K}]"))
    b_src, b_memlet = zero, "zero[0]"
    if in_between:
        sdfg.add_array("P", (rows,), dace.float64, transient=True)
        sdfg.add_array("Q", (rows,), dace.float64, transient=True)
        pn, qn = st.add_access("P"), st.add_access("Q")
        st.add_memlet_path(fwd, fx, pn, src_conn="last", memlet=dace.Memlet(f"P[{col}]"))
        xe, xx = st.add_map("in_between", rng)
        x = st.add_tasklet("halve", {"__p"}, {"__q"}, "__q = 0.5 * __p")
        st.add_memlet_path(pn, xe, x, dst_conn="__p", memlet=dace.Memlet(f"P[{col}]"))
        st.add_memlet_path(x, xx, qn, src_conn="__q", memlet=dace.Memlet(f"Q[{col}]"))
        b_src, b_memlet = qn, f"Q[{col}]"
    # the backward scan
    be, bx = st.add_map("backward_map", rng)
    bwd = st.add_nested_sdfg(
        _backward(whole_read),
        {"t": None, "u": None, "b": None},
        {"r": None},
        symbol_mapping={"i": "i"},
    )
    t_read = f"T[0:{rows}, 0:{K}]" if whole_read else f"T[{col} + {read_shift}, 0:{K}]"
    st.add_memlet_path(tn, be, bwd, dst_conn="t", memlet=dace.Memlet(t_read))
    st.add_memlet_path(un, be, bwd, dst_conn="u", memlet=dace.Memlet(f"U[{col}, 0:{K}]"))
    st.add_memlet_path(b_src, be, bwd, dst_conn="b", memlet=dace.Memlet(b_memlet))
    st.add_memlet_path(bwd, bx, out, src_conn="r", memlet=dace.Memlet(f"out[i, 0:{K}]"))
    if other_reader:
        sdfg.add_array("top", (N,), dace.float64)
        oe, ox = st.add_map("other_reader", rng)
        c = st.add_tasklet("peek", {"__t"}, {"__o"}, "__o = __t")
        st.add_memlet_path(tn, oe, c, dst_conn="__t", memlet=dace.Memlet(f"T[{col}, {K - 1}]"))
        st.add_memlet_path(
            c, ox, st.add_access("top"), src_conn="__o", memlet=dace.Memlet("top[i]")
        )
    if rewrites_input:
        c = st.add_tasklet("rewrite_z", {"__o"}, {"__z"}, "__z = __o + 1.0")
        st.add_edge(out, None, c, "__o", dace.Memlet(f"out[{START}, 0]"))
        st.add_edge(c, "__z", st.add_access("z"), None, dace.Memlet("z[0]"))
    sdfg.validate()
    return sdfg


def _numpy(a: np.ndarray, z: float, start: int = START, hi: int = N) -> np.ndarray:
    out = np.zeros((N, K))
    for i in range(start, hi):
        t, u = np.zeros(K), np.zeros(K)
        t[0] = u[0] = p = q = z
        for k in range(1, K):
            p = 0.5 * p + a[i, k] + 0.1 * i
            q = 0.3 * q + a[i, k]
            t[k], u[k] = p, q
        w = 0.0
        for k in range(K - 1, -1, -1):
            w = t[k] + 0.5 * u[k] * w
            out[i, k] = w
    return out


def _reader(sdfg):
    st = sdfg.start_state
    return st, next(
        n
        for n in st.nodes()
        if isinstance(n, dace.nodes.MapEntry) and n.map.label == "backward_map"
    )


def test_the_plan_takes_both_columns_and_the_forward_scan_whole():
    sdfg = build()
    st, reader = _reader(sdfg)
    plan = sweep_pair_plan(sdfg, st, reader)
    assert not isinstance(plan, Decline), plan.reason
    assert sorted(plan.names) == ["T", "U"]
    writers = {w.entry.map.label: (w.whole, len(w.nodes)) for w in plan.writers}
    assert writers == {"forward_map": (True, 1), "level0": (False, 2)}  # S stays with level0


def test_fused_no_field_sized_array_left():
    sdfg = build()
    assert two_d_transients(sdfg) == ["T", "U"]
    assert gt_fuse_sweep_pairs(sdfg, narrow_columns=False).sweep_pairs_fused == 1
    sdfg.validate()
    assert two_d_transients(sdfg) == []
    cols = {n: d.shape for n, d in sdfg.arrays.items() if n.startswith("__sweep_col_")}
    assert cols == {"__sweep_col_T": (K,), "__sweep_col_U": (K,)}
    maps = sorted(
        n.map.label for n in sdfg.start_state.nodes() if isinstance(n, dace.nodes.MapEntry)
    )
    assert maps == ["backward_map", "level0"]  # the forward scan is inside the backward scan's Map
    st, reader = _reader(sdfg)
    assert st.scope_dict()[next(n for n in st.data_nodes() if n.data == "__sweep_col_T")] is reader
    assert (
        gt_fuse_sweep_pairs(sdfg, narrow_columns=False).sweep_pairs_fused == 0
    )  # nothing left to fuse


def test_the_transformation_route_and_only():
    """Restricted to `U`, it declines: the forward scan computes `T` too and cannot move
    without it. Both named, it applies."""
    sdfg = build()
    before = sdfg.hash_sdfg()
    assert (
        sdfg.apply_transformations_repeated(SweepPairFusion, options={"intermediates": {"U"}}) == 0
    )
    assert sdfg.hash_sdfg() == before
    assert (
        sdfg.apply_transformations_repeated(SweepPairFusion, options={"intermediates": {"T", "U"}})
        == 1
    )
    assert two_d_transients(sdfg) == []


def test_a_whole_array_read_is_narrowed_first():
    """gt4py passes the scan `T` whole: the fusion declines, and with `narrow_columns` the
    read is narrowed to the column (NestedColumnRead's proof) and then fused."""
    sdfg = build(whole_read=True)
    before = sdfg.hash_sdfg()
    st, reader = _reader(sdfg)
    plan = sweep_pair_plan(sdfg, st, reader)
    assert isinstance(plan, Decline) and "one column, the iteration's own" in plan.reason
    assert (
        gt_fuse_sweep_pairs(sdfg, narrow_columns=False).sweep_pairs_fused == 0
        and sdfg.hash_sdfg() == before
    )
    assert gt_fuse_sweep_pairs(sdfg, narrow_columns=True).sweep_pairs_fused == 1
    assert two_d_transients(sdfg) == []


@pytest.mark.compile
@pytest.mark.parametrize("whole_read", [False, True], ids=["column-read", "whole-array-read"])
def test_fused_computes_the_same(whole_read):
    rng = np.random.default_rng(3)
    a, z = rng.random((N, K)), rng.random(1)
    want = _numpy(a, float(z[0]))
    reference = build(whole_read=whole_read)
    fused = copy.deepcopy(reference)
    assert gt_fuse_sweep_pairs(fused, narrow_columns=whole_read).sweep_pairs_fused == 1
    results = {}
    for label, s in (("reference", reference), ("fused", fused)):
        out = np.zeros((N, K))
        s(a=a.copy(), z=z.copy(), out=out)
        results[label] = out
        np.testing.assert_allclose(out, want, rtol=1e-13, err_msg=label)
    np.testing.assert_array_equal(results["fused"], results["reference"])


HOSTILE = [
    (dict(read_shift=1), "one column, the iteration's own"),
    (dict(first=2), "uncovered"),
    (dict(other_reader=True), "has a reader other than"),
    (dict(in_between=True), "also feeds"),
    (dict(rewrites_input=True), "is also written in the state"),
]
HOSTILE_IDS = [
    "neighbour-column",
    "gap-in-the-levels",
    "another-reader",
    "map-in-between",
    "input-rewritten-later",
]


@pytest.mark.parametrize("variant, reason", HOSTILE, ids=HOSTILE_IDS)
def test_hostile_variants_are_declined_unchanged(variant, reason):
    sdfg = build(**variant)
    before = sdfg.hash_sdfg()
    st, reader = _reader(sdfg)
    plan = sweep_pair_plan(sdfg, st, reader)
    assert isinstance(plan, Decline) and reason in plan.reason, plan
    assert gt_fuse_sweep_pairs(sdfg, narrow_columns=False).sweep_pairs_fused == 0
    assert sdfg.apply_transformations_repeated(SweepPairFusion) == 0
    assert sdfg.hash_sdfg() == before


def test_never_raises_and_declines_unchanged_on_the_fixtures():
    """Every top-level Map of the stored SDFG fixtures (gt4py's, symbolic and static):
    the matcher answers without raising, and where nothing is fused nothing changes."""
    import pathlib

    root = pathlib.Path(__file__).resolve().parents[1] / "sdfg_fixtures"
    for path in sorted(root.glob("*.sdfg")):
        sdfg = dace.SDFG.from_file(str(path))
        before = sdfg.hash_sdfg()
        for state in sdfg.states():
            for node in state.nodes():
                if isinstance(node, dace.nodes.MapEntry):
                    match = SweepPairFusion()
                    match.setup_match(
                        sdfg,
                        sdfg.cfg_id,
                        state.block_id,
                        {SweepPairFusion.reader: state.node_id(node)},
                        0,
                    )
                    match.can_be_applied(state, 0, sdfg)
        if gt_fuse_sweep_pairs(sdfg, narrow_columns=False).sweep_pairs_fused == 0:
            assert sdfg.hash_sdfg() == before, path.name


# --- the implicit solvers (structure only, R2B4 size, no compilation) -------------------------

SOLVERS = [
    (
        "vertically_implicit_solver_at_corrector_step",
        ["gtir_tmp_148", "gtir_tmp_154"],
        ["gtir_tmp_144", "gtir_tmp_168"],
    ),
    (
        "vertically_implicit_solver_at_predictor_step",
        ["gtir_tmp_207", "gtir_tmp_213"],
        ["gtir_tmp_203", "gtir_tmp_227"],
    ),
]


@pytest.mark.icon4py
@pytest.mark.parametrize("solver, pair, next_w", SOLVERS, ids=["corrector", "predictor"])
def test_the_solvers_sweep_pairs_become_column_buffers(solver, pair, next_w):
    """Stock's static build on a limited-area decomposed rank, at TopLevelDataFlowPost: the
    backward scan gets the forward scan's two arrays whole; narrowed, the level-0 writer's
    copies and the forward scan move into its Map, and both arrays are gone. (Compiled and
    compared with stock at 512 x 20: docs/scans.md.) Then `next_w`'s chain: the
    Rayleigh damping's concat node is folded into the back substitution's result, updated
    in place, which becomes `next_w` (docs/inplace_update.md; compiled and compared with
    stock at 2048 x 20 by the substep bench: equal within 4e-15)."""
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
        f"icon4py.model.atmosphere.dycore.stencils.vertically_implicit_dycore_solver:{solver}"
    )
    provider = explain.offset_provider(
        program, static_offset_provider(program, layout="lam-decomposed")
    )
    static = program_static_values(program, layout="lam-decomposed")
    sdfg = capture_stages(program, [post], offset_provider=provider, static_args=static)[post]
    before = two_d_transients(sdfg)
    assert set(pair) <= set(before)
    assert (
        gt_fuse_sweep_pairs(sdfg, names=pair, narrow_columns=False).sweep_pairs_fused == 0
    )  # the reads are of the whole arrays
    assert gt_fuse_sweep_pairs(sdfg, narrow_columns=True).sweep_pairs_fused == 1
    assert two_d_transients(sdfg) == sorted(set(before) - set(pair))
    assert sorted(n for n in sdfg.arrays if n.startswith("__sweep_col_")) == [
        f"__sweep_col_{n}" for n in pair
    ]
    result, damped = next_w
    assert gt_update_in_place(sdfg, validate=True).updated_in_place == [damped]
    assert gt_use_outputs_as_buffers(sdfg, names=[result]).outputs_as_buffers == [result]
    sdfg.validate()
    assert two_d_transients(sdfg) == sorted(set(before) - set(pair) - set(next_w))


def test_the_pipeline_hook_asks_the_policy():
    """`optimization_hooks` fuses sweep pairs at gt4py's `TopLevelDataFlowPost` where the
    policy takes them: the CPU cost model does (nothing recomputed), with one report
    record per buffer; so does the GPU model where the columns of one SM's resident
    threads fit its L1 (5 columns of 96 B here), and it declines them where they do not,
    leaving the SDFG as it was, whole-array reads included (the GPU keeps those)."""
    from gt4py.next.program_processors.runners.dace.transformations import GT4PyAutoOptHook

    from gt4py_dace_xforms.integration.hooks import optimization_hooks

    post = GT4PyAutoOptHook.TopLevelDataFlowPost
    reports = []
    sdfg = build()
    optimization_hooks(gx.CostModel("cpu"), reports=reports)[post](sdfg)
    assert two_d_transients(sdfg) == []
    (report,) = reports
    assert sorted((r.intermediate, r.mode) for r in report.applied) == [
        ("T", "sweep_pair"),
        ("U", "sweep_pair"),
    ]
    assert (
        report.applied[0].reason.startswith("sweep pair: ")
        and "recomputes nothing" in report.applied[0].reason
    )

    for whole_read in (False, True):
        reports = []
        gpu = build(whole_read=whole_read)
        optimization_hooks(gx.CostModel("gpu"), gpu=True, reports=reports)[post](gpu)
        assert two_d_transients(gpu) == [], whole_read
        (record, _) = reports[0].applied
        assert (
            "a local array per GPU thread: 64 resident threads per SM hold 6 KiB of columns"
            in record.reason
        )
        assert (
            record.figures["gpu_threads_per_sm"] == 64
            and record.figures["gpu_column_bytes_per_sm"] == 64 * 96
        )

        small = gx.CostModel("gpu", gpu_shape=GpuShape(l1_bytes=4096))
        gpu = build(whole_read=whole_read)
        before = gpu.hash_sdfg()
        reports = []
        optimization_hooks(small, gpu=True, reports=reports)[post](gpu)
        assert gpu.hash_sdfg() == before, whole_read
        declined = [r for r in reports[0].records if not r.applied]
        assert sorted(r.intermediate for r in declined) == ["T", "U"]
        assert (
            "hold 6 KiB of columns, the SM's L1 4 KiB: the columns would spill"
            in declined[0].reason
        )


def test_the_gpu_prices_the_columns_per_sm():
    """The GPU model's footprint: 64-thread blocks spread over the SMs, at most 2048
    threads per SM, each holding its columns; a column of a length unknown when the kernel
    is compiled is declined (a local array has a constant size). `sweep_pairs` True takes
    every plan on the GPU too, False none."""
    sdfg = build()
    plan = sweep_pair_plan(sdfg, *_reader(sdfg))
    decide = gx.CostModel("gpu").decide_sweep_pair
    assert decide(sdfg, plan).accept
    two_sms = gx.CostModel("gpu", gpu_shape=GpuShape(sms=2, block_threads=2, l1_bytes=4 * 96))
    # 5 columns in blocks of 2: 3 blocks, 2 on the busiest SM: 4 threads x 96 B fit
    assert two_sms.decide_sweep_pair(sdfg, plan).figures["gpu_threads_per_sm"] == 4
    assert two_sms.decide_sweep_pair(sdfg, plan).accept
    one_sm = gx.CostModel("gpu", gpu_shape=GpuShape(sms=1, block_threads=2, l1_bytes=4 * 96))
    no = one_sm.decide_sweep_pair(sdfg, plan)
    assert not no.accept and no.figures["gpu_threads_per_sm"] == 6
    capped = gx.CostModel(
        "gpu", gpu_shape=GpuShape(sms=1, block_threads=2, max_threads_per_sm=4, l1_bytes=4 * 96)
    )
    assert capped.decide_sweep_pair(sdfg, plan).accept

    nlev = dace.symbol("nlev")
    symbolic = dataclasses.replace(
        plan, buffers=tuple(dataclasses.replace(b, shape=(nlev,)) for b in plan.buffers)
    )
    no = decide(sdfg, symbolic)
    assert not no.accept and "the columns' length depends on nlev" in no.reason
    assert gx.CostModel("gpu", sweep_pairs=True).decide_sweep_pair(sdfg, symbolic).accept
    assert not gx.CostModel("cpu", sweep_pairs=False).decide_sweep_pair(sdfg, plan).accept
    assert not gx.CostModel("gpu", sweep_pairs=False).fuses_sweep_pairs(sdfg)


def test_a_sweep_pair_hook_that_raises_leaves_the_sdfg_as_it_was(monkeypatch):
    """The fail-safe (docs/failsafe.md): whatever the failing pass changed is undone, one
    `LibraryFailureWarning` says so, and the report carries the message."""
    from gt4py.next.program_processors.runners.dace.transformations import GT4PyAutoOptHook

    from gt4py_dace_xforms.integration import failsafe, hooks

    def broken(sdfg, **_):
        sdfg.add_transient("__junk", (1,), dace.float64)  # a change the fail-safe must undo
        raise RuntimeError("boom")

    monkeypatch.setenv(failsafe.STRICT_ENV, "0")
    monkeypatch.setattr(hooks, "gt_fuse_sweep_pairs", broken)
    sdfg = build()
    before = sdfg.hash_sdfg()
    reports = []
    with pytest.warns(failsafe.LibraryFailureWarning, match="RuntimeError: boom"):
        hooks.optimization_hooks(gx.CostModel("cpu"), reports=reports)[
            GT4PyAutoOptHook.TopLevelDataFlowPost
        ](sdfg)
    assert sdfg.hash_sdfg() == before and "__junk" not in sdfg.arrays
    assert reports[0].failures and "boom" in reports[0].failures[0]
