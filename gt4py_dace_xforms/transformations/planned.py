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
        """The match's plan, from the pattern nodes; never mutates, never raises.

        Args:
            state: the state the pattern matched in.
            sdfg: the SDFG holding `state`.

        Returns:
            The plan, or a `Decline` saying why the match does not apply.

        Raises:
            NotImplementedError: here; each transformation implements it.
        """
        raise NotImplementedError

    def rewrite(self, sdfg: dace.SDFG, plan: Any) -> None:
        """Carry out `plan` (what `plan` returned, not a `Decline`).

        Args:
            sdfg: the SDFG, changed in place.
            plan: the plan.

        Raises:
            NotImplementedError: here; each transformation implements it.
        """
        raise NotImplementedError

    def can_be_applied(
        self, graph: dace.SDFGState, expr_index: int, sdfg: dace.SDFG, permissive: bool = False
    ) -> bool:
        """DaCe's match check: whether `plan` finds a plan.

        Args:
            graph: the state the pattern matched in.
            expr_index: which of `expressions()` matched (unused).
            sdfg: the SDFG holding `graph`.
            permissive: DaCe's permissive flag (unused).

        Returns:
            True unless `plan` declines.
        """
        return not isinstance(self.plan(graph, sdfg), Decline)

    def apply(self, graph: dace.SDFGState, sdfg: dace.SDFG) -> None:
        """Plan the match again and `rewrite` it.

        Args:
            graph: the state the pattern matched in.
            sdfg: the SDFG, changed in place.

        Raises:
            ValueError: `plan` declines (the match does not apply).
        """
        plan = self.plan(graph, sdfg)
        if isinstance(plan, Decline):
            raise ValueError(f"{type(self).__name__} does not apply: {plan.reason}")
        self.rewrite(sdfg, plan)
