"""gt4py programs compiled with stock dace and with the inliner: same results, fewer transients."""

import gt4py.next as gtx
import numpy as np
import pytest

from gt4py_dace_xforms.cli import demo
from gt4py_dace_xforms.tools.compare import inline_build, stock_build, two_d_transients


pytestmark = pytest.mark.compile

NCELLS, NLEV = 64, 20


@pytest.fixture(scope="module")
def three_level_sum_runs():
    """Compile `t + t(K+1) + t(K+2)` once per backend; every test here shares the builds."""
    rng = np.random.default_rng(1)
    a, b = rng.random((NCELLS, NLEV)), rng.random((NCELLS, NLEV))
    runs = {}
    for name, build in {"stock": stock_build(), "inlined": inline_build()}.items():
        out = gtx.zeros({demo.Cell: NCELLS, demo.K: NLEV}, dtype=gtx.float64)
        demo.three_level_sum_program.with_backend(build.backend)(
            gtx.as_field([demo.Cell, demo.K], a),
            gtx.as_field([demo.Cell, demo.K], b),
            out,
            np.int32(NLEV),
            offset_provider={},
        )
        runs[name] = (build, out.asnumpy())
    return a, b, runs


def test_reads_at_k_k1_k2_equal_stock_and_numpy(three_level_sum_runs):
    a, b, runs = three_level_sum_runs
    expected = demo._three_level_sum_numpy(a, b, NLEV)
    np.testing.assert_array_equal(runs["inlined"][1], runs["stock"][1])
    np.testing.assert_allclose(runs["inlined"][1][:, : NLEV - 2], expected, rtol=1e-14)


def test_reads_at_k_k1_k2_leave_no_2d_transient(three_level_sum_runs):
    _, _, runs = three_level_sum_runs
    assert len(two_d_transients(runs["stock"][0].sdfg)) == 1
    assert two_d_transients(runs["inlined"][0].sdfg) == []


def test_reads_at_k_k1_k2_one_copy_per_distinct_offset(three_level_sum_runs):
    _, _, runs = three_level_sum_runs
    report = runs["inlined"][0].report
    shifted = [r for r in report.applied if any(s != ("0", "0") for s in r.shifts)]
    # The k+2 reader and the {k, k+1} reader: three distinct offsets in total, one copy each.
    assert sorted(s for r in shifted for s in r.shifts) == [("0", "0"), ("0", "1"), ("0", "2")]


def test_demo_passes(capsys):
    assert (
        demo.run_demo(target=False, substep=False) == 0
    )  # the icon4py target and the substep: make demo
    assert "demo: OK" in capsys.readouterr().out
