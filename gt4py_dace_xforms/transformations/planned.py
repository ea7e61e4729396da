"""`PlannedMatch`: `can_be_applied` and `apply` of a pattern transformation whose match is
judged by a pure plan (an analysis result or a `Decline`), so that the viewer's route and
the passes' route run one analysis and one mutation."""

from __future__ import annotations

from typing import Any

import dace

from gt4py_dace_xforms.analysis.producer import Decline


class PlannedMatch:
    """Mixin for a `SingleStateTransformation`: `plan(state, sdfg)` returns the plan or a
    Decline (and never raises), `rewrite(sdfg, plan)` mutates."""

    def plan(self, state: dace.SDFGState, sdfg: dace.SDFG) -> Any:
        raise NotImplementedError

    def rewrite(self, sdfg: dace.SDFG, plan: Any) -> None:
        raise NotImplementedError

    def can_be_applied(
        self, graph: dace.SDFGState, expr_index: int, sdfg: dace.SDFG, permissive: bool = False
    ) -> bool:
        return not isinstance(self.plan(graph, sdfg), Decline)

    def apply(self, graph: dace.SDFGState, sdfg: dace.SDFG) -> None:
        plan = self.plan(graph, sdfg)
        if isinstance(plan, Decline):
            raise ValueError(f"{type(self).__name__} does not apply: {plan.reason}")
        self.rewrite(sdfg, plan)
