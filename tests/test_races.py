"""Racy input SDFGs (issue 32): gt4py's SDFG accesses an array through two AccessNodes of
one state with no path between them, so the order is undefined. The library finds it
(`analysis.races`), declines every rewrite in that state or on that array, says so once
per program, and leaves the outputs exactly as stock computes them."""

import copy
import warnings

import dace
import gt4py.next as gtx
import numpy as np
import pytest
from gt4py.next import Dims
from gt4py.next.program_processors.runners.dace.transformations.auto_optimize import (
    GT4PyAutoOptHook,
)

import gt4py_dace_xforms as gx
from gt4py_dace_xforms.analysis.races import race_problem, unordered_accesses
from gt4py_dace_xforms.integration.capture import capture_stages
from gt4py_dace_xforms.integration.hooks import UnorderedAccessWarning
from gt4py_dace_xforms.tools.compare import inline_build, stock_build


Cell = gtx.Dimension("Cell")
K = gtx.Dimension("K", kind=gtx.DimensionKind.VERTICAL)
F = gtx.Field[Dims[Cell, K], gtx.float64]


@gtx.field_operator
def _f(a: F, b: F) -> tuple[F, F]:
    t = 2.0 * a + b
    return t, t(K + 1) - t


@gtx.field_operator
def _g2(t: F, d: F) -> F:
    return t(K + 1) - d


@gtx.scan_operator(axis=K, forward=True, init=0.0)
def _acc(state: gtx.float64, upper: gtx.float64, d: gtx.float64) -> gtx.float64:
    return 0.5 * state + upper - d


@gtx.field_operator
def _g2_scan(t: F, d: F) -> F:
    return _acc(t(K + 1), d)


@gtx.field_operator
def _h(d: F) -> F:
    return 5.0 * d


@gtx.program
def written_read_overwritten(a: F, b: F, t_out: F, d_out: F, e_out: F):
    _f(a, b, out=(t_out, d_out), domain={Cell: (0, 32), K: (0, 7)})
    _g2(t_out, d_out, out=e_out, domain={Cell: (0, 32), K: (0, 6)})
    _h(d_out, out=t_out, domain={Cell: (0, 32), K: (0, 7)})


@gtx.program
def written_scanned_overwritten(a: F, b: F, t_out: F, d_out: F, e_out: F):
    _f(a, b, out=(t_out, d_out), domain={Cell: (0, 32), K: (0, 7)})
    _g2_scan(t_out, d_out, out=e_out, domain={Cell: (0, 32), K: (0, 6)})
    _h(d_out, out=t_out, domain={Cell: (0, 32), K: (0, 7)})


PROGRAMS = {"field_operator": written_read_overwritten, "scan": written_scanned_overwritten}
OUTPUTS = ("t_out", "d_out", "e_out")


# ---- the analysis on hand-built states ----------------------------------------------------


def _two_writers(
    *, ordered: bool = False, second: str = "0:4", read_only: bool = False
) -> dace.SDFG:
    """Two Maps write (or, `read_only`, read) `x` through their own AccessNodes; with
    `ordered`, an empty edge orders the second after the first."""
    sdfg = dace.SDFG("two_writers")
    sdfg.add_array("x", [8], dace.float64)
    sdfg.add_array("y", [8], dace.float64)
    sdfg.add_array("z", [8], dace.float64)
    st = sdfg.add_state("s")
    nodes = []
    for n, rng in enumerate(("0:4", second)):
        acc = st.add_access("x")
        if read_only:
            st.add_mapped_tasklet(
                f"r{n}",
                {"i": rng},
                {"__i": dace.Memlet("x[i]")},
                "__o = __i",
                {"__o": dace.Memlet(f"{'yz'[n]}[i]")},
                external_edges=True,
                input_nodes={"x": acc},
            )
        else:
            st.add_mapped_tasklet(
                f"w{n}",
                {"i": rng},
                {},
                f"__o = {n}.0",
                {"__o": dace.Memlet("x[i]")},
                external_edges=True,
                output_nodes={"x": acc},
            )
        nodes.append(acc)
    if ordered:
        second_entry = next(
            n
            for n in st.nodes()
            if isinstance(n, dace.nodes.MapEntry) and n.map.label.startswith("w1")
        )
        st.add_nedge(nodes[0], second_entry, dace.Memlet())
    sdfg.validate()
    return sdfg


def test_two_unordered_writes_of_one_region_are_found():
    [race] = unordered_accesses(_two_writers())
    assert (race.data, race.kind, race.state) == ("x", "write/write", "s")
    assert "'x'" in race.reason and "'s'" in race.reason


@pytest.mark.parametrize("shape", ["ordered", "disjoint", "read_only"])
def test_ordered_disjoint_or_read_only_accesses_are_no_race(shape):
    sdfg = _two_writers(
        ordered=shape == "ordered",
        second="4:8" if shape == "disjoint" else "0:4",
        read_only=shape == "read_only",
    )
    assert unordered_accesses(sdfg) == []


def test_race_problem_names_the_state_and_the_array():
    sdfg = _two_writers()
    state = sdfg.states()[0]
    assert race_problem(sdfg, [state]).data == "x"
    assert race_problem(sdfg, (), ["x"]).state == "s"
    assert race_problem(sdfg, (), ["y"]) is None


# ---- gt4py's racy programs -----------------------------------------------------------------


@pytest.fixture(scope="module", params=sorted(PROGRAMS))
def first_step(request):
    program = PROGRAMS[request.param]
    taken = capture_stages(
        program, [(GT4PyAutoOptHook.TopLevelDataFlowStep, 1)], offset_provider={}
    )
    return taken[(GT4PyAutoOptHook.TopLevelDataFlowStep, 1)]


def test_gt4py_emits_the_race_on_t_out(first_step):
    races = unordered_accesses(first_step)
    assert [r.data for r in races] == ["t_out"], races


def test_every_rewrite_in_the_racy_state_is_declined_unchanged(first_step):
    sdfg = copy.deepcopy(first_step)
    before = sdfg.hash_sdfg()
    report = gx.gt_inline_intermediates(sdfg, policy=gx.InlineWhereSound())
    assert not report.applied and not report.writebacks_retargeted, report.table()
    assert sdfg.hash_sdfg() == before
    assert any("'t_out' has an unordered" in r.reason for r in report.declined), report.table()
    assert gx.gt_remove_copy_chains(sdfg).copy_chains_removed == 0 and sdfg.hash_sdfg() == before


@pytest.mark.compile
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_racy_program_equals_stock_bit_for_bit_with_one_warning(name):
    program = PROGRAMS[name]
    rng = np.random.default_rng(5)
    inputs = {n: rng.random((32, 8)) for n in ("a", "b")}

    def run(build):
        args = {n: gtx.as_field([Cell, K], v.copy()) for n, v in inputs.items()}
        args |= {n: gtx.as_field([Cell, K], np.zeros((32, 8))) for n in OUTPUTS}
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            program.with_backend(build.backend)(**args, offset_provider={})
        return {n: args[n].asnumpy() for n in OUTPUTS}, [
            w for w in caught if w.category is UnorderedAccessWarning
        ]

    ref, none = run(stock_build())
    assert not none
    for policy in (None, gx.InlineWhereSound()):
        build = inline_build(policy=policy)
        got, warned = run(build)
        for n in OUTPUTS:
            assert np.array_equal(got[n], ref[n]), n
        assert len(warned) == 1 and "'t_out'" in str(warned[0].message), [
            str(w.message) for w in warned
        ]
        assert build.report.races and "'t_out'" in build.report.races[0]
        assert not build.report.applied and not build.report.writebacks_retargeted, (
            build.report.table()
        )


def test_explain_and_the_report_table_name_the_race():
    from gt4py_dace_xforms.tools.explain import explain

    text = explain(written_read_overwritten).text()
    assert "undefined order" in text and "'t_out' has an unordered write/write" in text, text
    report = gx.InlineReport(races=["'t_out' has an unordered write/write in state 's'"])
    assert "unordered access, left as it is: 't_out'" in report.table()
