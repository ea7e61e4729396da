"""Copy chains gt4py's `CopyChainRemover` cannot prove whole (docs/copy_chains.md): the
coverage proof (`analysis/copy_cover.py`), `ProvenCopyChainRemover` on a hand-built chain
(applied and run against the original for empty and non-empty domains; a short copy left
alone; nothing raised), and a nested `concat_where` lowered from gt4py, compiled with the
library's backend against stock and numpy."""

from __future__ import annotations

import copy

import dace
import gt4py.next as gtx
import numpy as np
import pytest
from builders import run
from dace import subsets as sbs
from gt4py.next import Dims
from gt4py.next.ffront.experimental import concat_where
from gt4py.next.program_processors.runners.dace.transformations import (
    redundant_array_removers as gt_rar,
)
from gt4py.next.program_processors.runners.dace.transformations.auto_optimize import (
    GT4PyAutoOptHook,
)
from gt4py_helpers import run_out

from gt4py_dace_xforms.analysis.copy_cover import copy_covers_array
from gt4py_dace_xforms.integration.capture import capture_stages
from gt4py_dace_xforms.tools.compare import inline_build, stock_build, two_d_transients
from gt4py_dace_xforms.transformations import copy_chain
from gt4py_dace_xforms.transformations.copy_chain import (
    ProvenCopyChainRemover,
    gt_remove_copy_chains,
)


# ---- the proof --------------------------------------------------------------------------

GT4PY_SHAPE = ["Max(0, he - hs)", "Max(0, -Max(1, vs) + Min(nlev, ve))"]


@pytest.mark.parametrize(
    "subset, shape, covers",
    [
        # gt4py's temporary and its copy: equal for every symbol value, not syntactically
        ("0:Max(0, he - hs), 0:-Max(1, vs) + Max(1, vs, Min(nlev, ve))", GT4PY_SHAPE, True),
        ("0:N, 0:K", ["N", "K"], True),
        ("0:he - hs, 0:K", ["Max(0, he - hs)", "K"], True),  # he < hs: the array is empty
        ("0:N, 0:K - 1", ["N", "K"], False),  # one level short
        ("1:N, 0:K", ["N", "K"], False),  # does not start at 0
        ("0:N, 0:K + 1", ["N", "K"], False),  # longer than the array: not the same elements
        ("0:N:2, 0:K", ["N", "K"], False),  # strided
        ("0:N", ["N", "K"], False),  # rank mismatch
    ],
)
def test_copy_covers_array(subset, shape, covers):
    assert copy_covers_array(sbs.Range.from_string(subset), shape) is covers


# ---- a hand-built chain -----------------------------------------------------------------

FULL_COPY = "Max(1, vs, ve) - Max(1, vs)"


def _chain(name: str, copy_len: str = FULL_COPY) -> dace.SDFG:
    """A Map writes levels `Max(1, vs)..ve` of `a * 2` into `tmp` (gt4py's shape for it),
    and `tmp[:, 0:copy_len]` is copied into `out` at level `Max(1, vs)`."""
    sdfg = dace.SDFG(name)
    for s in ("N", "K", "vs", "ve"):
        sdfg.add_symbol(s, dace.int32)
    sdfg.add_array("a", ["N", "K"], dace.float64)
    sdfg.add_array("out", ["N", "K"], dace.float64)
    sdfg.add_transient("tmp", ["N", "Max(0, ve - Max(1, vs))"], dace.float64)
    st = sdfg.add_state("main")
    tmp = st.add_access("tmp")
    st.add_mapped_tasklet(
        "producer", {"i": "0:N", "k": "Max(1, vs):ve"}, {"__a": dace.Memlet("a[i, k]")}, "__o = 2.0 * __a",
        {"__o": dace.Memlet("tmp[i, k - Max(1, vs)]")}, external_edges=True, output_nodes={"tmp": tmp},
    )  # fmt: skip
    st.add_edge(tmp, None, st.add_access("out"), None,
                dace.Memlet(f"tmp[0:N, 0:{copy_len}]", other_subset=f"0:N, Max(1, vs):Max(1, vs) + {copy_len}"))  # fmt: skip
    sdfg.validate()
    return sdfg


def test_gt4py_leaves_the_chain_and_the_proof_folds_it():
    sdfg = _chain("chain_gt4py")
    assert gt_rar.gt_remove_copy_chain(copy.deepcopy(sdfg)) is None  # Range.covers cannot tell
    assert gt_remove_copy_chains(sdfg).copy_chains_removed == 1
    sdfg.validate()
    assert "tmp" not in sdfg.arrays
    [writer] = [
        e for st in sdfg.states() for e in st.edges() if isinstance(e.dst, dace.nodes.MapExit)
    ]
    assert writer.data.data == "out"  # the Map writes the output directly


@pytest.mark.compile
def test_folded_chain_computes_what_the_chain_did():
    before = _chain("chain_run")
    after = copy.deepcopy(before)
    assert gt_remove_copy_chains(after).copy_chains_removed == 1
    rng = np.random.default_rng(3)
    n, k = 6, 9
    arrays = {"a": rng.random((n, k)), "out": rng.random((n, k))}
    # both domains, an empty one (ve == vs) and a negative one (ve < vs)
    for vs, ve in ((0, k), (3, 7), (4, 4), (6, 2)):
        symbols = {"N": n, "K": k, "vs": vs, "ve": ve}
        ref = run(before, "before", arrays, symbols)["out"]
        got = run(after, "after", arrays, symbols)["out"]
        np.testing.assert_array_equal(got, ref)
        untouched = [lv for lv in range(k) if not max(1, vs) <= lv < ve]
        np.testing.assert_array_equal(got[:, untouched], arrays["out"][:, untouched])


def test_short_copy_leaves_the_sdfg_unchanged():
    sdfg = _chain("chain_short", copy_len=f"{FULL_COPY} - 1")
    before = sdfg.to_json()
    assert gt_remove_copy_chains(sdfg).copy_chains_removed == 0
    assert sdfg.to_json() == before


def test_can_be_applied_does_not_raise(monkeypatch):
    """gt_auto_optimize matches with `match_exception=True`: a failing proof is a decline."""

    def broken(*_a, **_k):
        raise RuntimeError("boom")

    monkeypatch.setattr(copy_chain, "copy_covers_array", broken)
    sdfg = _chain("chain_raise")
    before = sdfg.to_json()
    with dace.config.set_temporary("optimizer", "match_exception", value=True):
        assert gt_remove_copy_chains(sdfg).copy_chains_removed == 0
    assert sdfg.to_json() == before


def test_usable_without_single_use_data_and_round_trips():
    """The viewer's and `apply_transformations`' route: constructed without arguments."""
    sdfg = _chain("chain_plain")
    assert sdfg.apply_transformations_repeated(ProvenCopyChainRemover, print_report=False) == 1
    assert "tmp" not in sdfg.arrays
    xform = ProvenCopyChainRemover()
    assert (
        type(dace.transformation.PatternTransformation.from_json(xform.to_json()))
        is ProvenCopyChainRemover
    )


def test_listed_by_the_optimizer_the_viewer_uses():
    from dace.transformation.optimizer import SDFGOptimizer

    sdfg = _chain("chain_viewer")
    [match] = [
        m
        for m in SDFGOptimizer(sdfg).get_pattern_matches()
        if isinstance(m, ProvenCopyChainRemover)
    ]
    match.apply_pattern(append=False)
    sdfg.validate()
    assert "tmp" not in sdfg.arrays


# ---- a nested concat_where lowered from gt4py --------------------------------------------

Cell = gtx.Dimension("Cell")
K = gtx.Dimension("K", kind=gtx.DimensionKind.VERTICAL)
F64 = gtx.Field[Dims[Cell, K], gtx.float64]
NC, NL = 16, 10


@gtx.field_operator
def nested_concat(a: F64, b: F64, c: F64, nlev: gtx.int32) -> F64:
    return concat_where(K < 1, a * 2.0, concat_where(K == nlev, b + 1.0, c * a))


@gtx.program
def nested_concat_program(
    a: F64,
    b: F64,
    c: F64,
    out: F64,
    nlev: gtx.int32,
    vertical_start: gtx.int32,
    vertical_end: gtx.int32,
):
    nested_concat(a, b, c, nlev, out=out, domain={Cell: (0, 16), K: (vertical_start, vertical_end)})


def test_nested_concat_where_chain_folds_where_gt4py_leaves_it():
    step = (GT4PyAutoOptHook.TopLevelDataFlowStep, 1)
    sdfg = capture_stages(nested_concat_program, [step], offset_provider={})[step]
    stock = copy.deepcopy(sdfg)
    gt_rar.gt_remove_copy_chain(stock)
    assert len(two_d_transients(stock)) == len(two_d_transients(sdfg)) == 5
    assert gt_remove_copy_chains(sdfg).copy_chains_removed == 4
    sdfg.validate()
    assert len(two_d_transients(sdfg)) == 1


@pytest.mark.compile
def test_nested_concat_where_matches_stock_and_numpy():
    stock, library = stock_build(), inline_build()
    rng = np.random.default_rng(11)
    a, b, c = (gtx.as_field([Cell, K], rng.random((NC, NL + 1))) for _ in range(3))
    an, bn, cn = a.asnumpy(), b.asnumpy(), c.asnumpy()
    for nlev, vs, ve in ((NL, 0, NL + 1), (NL - 3, 1, NL - 1), (4, 0, 4)):
        init = rng.random((NC, NL + 1))
        args = dict(a=a, b=b, c=c, out=gtx.as_field([Cell, K], init), nlev=np.int32(nlev),
                    vertical_start=np.int32(vs), vertical_end=np.int32(ve))  # fmt: skip
        got, ref = (
            run_out(nested_concat_program, library, args),
            run_out(nested_concat_program, stock, args),
        )
        np.testing.assert_array_equal(got, ref)
        lv = np.arange(NL + 1)[None, :]
        want = np.where(lv < 1, an * 2.0, np.where(lv == nlev, bn + 1.0, cn * an))
        inside = (lv >= vs) & (lv < ve)
        np.testing.assert_array_equal(got, np.where(inside, want, init))
    assert sum(r.copy_chains_removed for r in library.reports) >= 4, [
        r.copy_chains_removed for r in library.reports
    ]
    assert len(two_d_transients(library.post_sdfgs[0])) < len(two_d_transients(stock.post_sdfgs[0]))
