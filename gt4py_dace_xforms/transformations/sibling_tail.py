"""Sibling tails: a Map output computed from another output of the same Map is computed
from that output, read back, in a Map of its own, where that lets its readers inline it
(analysis/sibling_tail.py says when; docs/sibling_tail.md).

`split_sibling_tail` is the mutation of one `SiblingTail`; `gt_split_sibling_tails`
(run by `gt_inline_intermediates` before it inlines) splits the tails of an intermediate only
where, on a trial copy, the policy then accepts inlining every reader of it: on its own
a split adds a pass over memory. There is no pattern-matching transformation: the split
pays only together with the inline it enables.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Optional

import dace
from dace.sdfg import nodes as dn

from gt4py_dace_xforms.analysis.producer import Decline
from gt4py_dace_xforms.analysis.sibling_tail import SiblingTail, sibling_tail_plan
from gt4py_dace_xforms.report import InlineRecord, InlineReport
from gt4py_dace_xforms.transformations.enabling import apply_where_readers_inline


if TYPE_CHECKING:
    from gt4py_dace_xforms.policy import InlinePolicy


def split_sibling_tail(sdfg: dace.SDFG, plan: SiblingTail) -> dn.MapEntry:
    """Move `plan`'s tail into a new top-level Map of the producer's range that reads `Y`
    at the written index and writes `X`.

    Args:
        sdfg: the SDFG, changed in place.
        plan: the `SiblingTail` (`analysis.sibling_tail`): the producer Map, its tail's
            nodes, the sibling output `Y` it reads and the output `X` it writes.

    Returns:
        The new Map's entry.
    """
    st, entry = plan.state, plan.entry
    exit_ = st.exit_node(entry)
    old = entry.map
    qmap = dn.Map(
        f"{old.label}_tail_{plan.x_name}",
        list(old.params),
        copy.deepcopy(old.range),
        schedule=old.schedule,
    )
    q_entry, q_exit = dn.MapEntry(qmap), dn.MapExit(qmap)
    st.add_nodes_from([q_entry, q_exit])
    taken: set[str] = set()

    def _input(conn: str, outer_src, outer_conn, outer_memlet) -> None:
        if conn in taken:
            return
        taken.add(conn)
        q_entry.add_in_connector("IN_" + conn)
        q_entry.add_out_connector("OUT_" + conn)
        st.add_edge(outer_src, outer_conn, q_entry, "IN_" + conn, copy.deepcopy(outer_memlet))

    y_outer = next(
        e
        for e in st.out_edges(exit_)
        if e.dst is plan.y_node and e.src_conn == "OUT_" + plan.y_edge.dst_conn[3:]
    )
    y_conn = f"__tail_{plan.y_name}"
    for n in plan.tail:
        for e in list(st.in_edges(n)):
            if e.src in plan.tail:
                continue
            if e.src is entry:
                if e.data.is_empty():
                    st.add_edge(q_entry, None, n, e.dst_conn, dace.Memlet())
                else:
                    conn = e.src_conn[4:]
                    outer = next(iter(st.in_edges_by_connector(entry, "IN_" + conn)))
                    _input(conn, outer.src, outer.src_conn, outer.data)
                    st.add_edge(q_entry, e.src_conn, n, e.dst_conn, copy.deepcopy(e.data))
            else:  # the sibling's value: read back from `Y` at the written index
                _input(y_conn, plan.y_node, None, y_outer.data)
                point = plan.y_edge.data.get_dst_subset(plan.y_edge, st)
                st.add_edge(
                    q_entry,
                    "OUT_" + y_conn,
                    n,
                    e.dst_conn,
                    dace.Memlet(data=plan.y_name, subset=copy.deepcopy(point)),
                )
            st.remove_edge(e)
    xconn = plan.x_edge.dst_conn[3:]
    x_outer = next(iter(st.out_edges_by_connector(exit_, "OUT_" + xconn)))
    q_exit.add_in_connector("IN_" + xconn)
    q_exit.add_out_connector("OUT_" + xconn)
    st.add_edge(
        plan.x_edge.src,
        plan.x_edge.src_conn,
        q_exit,
        "IN_" + xconn,
        copy.deepcopy(plan.x_edge.data),
    )
    st.add_edge(q_exit, "OUT_" + xconn, x_outer.dst, x_outer.dst_conn, copy.deepcopy(x_outer.data))
    st.remove_edge(plan.x_edge)
    st.remove_edge(x_outer)
    exit_.remove_in_connector("IN_" + xconn)
    exit_.remove_out_connector("OUT_" + xconn)
    # Inputs only the tail used leave the producer.
    for conn in list(entry.out_connectors):
        if not list(st.out_edges_by_connector(entry, conn)):
            for e in list(st.in_edges_by_connector(entry, "IN_" + conn[4:])):
                st.remove_edge(e)
                if isinstance(e.src, dn.AccessNode) and st.degree(e.src) == 0:
                    st.remove_node(e.src)
            entry.remove_in_connector("IN_" + conn[4:])
            entry.remove_out_connector(conn)
    return q_entry


def _plans(sdfg: dace.SDFG, name: str) -> Optional[list[SiblingTail]]:
    """A tail for every writer of `name` (every writer a top-level Map), or None."""
    plans = []
    for st in sdfg.states():
        for node in st.data_nodes():
            if node.data != name:
                continue
            for e in st.in_edges(node):
                plan = sibling_tail_plan(sdfg, st, e)
                if isinstance(plan, Decline):
                    return None
                plans.append(plan)
    return plans or None


def gt_split_sibling_tails(
    sdfg: dace.SDFG, *, policy: Optional["InlinePolicy"] = None, validate: bool = True
) -> InlineReport:
    """Split the tails of every transient whose readers the policy declines to inline
    whole but accepts to inline once each writer's tail reads its sibling output (tried
    on a copy first).

    Args:
        sdfg: the SDFG, changed in place.
        policy: the `InlinePolicy` that judges the readers, as `gt_inline_intermediates`
            asks it. None: the CPU `CostModel`.
        validate: validate the SDFG at the end.

    Returns:
        The report: one record per intermediate split (mode "sibling_tail"), and in
        `sibling_tails_split` those intermediates, in order.
    """
    if policy is None:
        from gt4py_dace_xforms.policy import CostModel

        policy = CostModel("cpu")
    report = InlineReport()
    done = []
    for name, plans in apply_where_readers_inline(sdfg, policy, _plans, split_sibling_tail):
        done.append(name)
        over = sorted({p.y_name for p in plans})
        report.add(
            InlineRecord(
                plans[0].state.label,
                name,
                plans[0].entry.map.label,
                (),
                True,
                f"computed from {', '.join(over)} (written by the same Map at the same point) "
                f"in a Map of its own, {len(plans[0].tail)} node(s), so that its readers "
                f"inline it without recomputing the rest",
                mode="sibling_tail",
            )
        )
    report.sibling_tails_split = done
    if validate:
        sdfg.validate()
    return report
