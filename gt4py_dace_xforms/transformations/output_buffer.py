"""`OutputAsBuffer`: a write-back buffer that other dataflow also reads becomes the output
it is copied into (analysis/output_buffer.py says when; docs/writeback.md).

`use_output_as_buffer` is the mutation, driven by a frozen `OutputBufferPlan`;
`gt_use_outputs_as_buffers` (run by `gt_inline_intermediates` before it inlines, where the policy
takes it) applies it to every transient it holds for; `OutputAsBuffer` is the route of
the viewer and `apply_transformations`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Collection, Optional

import dace
from dace import properties, subsets as dace_sbs, transformation
from dace.sdfg import nodes as dn, utils as sdutil
from dace.transformation.helpers import replicate_scope

from gt4py_dace_xforms.analysis.output_buffer import OutputBufferPlan, output_buffer_plan
from gt4py_dace_xforms.analysis.producer import Decline
from gt4py_dace_xforms.report import InlineRecord, InlineReport
from gt4py_dace_xforms.transformations.planned import PlannedMatch


if TYPE_CHECKING:
    from gt4py_dace_xforms.policy import InlinePolicy


def _shifted(subset, shift) -> dace_sbs.Range:
    return dace_sbs.Range([(b + s, e + s, st) for (b, e, st), s in zip(subset.ndrange(), shift)])


def _move_memlet(edge, name: str, gname: str, shift) -> None:
    """Make the `name` side of `edge`'s memlet refer to `gname`, shifted."""
    m = edge.data
    if m.data == name:
        if (
            m.other_subset is None
            and isinstance(edge.src, dn.AccessNode)
            and isinstance(edge.dst, dn.AccessNode)
        ):
            m.other_subset = dace_sbs.Range(m.subset.ndrange())  # it stood for both sides
        m.data, m.subset = gname, _shifted(m.subset, shift)
    elif m.other_subset is not None:
        m.other_subset = _shifted(m.other_subset, shift)
    else:  # the other array's memlet with one subset for both sides
        m.other_subset = _shifted(m.subset, shift)


def _range(box) -> dace_sbs.Range:
    """A box (end exclusive) as a DaCe range."""
    return dace_sbs.Range([(lo, hi - 1, 1) for lo, hi in box])


def _split(sdfg: dace.SDFG, a) -> list:
    """Keep a writer Map only where it writes inside the copied boxes: the Map itself takes
    the first box's ranges, a copy of its scope (reading the same nodes, writing the same
    nodes) each further box's. The outer memlets of its outputs become the boxes each
    piece writes. Returns the new Maps' edges into `T` (in `T`'s indices;
    `_move_memlet` shifts them afterwards)."""
    w, st = a.split, a.state
    entry = w.entry
    scopes = [(entry, st.exit_node(entry))]
    has_nested = any(isinstance(n, dn.NestedSDFG) for n in st.scope_subgraph(entry).nodes())
    for j in range(1, len(w.pieces)):
        new_entry = replicate_scope(sdfg, st, st.scope_subgraph(entry)).entry
        new_entry.map.label = f"{entry.map.label}_box{j}"
        scopes.append((new_entry, st.exit_node(new_entry)))
    if has_nested and len(scopes) > 1:
        sdfg.reset_cfg_list()
    others = {e.src_conn: oboxes for e, oboxes in w.others}
    new_edges = []
    for j, ((en, ex), ranges, box) in enumerate(zip(scopes, w.pieces, w.boxes)):
        en.map.range = dace_sbs.Range([(lo, hi, 1) for _, lo, hi in ranges])
        for e in st.out_edges(ex):
            if e.dst is a.node:
                e.data = dace.Memlet(data=a.node.data, subset=_range(box))
                if j:
                    new_edges.append(e)
            else:
                e.data = dace.Memlet(data=e.dst.data, subset=_range(others[e.src_conn][j]))
    return new_edges


def _restrict(a) -> None:
    """Clip a copy that also wrote points outside the copied box to the box (in `T`'s
    indices; `_move_memlet` shifts it afterwards)."""
    w, st, e = a.restricted, a.state, a.edge
    box = _range(w.box)
    src, dst = e.data.get_src_subset(e, st), e.data.get_dst_subset(e, st)
    start = [lo - b for (lo, _), (b, _, _) in zip(w.box, dst.ndrange())]
    clipped = dace_sbs.Range(
        [
            (b + s, b + s + (hi - lo) - 1, 1)
            for (b, _, _), s, (lo, hi) in zip(src.ndrange(), start, w.box)
        ]
    )
    e.data = dace.Memlet(data=a.node.data, subset=box, other_subset=clipped)


def _restride(sdfg: dace.SDFG, plan: OutputBufferPlan) -> None:
    """Nested SDFGs that see `T` see `G` now: `G`'s strides, with its stride symbols."""
    gdesc = sdfg.arrays[plan.target]
    syms = set()
    for s in (*gdesc.strides, gdesc.total_size):
        syms |= {str(x) for x in dace.symbolic.pystr_to_symbolic(s).free_symbols}
    for view in plan.nested:
        inner = view.nsdfg.sdfg.arrays[view.inner]
        kept = view.kept if view.kept is not None else range(len(gdesc.strides))
        inner.strides = tuple(gdesc.strides[d] for d in kept)
        inner.total_size = gdesc.total_size
        for s in sorted(syms):
            if s not in view.nsdfg.symbol_mapping:
                view.nsdfg.symbol_mapping[s] = dace.symbolic.pystr_to_symbolic(s)
            if s not in view.nsdfg.sdfg.symbols:
                outer = sdfg.symbols.get(s, dace.int64)
                view.nsdfg.sdfg.add_symbol(s, outer)


def _merge_echoes(plan: OutputBufferPlan) -> None:
    """A copy `G[p] -> T[p]` is a copy of `G` onto itself now: the node it wrote (an
    AccessNode of `G` now) merges into the node it read, so that whatever wrote `G[p]`
    before still precedes every reader."""
    for a in plan.echoes:
        st, src, node = a.state, a.edge.src, a.node
        st.remove_edge(a.edge)
        if node is src or node not in st.nodes():
            continue
        for e in list(st.in_edges(node)):
            st.add_edge(e.src, e.src_conn, src, e.dst_conn, e.data)
            st.remove_edge(e)
        for e in list(st.out_edges(node)):
            st.add_edge(src, e.src_conn, e.dst, e.dst_conn, e.data)
            st.remove_edge(e)
        st.remove_node(node)


def use_output_as_buffer(sdfg: dace.SDFG, plan: OutputBufferPlan) -> None:
    """Apply `plan`: every access of `T` accesses `G` at the shift, nested SDFGs take
    `G`'s strides, the copies and `T` go away.

    Args:
        sdfg: the SDFG, changed in place.
        plan: the `OutputBufferPlan` (`analysis.output_buffer`): the buffer `T`, its
            output `G`, the shift and every access and copy.
    """
    name, gname, shift = plan.name, plan.target, plan.shift
    moved = [(a.state, a.edge) for a in plan.accesses]
    for a in plan.accesses:
        if a.restricted is not None:
            _restrict(a)
        if a.split is not None:
            moved += [(a.state, e) for e in _split(sdfg, a)]
    done: set[int] = set()
    for st, edge in moved:
        for x in st.memlet_tree(edge):
            if id(x) not in done:
                done.add(id(x))
                _move_memlet(x, name, gname, shift)
    for a in plan.accesses:
        a.node.data = gname
    _restride(sdfg, plan)
    for c in plan.copies:
        c.state.remove_edge(c.edge)
        c.source.data = gname
    state = plan.copies[0].state
    for c in plan.copies:
        if c.target not in state or c.source not in state or not state.in_degree(c.target):
            continue
        # The target has other writers (outside the copied boxes, `_other_writers_problem`):
        # the source, `G` now, merges into it; its readers read after every write of it.
        for e in list(state.in_edges(c.source)):
            state.add_edge(e.src, e.src_conn, c.target, e.dst_conn, e.data)
            state.remove_edge(e)
        for e in list(state.out_edges(c.source)):
            state.add_edge(c.target, e.src_conn, e.dst, e.dst_conn, e.data)
            state.remove_edge(e)
        state.remove_node(c.source)
    for c in plan.copies:
        if c.target not in state or c.source not in state:
            continue
        # Readers after the copy read the node the writers wrote (same order as before).
        for e in list(state.out_edges(c.target)):
            state.add_edge(c.source, e.src_conn, e.dst, e.dst_conn, e.data)
            state.remove_edge(e)
        if state.degree(c.target) == 0:
            state.remove_node(c.target)
    for c in plan.copies:
        if c.source in state and state.degree(c.source) == 0:
            state.remove_node(c.source)
    _merge_echoes(plan)
    if not any(n.data == name for st in sdfg.states() for n in st.data_nodes()):
        sdfg.remove_data(name, validate=False)


def gt_use_outputs_as_buffers(
    sdfg: dace.SDFG,
    *,
    names: Optional[Collection[str]] = None,
    policy: Optional["InlinePolicy"] = None,
    validate: bool = True,
) -> InlineReport:
    """Replace every transient whose plan holds by the output it is copied into
    (`OutputAsBuffer`).

    Args:
        sdfg: the SDFG, changed in place.
        names: only these transients (None: every one).
        policy: an `InlinePolicy` whose `decide_output_buffer` takes or declines each plan.
            None: every plan that holds.
        validate: validate the SDFG at the end.

    Returns:
        The report: one record per buffer replaced (mode "output_buffer"), and in
        `outputs_as_buffers` those transients, in order.
    """
    report = InlineReport()
    done = []
    for name in sorted(
        names if names is not None else [n for n, d in sdfg.arrays.items() if d.transient]
    ):
        if name not in sdfg.arrays:
            continue
        plan = output_buffer_plan(sdfg, name)
        if isinstance(plan, Decline):
            continue
        decision = policy.decide_output_buffer(sdfg, plan) if policy is not None else None
        if decision is not None and not decision.accept:
            continue
        state = plan.copies[0].state.label
        use_output_as_buffer(sdfg, plan)
        done.append(name)
        report.add(
            InlineRecord(
                state,
                name,
                plan.target,
                (),
                True,
                decision.reason if decision else "sound",
                removed_intermediate=True,
                figures=decision.figures if decision else None,
                mode="output_buffer",
            )
        )
    report.outputs_as_buffers = done
    if validate:
        sdfg.validate()
    return report


@properties.make_properties
@transformation.explicit_cf_compatible
class OutputAsBuffer(PlannedMatch, transformation.SingleStateTransformation):
    """Replace a transient `T` that gt4py copies into global data `G` (`T[A] -> G[B]`) by
    `G` itself, in every state of `T`'s lifetime: every reader and writer of `T` (Maps,
    copies, nested SDFGs, other states and branches) accesses `G` at the copy's shift,
    nested SDFGs take `G`'s strides, the copy and `T` disappear. Nothing is recomputed.

    Pattern: `(T) -> (G)`, `T` a transient array, `G` a global array, a plain copy edge.

    Restrictions (declined, the SDFG untouched): an access of `T` outside the copied box,
    inside a scope, through a View, a library node or a WCR; `G` accessed by anything but
    the copy while `T` lives (this includes in-place updates whose producers read `G`),
    other than writers of the copies' target node provably outside the copied boxes and
    readers of that node; one output's copies with several shifts or overlapping without
    tiling one box (disjoint boxes are fine: a writer Map spanning several is split into
    one Map per box, where its other outputs lose no point anyone reads); the copy not on every
    path after a writer, or a write of `T` after it; `T` accessed in a loop; symbols of the subsets
    reassigned in between; a nested SDFG seeing `T` with other dimensions. Where `T` is
    copied into several outputs, the first one that satisfies all this becomes the buffer
    and the other copies read it (the match is that output's first copy).
    `can_be_applied()` never mutates and never raises.
    """

    source = transformation.PatternNode(dn.AccessNode)
    target = transformation.PatternNode(dn.AccessNode)

    @classmethod
    def expressions(cls) -> Any:
        """DaCe's pattern: a transient's access node (the buffer) copied into a global one (its output).

        Returns:
            One path graph, `source` -> `target`.
        """
        return [sdutil.node_path_graph(cls.source, cls.target)]

    def plan(self, state: dace.SDFGState, sdfg: dace.SDFG):
        """The `OutputBufferPlan` for this match, or a Decline.

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
            plan = output_buffer_plan(sdfg, self.source.data)
            if not isinstance(plan, Decline) and (plan.copies[0].source is not self.source
                                                  or plan.copies[0].target is not self.target):  # fmt: skip
                return Decline("the match is not the (first) write-back copy")
            return plan
        except Exception as err:  # noqa: BLE001  # a matcher must decline, never abort compilation
            return Decline(f"analysis failed: {type(err).__name__}: {err}")

    def rewrite(self, sdfg: dace.SDFG, plan) -> None:
        """`use_output_as_buffer(sdfg, plan)`.

        Args:
            sdfg: the SDFG, changed in place.
            plan: what `plan` returned (not a `Decline`).
        """
        use_output_as_buffer(sdfg, plan)
