"""Split fragments merged: the pieces of one split Map made one Map over their union, where
that lets the policy inline the array they write (analysis/fragments.py says when;
docs/indirect_reads.md).

`merge_split_fragments` is the mutation of one `SplitFragments`; `gt_merge_split_fragments`
(run by `gt_inline_intermediates` before it inlines) merges the writers of an intermediate
only where, on a trial copy, the policy then accepts inlining every reader of it. Merged
alone, the pieces compute the same values as before, but gt4py split them for a reason
(its fusion with their readers), so there is no pattern-matching transformation: the merge
is made only together with the inline it enables.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import dace
from dace import subsets
from dace.sdfg import nodes as dn
from dace.sdfg.propagation import propagate_memlets_scope

from gt4py_dace_xforms.analysis.fragments import SplitFragments, split_fragments
from gt4py_dace_xforms.report import InlineRecord, InlineReport
from gt4py_dace_xforms.transformations.enabling import apply_where_readers_inline


if TYPE_CHECKING:
    from gt4py_dace_xforms.policy import InlinePolicy


def merge_split_fragments(sdfg: dace.SDFG, plan: SplitFragments) -> dn.MapEntry:
    """Make the first piece run over the union of the pieces' ranges and remove the others
    (with the input AccessNodes only they read).

    Args:
        sdfg: the SDFG, changed in place.
        plan: the `SplitFragments` (`analysis.fragments`).

    Returns:
        The merged Map's entry.
    """
    st, keep = plan.state, plan.entries[0]
    ranges = list(keep.map.range.ranges)
    ranges[plan.dim] = (plan.lo, plan.hi, 1)
    keep.map.range = subsets.Range(ranges)
    dropped: set[str] = set()
    for entry in plan.entries[1:]:
        sources = [e.src for e in st.in_edges(entry)]
        scope = list(st.scope_subgraph(entry).nodes())
        dropped |= {n.data for n in scope if isinstance(n, dn.AccessNode)}
        st.remove_nodes_from(scope)
        for src in sources:
            if src in st.nodes() and st.degree(src) == 0:
                st.remove_node(src)
    # The pieces' own transients (gt4py names them per piece) go with them.
    used = {n.data for n, _ in sdfg.all_nodes_recursive() if isinstance(n, dn.AccessNode)}
    for name in sorted(dropped - used):
        if sdfg.arrays[name].transient:
            sdfg.remove_data(name, validate=False)
    # The outer memlets of the merged Map: the union of what the pieces read and wrote.
    propagate_memlets_scope(sdfg, st, st.scope_tree()[keep])
    return keep


def _fragment_plans(sdfg: dace.SDFG, name: str) -> Optional[list[SplitFragments]]:
    """The split writers of every AccessNode of `name` with more than one writer, or None
    where one of them is not a split Map (or none has several writers)."""
    plans = []
    for st in sdfg.states():
        for node in st.data_nodes():
            if node.data != name or st.in_degree(node) < 2:
                continue
            plan = split_fragments(st, node)
            if not isinstance(plan, SplitFragments):
                return None
            plans.append(plan)
    return plans or None


def gt_merge_split_fragments(
    sdfg: dace.SDFG, *, policy: Optional["InlinePolicy"] = None, validate: bool = True
) -> InlineReport:
    """Merge the split writers of every transient whose readers the policy does not inline
    as they are but accepts to inline once the writers are one Map (tried on a copy first).

    Args:
        sdfg: the SDFG, changed in place.
        policy: the `InlinePolicy` that judges the readers, as `gt_inline_intermediates`
            asks it. None: the CPU `CostModel`.
        validate: validate the SDFG at the end.

    Returns:
        The report: one record per intermediate whose writers were merged (mode
        "merged_fragments"), and in `fragments_merged` those intermediates, in order.
    """
    if policy is None:
        from gt4py_dace_xforms.policy import CostModel

        policy = CostModel("cpu")
    report = InlineReport()
    done = []
    for name, plans in apply_where_readers_inline(
        sdfg, policy, _fragment_plans, merge_split_fragments
    ):
        done.append(name)
        # (the removed pieces' entries still carry their labels)
        labels = [", ".join(e.map.label for e in p.entries) for p in plans]
        report.add(
            InlineRecord(
                plans[0].state.label,
                name,
                plans[0].entries[0].map.label,
                (),
                True,
                f"its writers {'; '.join(labels)} (one computation split along dimension "
                f"{plans[0].dim}) merged into one Map, so that its readers inline it",
                mode="merged_fragments",
            )
        )
    report.fragments_merged = done
    if validate:
        sdfg.validate()
    return report
