"""`WriteBackRetarget`: the writers of a write-back buffer write the program output directly
(analysis/retarget.py says when; docs/writeback.md).

`retarget` is the mutation, driven by a frozen `RetargetPlan`; `gt_retarget_writebacks`
(run by `gt_inline_intermediates` after its fixed point) applies it to every transient it
holds for; `WriteBackRetarget` is the route of the viewer and `apply_transformations`.
"""

from __future__ import annotations

from typing import Any, Collection, Optional

import dace
from dace import properties, subsets as dace_sbs, transformation
from dace.sdfg import nodes as dn, utils as sdutil

from gt4py_dace_xforms.analysis.producer import Decline
from gt4py_dace_xforms.analysis.retarget import RetargetPlan, retarget_plan
from gt4py_dace_xforms.report import InlineReport
from gt4py_dace_xforms.transformations.planned import PlannedMatch


def _shifted(subset, shift) -> dace_sbs.Range:
    return dace_sbs.Range([(b + s, e + s, st) for (b, e, st), s in zip(subset.ndrange(), shift)])


def _box_range(box, shift=None) -> dace_sbs.Range:
    shift = shift or (0,) * len(box)
    return dace_sbs.Range([(lo + s, hi - 1 + s, 1) for (lo, hi), s in zip(box, shift)])


def retarget(sdfg: dace.SDFG, plan: RetargetPlan) -> None:
    """Apply `plan`: every writer of `T` writes `G` (restricted to the copied box and
    shifted), the copy and `T` go away.

    Args:
        sdfg: the SDFG, changed in place.
        plan: the `RetargetPlan` (`analysis.retarget`): the write-back copy `T -> G`, its
            shift and `T`'s writers.
    """
    state, cp = plan.writer_state, plan.copy
    gname = plan.target
    same_state = state is cp.state
    new_nodes: dict = {}
    for w in plan.writers:
        if same_state:
            gnode = cp.target
        else:
            gnode = new_nodes.get(w.node) or new_nodes.setdefault(w.node, state.add_access(gname))
        e = w.edge
        if w.entry is not None:
            w.entry.map.range = dace_sbs.Range([(lo, hi, 1) for _, lo, hi in w.ranges])
            for x in [x for x in state.memlet_tree(e) if x is not e]:
                m = x.data
                m.data, m.subset = gname, _shifted(m.subset, plan.shift)
            state.add_edge(
                e.src,
                e.src_conn,
                gnode,
                e.dst_conn,
                dace.Memlet(data=gname, subset=_box_range(w.box, plan.shift)),
            )
        else:
            src = e.data.get_src_subset(e, state)
            dst = e.data.get_dst_subset(e, state)
            start = [lo - b for (lo, _), (b, _, _) in zip(w.box, dst.ndrange())]
            clipped = dace_sbs.Range(
                [
                    (b + s, b + s + (hi - lo) - 1, 1)
                    for (b, _, _), s, (lo, hi) in zip(src.ndrange(), start, w.box)
                ]
            )
            state.add_edge(
                e.src,
                e.src_conn,
                gnode,
                None,
                dace.Memlet(data=gname, subset=_box_range(w.box, plan.shift), other_subset=clipped),
            )
        state.remove_edge(e)
    for c in plan.copies:
        c.state.remove_edge(c.edge)
    for st, node in ({(state, w.node) for w in plan.writers} | {(c.state, c.source) for c in plan.copies}
                     | {(c.state, c.target) for c in plan.copies}):  # fmt: skip
        if node in st and st.degree(node) == 0:
            st.remove_node(node)
    if not any(n.data == plan.name for st in sdfg.states() for n in st.data_nodes()):
        sdfg.remove_data(plan.name, validate=False)


def gt_retarget_writebacks(
    sdfg: dace.SDFG, *, names: Optional[Collection[str]] = None, validate: bool = True
) -> InlineReport:
    """Retarget every transient whose only reader is a write-back copy and whose plan holds
    (`WriteBackRetarget`): its writers write the copy's target.

    Args:
        sdfg: the SDFG, changed in place.
        names: only these transients (None: every one).
        validate: validate the SDFG at the end.

    Returns:
        The report: in `writebacks_retargeted` the retargeted transients, in order.
    """
    done = []
    for name in sorted(
        names if names is not None else [n for n, d in sdfg.arrays.items() if d.transient]
    ):
        plan = retarget_plan(sdfg, name)
        if isinstance(plan, Decline):
            continue
        retarget(sdfg, plan)
        done.append(name)
    if validate:
        sdfg.validate()
    return InlineReport(writebacks_retargeted=done)


@properties.make_properties
@transformation.explicit_cf_compatible
class WriteBackRetarget(PlannedMatch, transformation.SingleStateTransformation):
    """Let the writers of a transient `T` that is only copied into global data `G` write
    `G` directly: writer Maps are restricted to the copied points and shifted, writer
    copies clipped, the copy and `T` removed. gt4py's own write-back elimination needs
    the copy to cover all of `T`; this one does not (the rest of `T` fed readers that are
    gone, e.g. inlined by `InlineFuser`).

    Pattern: `(T) -> (G)`, `T` a transient array, `G` a global array, a plain copy edge.

    Restrictions (declined, the SDFG untouched): `T` with any other reader, written in
    several states, inside a scope, through a WCR, by a Map that writes other data or not
    one element `T[p + c]` per iteration; bounds the prover cannot order; `G` accessed
    in the writers' state, between the states, or otherwise in the copy's state.
    `can_be_applied()` never mutates and never raises.
    """

    source = transformation.PatternNode(dn.AccessNode)
    target = transformation.PatternNode(dn.AccessNode)

    @classmethod
    def expressions(cls) -> Any:
        """DaCe's pattern: a transient's access node (the write-back buffer) copied into a global one.

        Returns:
            One path graph, `source` -> `target`.
        """
        return [sdutil.node_path_graph(cls.source, cls.target)]

    def plan(self, state: dace.SDFGState, sdfg: dace.SDFG):
        """The `RetargetPlan` for this match, or a Decline.

        Args:
            state: the state the pattern matched in.
            sdfg: the SDFG holding `state`.

        Returns:
            The plan, or a `Decline` (also where the analysis raised).
        """
        try:
            desc, gdesc = sdfg.arrays[self.source.data], sdfg.arrays[self.target.data]
            if not desc.transient or gdesc.transient:
                return Decline("not a copy of a transient into global data")
            plan = retarget_plan(sdfg, self.source.data)
            if not isinstance(plan, Decline) and (
                plan.copy.source is not self.source or plan.copy.target is not self.target
            ):
                return Decline("the match is not the (first) write-back copy")
            return plan
        except Exception as err:  # noqa: BLE001  # a matcher must decline, never abort compilation
            return Decline(f"analysis failed: {type(err).__name__}: {err}")

    def rewrite(self, sdfg: dace.SDFG, plan) -> None:
        """`retarget(sdfg, plan)`.

        Args:
            sdfg: the SDFG, changed in place.
            plan: what `plan` returned (not a `Decline`).
        """
        retarget(sdfg, plan)
