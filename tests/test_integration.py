"""Hooks into gt_auto_optimize (chaining with user hooks) and the ready backends."""

import fixture_lib
import gt4py.next as gtx
import numpy as np
import pytest
from gt4py.next.program_processors.runners.dace.transformations.auto_optimize import (
    GT4PyAutoOptHook,
)

import gt4py_dace_xforms as gx
from gt4py_dace_xforms import backends
from gt4py_dace_xforms.cli import demo
from gt4py_dace_xforms.tools.compare import two_d_transients


def _args(nlev=20):
    f = lambda: gtx.as_field([demo.Cell, demo.K], np.random.default_rng(0).random((64, nlev)))  # noqa: E731
    return [f(), f(), f(), np.int32(nlev)]


def test_user_hook_at_the_same_stage_is_chained_not_dropped():
    order, reports = [], []
    user = {
        GT4PyAutoOptHook.TopLevelDataFlowStep: lambda sdfg: order.append("user"),
        GT4PyAutoOptHook.TopLevelDataFlowPost: lambda sdfg: order.append("post"),
    }
    hooks = gx.optimization_hooks(user_hooks=user, reports=reports)

    def library_then(sdfg, _inner=hooks[GT4PyAutoOptHook.TopLevelDataFlowStep]):
        n = len(reports)
        _inner(sdfg)
        assert len(reports) == n + 1  # the library's pass ran before the user's hook
        order.append("checked")

    hooks[GT4PyAutoOptHook.TopLevelDataFlowStep] = library_then
    sdfg = fixture_lib.lower_and_capture(
        demo.three_level_sum_program,
        _args(),
        {},
        "optimized",
        auto_optimize_args={"optimization_hooks": hooks},
    )
    assert "user" in order and "post" in order and order.index("user") < order.index("checked")
    assert any(r.applied for r in reports)
    assert two_d_transients(sdfg) == []


def test_optimization_hooks_keep_callbacks_untouched():
    cb = lambda *a: True  # noqa: E731
    hooks = gx.optimization_hooks(
        user_hooks={GT4PyAutoOptHook.TopLevelDataFlowMapFusionVerticalCallBack: cb}
    )
    assert hooks[GT4PyAutoOptHook.TopLevelDataFlowMapFusionVerticalCallBack] is cb
    assert GT4PyAutoOptHook.TopLevelDataFlowStep in hooks


@pytest.mark.compile
def test_ready_cpu_backend_equals_stock_on_seed_program():
    from gt4py.next.program_processors.runners.dace.workflow.backend import run_dace_cpu as stock

    nlev = 20
    x, y = _args(nlev)[:2]
    outs = []
    for be in (stock, backends.run_dace_cpu):
        out = gtx.zeros({demo.Cell: 64, demo.K: nlev}, dtype=gtx.float64)
        demo.vertical_difference_computed_program.with_backend(be)(
            x, y, out, np.int32(nlev), offset_provider={}
        )
        outs.append(out.asnumpy())
    np.testing.assert_allclose(outs[1], outs[0], rtol=1e-13, atol=0)
    np.testing.assert_allclose(
        outs[1][:, : nlev - 1],
        demo._vertical_difference_computed_numpy(x.asnumpy(), y.asnumpy(), nlev),
        rtol=1e-13,
    )
