"""`CopyIntoReaders`: a copy `S[A] -> D[B]` is written by the Maps that read `S` at the
copied points, in their own iterations (analysis/copy_readers.py says when;
docs/copy_into_readers.md).

`copy_into_readers` is the mutation, driven by a frozen `CopyReadersPlan`;
`gt_copy_into_readers` (the hooks run it after gt4py's top-level stage, where the
policy takes it) applies it to every copy it holds for; `CopyIntoReaders` is the route of
the viewer and `apply_transformations`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

import dace
from dace import properties, subsets as dace_sbs, transformation
from dace.sdfg import nodes as dn, utils as sdutil

from gt4py_dace_xforms.analysis.copy_readers import CopyReadersPlan, copy_into_readers_plan
from gt4py_dace_xforms.analysis.producer import Decline
from gt4py_dace_xforms.report import InlineRecord, InlineReport
from gt4py_dace_xforms.transformations.planned import PlannedMatch


if TYPE_CHECKING:
    from gt4py_dace_xforms.policy import InlinePolicy


def copy_into_readers(sdfg: dace.SDFG, plan: CopyReadersPlan) -> None:
    """Give each reader Map of `plan` a tasklet `D[p + shift] = S[p]` at its top scope,
    reading `S` through the connector it already reads it on, and remove the copy edge.

    Args:
        sdfg: the SDFG, changed in place.
        plan: the `CopyReadersPlan` (`analysis.copy_readers`): the copy `S -> D`, its
            shift and the reader Maps' pieces.
    """
    state, name, target = plan.state, plan.src.data, plan.dst.data
    for piece in plan.pieces:
        entry, exit_ = piece.entry, state.exit_node(piece.entry)
        conn = exit_.next_connector(f"__copy_{target}")
        tasklet = state.add_tasklet(f"copy_{name}_to_{target}", {"__in"}, {"__out"}, "__out = __in")
        here = dace_sbs.Range([(p, p, 1) for p in piece.point])
        there = dace_sbs.Range([(p + s, p + s, 1) for p, s in zip(piece.point, plan.shift)])
        box = dace_sbs.Range([(lo + s, hi + s, 1) for (lo, hi), s in zip(piece.box, plan.shift)])
        state.add_edge(entry, piece.connector, tasklet, "__in", dace.Memlet(data=name, subset=here))
        exit_.add_in_connector("IN_" + conn)
        exit_.add_out_connector("OUT_" + conn)
        state.add_edge(
            tasklet, "__out", exit_, "IN_" + conn, dace.Memlet(data=target, subset=there)
        )
        state.add_edge(exit_, "OUT_" + conn, plan.dst, None, dace.Memlet(data=target, subset=box))
    state.remove_edge(plan.edge)


def gt_copy_into_readers(
    sdfg: dace.SDFG,
    *,
    policy: Optional["InlinePolicy"] = None,
    validate: bool = True,
) -> InlineReport:
    """Let the reader Maps write every copy in the SDFG (nested SDFGs included) whose plan
    holds (`CopyIntoReaders`).

    Args:
        sdfg: the SDFG, changed in place.
        policy: an `InlinePolicy` whose `decide_copy_into_readers` takes or declines each
            plan. None: every plan that holds.
        validate: validate the SDFG at the end.

    Returns:
        The report: one record per copy moved (mode "copy_into_readers"), and in
        `copied_into_readers` the copies' targets, in order.
    """
    report = InlineReport()
    done = []
    for sd in list(sdfg.all_sdfgs_recursive()):
        for state in list(sd.states()):
            for edge in list(state.edges()):
                src, dst = edge.src, edge.dst
                if not (isinstance(src, dn.AccessNode) and isinstance(dst, dn.AccessNode)):
                    continue
                if edge not in state.edges():  # an earlier rewrite of the state removed it
                    continue
                plan = copy_into_readers_plan(sd, state, src, dst)
                if isinstance(plan, Decline):
                    continue
                decision = policy.decide_copy_into_readers(sd, plan) if policy is not None else None
                if decision is not None and not decision.accept:
                    continue
                readers = ", ".join(p.entry.map.label for p in plan.pieces)
                copy_into_readers(sd, plan)
                done.append(dst.data)
                report.add(
                    InlineRecord(
                        state.label,
                        dst.data,
                        readers,
                        (),
                        True,
                        decision.reason if decision else "sound",
                        figures=decision.figures if decision else None,
                        mode="copy_into_readers",
                    )
                )
    report.copied_into_readers = done
    if validate:
        sdfg.validate()
    return report


@properties.make_properties
@transformation.explicit_cf_compatible
class CopyIntoReaders(PlannedMatch, transformation.SingleStateTransformation):
    """Remove a copy `S[A] -> D[B]` between two AccessNodes of a state by letting the
    top-level Maps that read `S` one point per iteration over `A` write `D[p + B - A]` in
    the same iteration: the copy's read of `S` is saved, nothing is recomputed.

    Pattern: `(S) -> (D)`, a plain copy edge.

    Restrictions (declined, the SDFG untouched): a WCR, steps, or subsets of different
    shapes; Views, scalars, or arrays of different rank, dtype or storage; `D` read or
    written by anything else in the state, or `S` written in it; the copy inside a scope;
    reader Maps with a parameter that indexes no dimension of `S` over several values, or a
    read that is not one point per iteration (`S[p + c]`, or a constant in a dimension); readers whose boxes do not tile `A` exactly (the first disjoint ones in the
    state's order are taken); an unordered access of either array. `can_be_applied()`
    never mutates and never raises.
    """

    source = transformation.PatternNode(dn.AccessNode)
    target = transformation.PatternNode(dn.AccessNode)

    @classmethod
    def expressions(cls) -> Any:
        """DaCe's pattern: an access node (the copy's source) with an edge into another (its target).

        Returns:
            One path graph, `source` -> `target`.
        """
        return [sdutil.node_path_graph(cls.source, cls.target)]

    def plan(self, state: dace.SDFGState, sdfg: dace.SDFG):
        """The `CopyReadersPlan` for this match, or a Decline.

        Args:
            state: the state the pattern matched in.
            sdfg: the SDFG holding `state`.

        Returns:
            The plan, or a `Decline` (also where the analysis raised).
        """
        try:
            return copy_into_readers_plan(sdfg, state, self.source, self.target)
        except Exception as err:  # noqa: BLE001  # a matcher must decline, never abort compilation
            return Decline(f"analysis failed: {type(err).__name__}: {err}")

    def rewrite(self, sdfg: dace.SDFG, plan) -> None:
        """`copy_into_readers(sdfg, plan)`.

        Args:
            sdfg: the SDFG, changed in place.
            plan: what `plan` returned (not a `Decline`).
        """
        copy_into_readers(sdfg, plan)
