"""install() / uninstall(): gt4py's own run_dace_cpu runs the inliner, then is stock again."""

import gt4py.next as gtx
import numpy as np
import pytest
from gt4py.next import Dims
from gt4py.next.ffront.experimental import concat_where
from gt4py.next.program_processors.runners.dace import transformations as gtx_transformations
from gt4py.next.program_processors.runners.dace.workflow.backend import run_dace_cpu

import gt4py_dace_xforms as gx
from gt4py_dace_xforms.integration import compat, install as inst


Cell = gtx.Dimension("Cell")
K = gtx.Dimension("K", kind=gtx.DimensionKind.VERTICAL)
F = gtx.Field[Dims[Cell, K], gtx.float64]


# Two programs with the same meaning but different source, so neither run reuses the
# other's compiled artifact from gt4py's build cache.
@gtx.field_operator
def _vd_a(a: F, b: F) -> F:
    theta = concat_where(K < 1, b * 2.0, a + 1.0)
    return theta(K + 1) - theta


@gtx.program
def program_installed(a: F, b: F, out: F):
    _vd_a(a, b, out=out, domain={Cell: (0, 8), K: (0, 9)})


@gtx.field_operator
def _vd_b(a: F, b: F) -> F:
    theta2 = concat_where(K < 1, b * 2.0, a + 1.0)
    return theta2(K + 1) - theta2


@gtx.program
def program_uninstalled(a: F, b: F, out: F):
    _vd_b(a, b, out=out, domain={Cell: (0, 8), K: (0, 9)})


def _run(program):
    rng = np.random.default_rng(2)
    a, b = (gtx.as_field([Cell, K], rng.random((8, 10))) for _ in range(2))
    out = gtx.zeros({Cell: 8, K: 10}, dtype=gtx.float64)
    program.with_backend(run_dace_cpu)(a, b, out, offset_provider={})
    t = np.where(np.arange(10)[None, :] < 1, 2.0 * b.asnumpy(), a.asnumpy() + 1.0)
    np.testing.assert_allclose(out.asnumpy()[:, :9], t[:, 1:] - t[:, :-1], rtol=1e-13)


def test_install_twice_then_uninstall_restores_the_originals():
    original, lower = gtx_transformations.gt_auto_optimize, compat.lowering_entry()
    try:
        gx.install()
        gx.install()
        assert gtx_transformations.gt_auto_optimize is not original and inst.installed()
    finally:
        gx.uninstall()
    gx.uninstall()
    assert gtx_transformations.gt_auto_optimize is original
    assert compat.lowering_entry() is lower


@pytest.mark.compile
def test_stock_backend_runs_the_inliner_only_while_installed():
    inst.RECENT.clear()
    gx.install()
    try:
        _run(program_installed)
    finally:
        gx.uninstall()
    assert len(inst.RECENT) == 1
    record = inst.RECENT[0]
    assert any(r.applied for r in record["reports"]) and record["transients"] == 0
    _run(program_uninstalled)
    assert len(inst.RECENT) == 1  # stock again: the wrapper did not run
