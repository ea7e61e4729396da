"""Regressions found by the generated-program fuzzer (tests/test_fuzz_programs.py), each
reduced to the smallest SDFG or gt4py program that showed it."""

import dace
import numpy as np
import pytest
from builders import compare_before_after, deep
from gt4py.next.program_processors.runners.dace.transformations.map_splitter import MapSplitter

import gt4py_dace_xforms as gx


def _fused_two_output_producer() -> dace.SDFG:
    """The shape gt4py's MapFusion leaves: one Map computes `tmp` and `side`, each through
    a transient scalar inside the Map; only `tmp` is read at a shift by the consumer."""
    sdfg = dace.SDFG("fused_two_outputs")
    for name in ("a", "side", "out"):
        sdfg.add_array(name, ["N", "K"], dace.float64)
    sdfg.add_array("tmp", ["N", "K"], dace.float64, transient=True)
    for s in ("s_tmp", "s_side"):
        sdfg.add_scalar(s, dace.float64, transient=True)
    state = sdfg.add_state("main")
    a, tmp, side, out = (state.add_access(n) for n in ("a", "tmp", "side", "out"))
    me, mx = state.add_map("producer", dict(i="0:N", k="0:K"))
    for scalar, target, code in (
        ("s_tmp", tmp, "__o = 2.0 * __a + 1.0"),
        ("s_side", side, "__o = __a - 3.0"),
    ):
        t = state.add_tasklet(f"t_{scalar}", {"__a"}, {"__o"}, code)
        state.add_memlet_path(a, me, t, dst_conn="__a", memlet=dace.Memlet("a[i, k]"))
        acc = state.add_access(scalar)
        state.add_edge(t, "__o", acc, None, dace.Memlet(f"{scalar}[0]"))
        state.add_memlet_path(acc, mx, target, memlet=dace.Memlet(f"{target.data}[i, k]"))
    state.add_mapped_tasklet(
        "consumer",
        dict(i="0:N", k="0:K - 1"),
        inputs={"__t0": dace.Memlet("tmp[i, k + 1]"), "__t1": dace.Memlet("tmp[i, k]")},
        code="__o = __t0 - __t1",
        outputs={"__o": dace.Memlet("out[i, k]")},
        external_edges=True,
        input_nodes={"tmp": tmp},
        output_nodes={"out": out},
    )
    sdfg.validate()
    return sdfg


@pytest.mark.compile
def test_producer_output_through_scalar_inside_map_is_detached():
    """Found as `t0 = concat_where(K >= 12, a, 2.0) + concat_where(K >= 14, a, 0.5)`,
    `return t0(K + 3) + 1.5` on K (7, 11): removing the inlined output of a fused Map left
    the transient scalar that fed it a sink inside the Map, and the dead-dataflow cleanup
    asked that AccessNode for `has_side_effects` (AttributeError)."""
    before = _fused_two_output_producer()
    after = deep(before)
    report = gx.gt_inline_intermediates(after, policy=gx.InlineWhereSound())
    assert [r.removed_intermediate for r in report.applied] == [True], report.table()
    after.validate()
    assert "tmp" not in after.arrays and "s_tmp" not in after.arrays
    rng = np.random.default_rng(0)
    N, K = 4, 9
    arrays = {"a": rng.random((N, K)), "side": np.zeros((N, K)), "out": np.zeros((N, K))}
    compare_before_after(before, after, arrays, dict(N=N, K=K), outputs=("out", "side"))


def _kept_for_a_copy(k_start, k_stop) -> dace.SDFG:
    """gt4py's lowering of `t = a - a; return t(K + 1) * 3.0, t(K - 2)` on K (k_start, k_stop):
    a Map writes `tmp` on [k_start - 2, k_stop + 1), the consumer Map reads it at k + 1,
    a copy writes its first k_stop - k_start levels to `out1`."""
    sdfg = dace.SDFG("kept_for_a_copy")
    sdfg.add_symbol("k_start", dace.int32)
    sdfg.add_symbol("k_stop", dace.int32)
    n_tmp = f"({k_stop}) - ({k_start}) + 3"
    for name in ("a", "out0", "out1"):
        sdfg.add_array(name, ["N", "K"], dace.float64)
    sdfg.add_array("tmp", ["N", n_tmp], dace.float64, transient=True)
    state = sdfg.add_state("main")
    a, tmp, out0, out1 = (state.add_access(n) for n in ("a", "tmp", "out0", "out1"))
    state.add_mapped_tasklet(
        "producer",
        dict(i="0:N", k=f"{k_start} - 2:{k_stop} + 1"),
        inputs={"__a": dace.Memlet("a[i, k]")},
        code="__o = __a - 1.0",
        outputs={"__o": dace.Memlet(f"tmp[i, k - ({k_start}) + 2]")},
        external_edges=True,
        input_nodes={"a": a},
        output_nodes={"tmp": tmp},
    )
    state.add_mapped_tasklet(
        "consumer",
        dict(i="0:N", k=f"{k_start}:{k_stop}"),
        inputs={"__t": dace.Memlet(f"tmp[i, k - ({k_start}) + 3]")},
        code="__o = 3.0 * __t",
        outputs={"__o": dace.Memlet("out0[i, k]")},
        external_edges=True,
        input_nodes={"tmp": tmp},
        output_nodes={"out0": out0},
    )
    state.add_nedge(
        tmp,
        out1,
        dace.Memlet(
            data="tmp",
            subset=f"0:N, 0:{k_stop} - ({k_start})",
            other_subset=f"0:N, {k_start}:{k_stop}",
        ),
    )
    sdfg.validate()
    return sdfg


def test_kept_intermediate_that_map_splitter_cannot_split_is_declined():
    """Found with the sound policy (`t = a - a; return t(K + 1) * 3.0, t(K - 2)` on a
    runtime K range): inlining the Map consumer kept `tmp` for the copy alone, which
    reads a strict part of it. gt4py's MapSplitter then matched and asserted, as it
    cannot order `k_stop - k_start` against 0: the build failed where stock works."""
    sdfg = _kept_for_a_copy("k_start", "k_stop")
    report = gx.gt_inline_intermediates(sdfg, policy=gx.InlineWhereSound())
    assert not report.applied and "MapSplitter" in report.declined[0].reason, report.table()
    sdfg.apply_transformations_repeated(MapSplitter)  # what gt_auto_optimize runs next
    # With constant bounds nothing needs avoiding: the producer writes `out1` itself
    # (docs/retarget.md), or, with retargeting off, the copy into `out1` is written as a
    # Map and inlined too (docs/writeback.md); either way `tmp` goes and no producer is
    # left to split.
    sdfg = _kept_for_a_copy(3, 12)
    report = gx.gt_inline_intermediates(sdfg, policy=gx.InlineWhereSound())
    assert [(r.consumer, r.removed_intermediate) for r in report.applied] == [
        ("consumer_map", False)
    ], report.table()
    assert report.writebacks_retargeted == ["tmp"] and "tmp" not in sdfg.arrays
    assert sdfg.apply_transformations_repeated(MapSplitter) == 0
    sdfg = _kept_for_a_copy(3, 12)
    report = gx.gt_inline_intermediates(sdfg, policy=gx.InlineWhereSound(writeback_retarget=False))
    assert [(r.consumer, r.removed_intermediate) for r in report.applied] == [
        ("consumer_map", False),
        ("writeback_tmp_out1_map", True),
    ], report.table()
    assert "tmp" not in sdfg.arrays
    assert sdfg.apply_transformations_repeated(MapSplitter) == 0


@pytest.mark.compile
def test_generated_shape_with_neighbor_reads_of_a_local():
    """The fuzzer's neighbor reads (`t(C2C[j])`, indirect reads of a local, also shifted in K):
    stock, the library's builds and numpy agree, and "everything sound" inlines them."""
    from fuzzing.runner import check
    from fuzzing.strategy import NC, NL, Bin, Lit, Prog, Read

    t0 = Bin("+", Bin("*", Read("a"), Lit(2.0)), Read("b"))
    out = Bin("-", Read("t0", 0, 1), Read("t0", 1, 2))
    prog = Prog(
        dtype="float64",
        fields=("a", "b"),
        cells=(),
        scalars=(),
        levels=(),
        locals=(("t0", t0),),
        outputs=(out,),
        cell_domain=(0, NC),
        k_domain=(0, NL - 1),
        runtime_k_domain=False,
    )
    assert prog.uses_neighbors() and "t0(C2C[2])(K + 1)" in prog.source()
    outcome = check(prog, 0, ("stock", "sound", "cost_model"))
    assert outcome.applied["sound"] >= 1


@pytest.mark.compile
@pytest.mark.parametrize("flag", [True, False])
def test_generated_shape_with_a_local_chosen_by_an_if(flag):
    """The fuzzer's `Pick` (`if flag: t0 = ... else: t0 = ...`, the library's "selected"
    mode), one branch a concat_where: stock, the library's builds and numpy agree, and
    "everything sound" inlines the shifted reads of the local."""
    from fuzzing.runner import check
    from fuzzing.strategy import NC, NL, Bin, Cond, Lit, Pick, Prog, Read, Where

    t0 = Pick(
        "flag",
        Bin("*", Read("a"), Lit(2.0)),
        Where(Cond("<", 3), Read("b"), Bin("+", Read("a"), Read("b"))),
    )
    out = Bin("-", Read("t0", 1), Read("t0", -1))
    prog = Prog(
        dtype="float64",
        fields=("a", "b"),
        cells=(),
        scalars=(),
        levels=(),
        locals=(("t0", t0),),
        outputs=(out,),
        cell_domain=(0, NC),
        k_domain=(1, NL - 1),
        runtime_k_domain=False,
        flags=(("flag", flag),),
    )
    assert "    if flag:\n        t0 = a * 2.0\n    else:" in prog.source()
    outcome = check(prog, 0, ("stock", "sound", "cost_model"))
    assert outcome.applied["sound"] >= 1


@pytest.mark.compile
def test_generated_shape_with_a_scan_of_a_shifted_local():
    """The fuzzer's `Scan` (`return decay(t0(K + 1) - b)`, the library's nested reads: the
    scan's column is computed inside its loop): stock, the library's builds and numpy
    agree, and "everything sound" inlines the column."""
    from fuzzing.runner import check
    from fuzzing.strategy import NC, NL, Bin, Lit, Prog, Read, Scan

    t0 = Bin("+", Bin("*", Read("a"), Lit(2.0)), Read("b"))
    out = Scan(Bin("-", Read("t0", 1), Read("b")))
    prog = Prog(
        dtype="float64",
        fields=("a", "b"),
        cells=(),
        scalars=(),
        levels=(),
        locals=(("t0", t0),),
        outputs=(out,),
        cell_domain=(0, NC),
        k_domain=(2, NL - 1),
        runtime_k_domain=False,
    )
    assert "return decay(t0(K + 1) - b)" in prog.source()
    outcome = check(prog, 0, ("stock", "sound", "cost_model"))
    assert outcome.applied["sound"] >= 1


@pytest.mark.compile
def test_generated_concat_on_an_interior_domain_agrees_on_poisoned_inputs():
    """The fuzzer calls every build a second time on inputs that are NaN where gt4py's domain
    inference says the program does not read them (cells 0 and NC - 1, levels outside the
    reads of each branch here): stock, the inlined concat and numpy still agree."""
    from fuzzing.runner import POISONED, check
    from fuzzing.strategy import NC, NL, Bin, Cond, Lit, Prog, Read, Where

    t0 = Where(Cond("<", 4), Bin("*", Read("a"), Lit(2.0)), Bin("+", Read("b"), Lit(1.0)))
    out = Bin("-", Read("t0", 1), Read("t0", 0))
    prog = Prog(
        dtype="float64",
        fields=("a", "b"),
        cells=(),
        scalars=(),
        levels=(),
        locals=(("t0", t0),),
        outputs=(out,),
        cell_domain=(1, NC - 1),
        k_domain=(1, NL - 3),
        runtime_k_domain=False,
    )
    outcome = check(prog, 0, ("stock", "sound"))
    assert outcome.applied["sound"] >= 1
    assert {"stock" + POISONED, "sound" + POISONED} <= set(outcome.outputs)


@pytest.mark.compile
def test_generated_local_that_is_also_an_output():
    """The fuzzer's second output `t0` itself, which the first output reads shifted: gt4py
    computes `t0` on one level more than `out1` receives and copies it back (a write-back
    copy). Stock, the library's builds and numpy agree, and "everything sound" inlines the
    reader and lets the writers of `t0` write `out1` themselves (docs/retarget.md), so
    `t0` goes away."""
    from fuzzing.runner import check
    from fuzzing.strategy import NC, NL, Bin, Cond, Lit, Prog, Read, Where

    t0 = Where(Cond("<", 3), Bin("*", Read("a"), Lit(2.0)), Bin("+", Read("a"), Read("b")))
    out = Bin("-", Read("t0", 1), Read("b"))
    prog = Prog(
        dtype="float64",
        fields=("a", "b"),
        cells=(),
        scalars=(),
        levels=(),
        locals=(("t0", t0),),
        outputs=(out, Read("t0")),
        cell_domain=(0, NC),
        k_domain=(0, NL - 1),
        runtime_k_domain=False,
    )
    assert "return t0(K + 1) - b, t0" in prog.source()
    outcome = check(prog, 0, ("stock", "sound", "cost_model"))
    assert outcome.applied["sound"] >= 1 and outcome.retargeted["sound"] == 1, (
        outcome.applied,
        outcome.retargeted,
    )


@pytest.mark.compile
def test_generated_nested_concat_on_a_runtime_domain_folds_its_copy_chain():
    """The fuzzer's nested `concat_where` on a K domain passed at run time (`k_start`,
    `k_stop`): gt4py sizes the branches `Max(0, k_stop - Max(3, k_start))` and its
    `CopyChainRemover` cannot prove the copies whole; the library's builds fold the chain
    (docs/copy_chains.md), and stock, both library builds and numpy agree."""
    from fuzzing.runner import check
    from fuzzing.strategy import NC, NL, Bin, Cond, Lit, Prog, Read, Where

    inner = Where(Cond("<", 6), Bin("+", Read("a"), Read("b")), Bin("*", Read("b"), Lit(0.5)))
    t0 = Where(Cond("<", 3), Bin("*", Read("a"), Lit(2.0)), inner)
    prog = Prog(
        dtype="float64",
        fields=("a", "b"),
        cells=(),
        scalars=(),
        levels=(),
        locals=(("t0", t0),),
        outputs=(Read("t0"),),
        cell_domain=(0, NC),
        k_domain=(1, NL - 2),
        runtime_k_domain=True,
    )
    assert "concat_where(K < 3, a * 2.0, concat_where(K < 6, a + b, b * 0.5))" in prog.source()
    outcome = check(prog, 0, ("stock", "sound", "cost_model"))
    assert outcome.folded["cost_model"] >= 1 and outcome.folded["sound"] >= 1, outcome.folded


@pytest.mark.compile
def test_generated_local_split_in_cell_and_k_on_static_zones():
    """The fuzzer's layouts of Cell zones (`Prog.zones`), static as icon4py's setup_program
    compiles its bounds: `t0 = concat_where(Cell < end_cell_local, concat_where(K < 3, ...),
    ...)` read at K + 1 over (start_cell_nudging, end_cell_halo) = (1, 5). Stock's build
    keeps t0 as two pieces (cells [1, 3) split at level 3, cells [3, 5)); the library's
    proves the pieces cover every read (analysis.boxes) and removes them. Stock, the
    library's builds and numpy agree."""
    from fuzzing.runner import check, load
    from fuzzing.strategy import NC, NL, ZONES, Bin, Cond, Lit, Prog, Read, Where
    from gt4py.next.program_processors.runners.dace.transformations.auto_optimize import (
        GT4PyAutoOptHook,
    )

    from gt4py_dace_xforms.integration.capture import capture_stages
    from gt4py_dace_xforms.integration.hooks import optimization_hooks
    from gt4py_dace_xforms.tools.compare import two_d_transients
    from gt4py_dace_xforms.tools.static import static_args

    inner = Where(Cond("<", 3), Bin("*", Read("a"), Lit(2.0)), Bin("+", Read("b"), Read("a", 1)))
    t0 = Where(Cond("<", 0, "end_cell_local", dim="Cell"), inner, Bin("*", Read("a"), Lit(0.5)))
    prog = Prog(
        dtype="float64",
        fields=("a", "b"),
        cells=(),
        scalars=(),
        levels=(),
        locals=(("t0", t0),),
        outputs=(Bin("-", Read("t0", 1), Read("t0")),),
        cell_domain=(0, NC),
        k_domain=(0, NL - 2),
        runtime_k_domain=False,
        static=True,
        zones=tuple(zip(ZONES, (1, 2, 3, 5))),
        out_cells=(("start_cell_nudging", "end_cell_halo"),),
    )
    assert (
        "concat_where(Cell < end_cell_local, concat_where(K < 3, a * 2.0, b + a(K + 1)), a * 0.5)"
        in prog.source()
    )
    post = (GT4PyAutoOptHook.TopLevelDataFlowPost, 1)
    static = static_args(prog.call_args(0))
    stock = two_d_transients(
        capture_stages(load(prog), [post], offset_provider={}, static_args=static)[post]
    )
    library = two_d_transients(
        capture_stages(
            load(prog),
            [post],
            offset_provider={},
            static_args=static,
            optimization_hooks=optimization_hooks(),
        )[post]
    )
    assert len(stock) == 2 and all("_split_" in n for n in stock), stock  # t0's two pieces
    assert set(stock) - set(library), (stock, library)
    outcome = check(prog, 0, ("stock", "sound", "cost_model"))
    assert outcome.applied["sound"] >= 1 and outcome.applied["cost_model"] >= 1, outcome.applied


@pytest.mark.compile
def test_generated_scan_in_a_cell_split_at_run_time_on_a_run_time_k_domain():
    """Found by the fuzzer's run-time bounds (issue 60, item 3), reduced from two scans split
    at `nc` on a K domain passed at run time: `return concat_where(Cell >= nc, decay(b(K + 1)),
    b)` on K (k_start, k_stop). Stock builds it and equals numpy; the library's builds (cost
    model, sound, window) raised `InvalidSDFGNodeError: Missing symbols on nested SDFG:
    ['nc']` (the scan's nested SDFG) in strict mode. With `nc` or the K domain a constant
    they build."""
    from fuzzing.runner import ALL_BUILDS, check
    from fuzzing.strategy import NC, Cond, Prog, Read, Scan, Where

    out = Where(Cond(">=", 0, "nc", dim="Cell"), Scan(Read("b", 1)), Read("b"))
    prog = Prog(
        dtype="float64",
        fields=("b",),
        cells=(),
        scalars=(),
        levels=(("nc", 2),),
        locals=(),
        outputs=(out,),
        cell_domain=(0, NC),
        k_domain=(1, 16),
        runtime_k_domain=True,
    )
    assert "return concat_where(Cell >= nc, decay(b(K + 1)), b)" in prog.source()
    check(prog, 0, ALL_BUILDS)
