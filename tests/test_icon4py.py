"""The measured target, compiled stock and with the inliner: all nine outputs agree."""

import icon4py_target as target  # bench/icon4py_target.py
import numpy as np
import pytest

from gt4py_dace_xforms.tools.compare import inline_build, stock_build, two_d_transients


pytestmark = [
    pytest.mark.compile,
    pytest.mark.icon4py,
    pytest.mark.skipif(not target.available(), reason="icon4py is not installed"),
]

N_CELLS, N_LEVELS = 256, 20


@pytest.fixture(scope="module")
def runs():
    """Both builds compiled once; each run on both pressure-gradient settings."""
    results = {}
    builds = {"stock": stock_build(), "inlined": inline_build()}
    for name, build in builds.items():
        for taylor_hydro in (True, False):
            args = target.make_args(N_CELLS, N_LEVELS, seed=3, taylor_hydro=taylor_hydro)
            target.program().with_backend(build.backend)(**args, offset_provider={})
            results[(name, taylor_hydro)] = {k: args[k].asnumpy() for k in target.OUTPUTS}
    return builds, results


@pytest.mark.parametrize("taylor_hydro", [True, False])
def test_all_nine_outputs_equal_stock(runs, taylor_hydro):
    _, results = runs
    for name in target.OUTPUTS:
        stock = results[("stock", taylor_hydro)][name]
        # Rounding only (FMA contraction once inlined): relative to the field's magnitude,
        # since differences of O(1) values can cancel to O(1e-4).
        np.testing.assert_allclose(
            results[("inlined", taylor_hydro)][name],
            stock,
            rtol=1e-13,
            atol=1e-14 * np.abs(stock).max(),
            err_msg=name,
        )


def test_fewer_2d_transients_than_stock(runs):
    builds, _ = runs
    stock = two_d_transients(builds["stock"].sdfg)
    inlined = two_d_transients(builds["inlined"].sdfg)
    print(
        f"\n2-D transients after gt4py's top-level stage: stock {len(stock)}, inlined {len(inlined)}"
    )
    print(builds["inlined"].report.table())
    assert len(stock) == 9
    assert len(inlined) < len(stock)
    assert builds["inlined"].report.applied
