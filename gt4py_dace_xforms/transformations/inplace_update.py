"""`InPlaceUpdate`: a concat node that is its source with some points changed pointwise
becomes the source, updated in place (analysis/inplace_update.py says when;
docs/inplace_update.md).

`update_in_place` is the mutation, driven by a frozen `InPlacePlan`;
`gt_update_in_place` applies it wherever the plan holds (run by `gt_inline_intermediates`
before the output buffers, where the policy takes output buffers: nothing is
recomputed); `InPlaceUpdate` is the route of `apply_transformations` and the viewer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

import dace
from dace import properties, transformation
from dace.sdfg import nodes as dn, utils as sdutil

from gt4py_dace_xforms.analysis.inplace_update import (
    InPlacePlan,
    inplace_candidates,
    inplace_update_plan,
)
from gt4py_dace_xforms.analysis.producer import Decline
from gt4py_dace_xforms.report import InlineRecord, InlineReport


if TYPE_CHECKING:
    from gt4py_dace_xforms.policy import InlinePolicy


def update_in_place(sdfg: dace.SDFG, plan: InPlacePlan) -> dn.AccessNode:
    """Apply `plan`: the updaters write a new AccessNode of `S`, which `T`'s readers read;
    the copies and `T` go.

    Args:
        sdfg: the SDFG, changed in place.
        plan: the `InPlacePlan` (`analysis.inplace_update`): `S`, `T`, the copies and
            the updater Maps.

    Returns:
        The new AccessNode of `S`.
    """
    state, name, sname = plan.state, plan.name, plan.source
    after = state.add_access(sname)
    copies = {id(c) for c in plan.copies}
    for e in list(state.in_edges(plan.node)):
        if id(e) in copies:
            state.remove_edge(e)
            continue
        for x in state.memlet_tree(e):
            if x.data.data == name:
                x.data.data = sname
        state.add_edge(e.src, e.src_conn, after, e.dst_conn, e.data)
        state.remove_edge(e)
    for e in list(state.out_edges(plan.node)):
        for x in state.memlet_tree(e):
            if x.data.data == name:
                x.data.data = sname
        state.add_edge(after, e.src_conn, e.dst, e.dst_conn, e.data)
        state.remove_edge(e)
    state.remove_node(plan.node)
    sdfg.remove_data(name, validate=False)
    return after


def gt_update_in_place(
    sdfg: dace.SDFG,
    *,
    policy: Optional["InlinePolicy"] = None,
    validate: bool = True,
) -> InlineReport:
    """Fold every concat node of `sdfg` that is its source updated pointwise into that
    source (`InPlaceUpdate`, see the module docstring).

    Args:
        sdfg: the SDFG, changed in place.
        policy: an `InlinePolicy`; the folds are made where it takes output buffers (its
            `output_buffers`). None: every fold that holds.
        validate: validate the SDFG at the end.

    Returns:
        The report: one record per fold (mode "in_place", the consumer column names the
        source), and in `updated_in_place` the folded arrays, in order.
    """
    report = InlineReport()
    if policy is not None and not getattr(policy, "output_buffers", False):
        return report
    done, changed = [], True
    while changed:
        changed = False
        for state, src, node in inplace_candidates(sdfg):
            plan = inplace_update_plan(sdfg, state, src, node)
            if isinstance(plan, Decline):
                continue
            saved = plan.saved_elements()
            update_in_place(sdfg, plan)
            report.add(
                InlineRecord(
                    state.label,
                    plan.name,
                    plan.source,
                    (),
                    True,
                    f"updated in place in '{plan.source}': the copies of "
                    f"{saved} elements go, nothing recomputed",
                    removed_intermediate=True,
                    mode="in_place",
                )
            )
            done.append(plan.name)
            changed = True
            break
    report.updated_in_place = done
    if validate:
        sdfg.validate()
    return report


@properties.make_properties
@transformation.explicit_cf_compatible
class InPlaceUpdate(transformation.SingleStateTransformation):
    """Fold the concat node `T` into its source `S` where `T` is `S` copied at the same
    indices on some boxes and updated pointwise by top-level Maps on the others, and
    nothing else reads `S`: the Maps update `S` in place, the copies and `T` go.
    Nothing is recomputed; a field-sized array and its copies are saved.

    Pattern: `S -> T` (an AccessNode-to-AccessNode copy edge).

    Restrictions (each declines and leaves the SDFG unchanged): both transient arrays of
    one layout (dtype, shape, strides, storage, offset) with one AccessNode each in the
    SDFG; every write of `T` a same-index copy of `S` or an updater Map reading and
    writing one element per iteration at the same `param + constant` index (every
    parameter used once), no WCR, no dynamic memlet, its reads of `S` ending in tasklets
    or AccessNodes; at least one copy and one updater; the pieces provably disjoint; `S`
    read by nothing else; neither read on an interstate edge; no unordered access.
    """

    source = transformation.PatternNode(dn.AccessNode)
    concat = transformation.PatternNode(dn.AccessNode)

    @classmethod
    def expressions(cls) -> list:
        """DaCe's pattern: `S -> T`, an AccessNode-to-AccessNode copy edge.

        Returns:
            One path graph, `source` -> `concat`.
        """
        return [sdutil.node_path_graph(cls.source, cls.concat)]

    def plan(self, state: dace.SDFGState, sdfg: dace.SDFG):
        """The `InPlacePlan` for this match, or a Decline.

        Args:
            state: the state the pattern matched in.
            sdfg: the SDFG holding `state`.

        Returns:
            `analysis.inplace_update.inplace_update_plan`'s result.
        """
        return inplace_update_plan(sdfg, state, self.source, self.concat)

    def can_be_applied(
        self, graph: Any, expr_index: int, sdfg: dace.SDFG, permissive: bool = False
    ) -> bool:
        """Whether `plan` finds a plan (in a state, not a control-flow region).

        Args:
            graph: the state the pattern matched in.
            expr_index: which of `expressions()` matched (unused).
            sdfg: the SDFG holding `graph`.
            permissive: DaCe's permissive flag (unused).

        Returns:
            True where there is a plan; False otherwise, also where the analysis raised.
        """
        try:
            return isinstance(graph, dace.SDFGState) and not isinstance(
                self.plan(graph, sdfg), Decline
            )
        except Exception:  # must never raise: gt_auto_optimize sets match_exception=True
            return False

    def apply(self, graph: dace.SDFGState, sdfg: dace.SDFG) -> None:
        """Plan the match and `update_in_place`.

        Args:
            graph: the state the pattern matched in.
            sdfg: the SDFG, changed in place.

        Raises:
            ValueError: the match declines.
        """
        plan = self.plan(graph, sdfg)
        if isinstance(plan, Decline):
            raise ValueError(f"InPlaceUpdate: {plan.reason}")
        update_in_place(sdfg, plan)
