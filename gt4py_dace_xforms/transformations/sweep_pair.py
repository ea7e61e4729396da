"""`SweepPairFusion`: the Maps over the cells that write 2-D intermediates column by
column, fused into the one Map over the same cells that reads each column back, the
intermediates becoming a per-iteration column buffer (analysis/sweep_pair.py says when;
docs/scans.md).

`fuse_sweep_pair` is the mutation, driven by a frozen `SweepPairPlan`;
`gt_fuse_sweep_pairs` applies it to every top-level Map of an SDFG where the plan holds;
`SweepPairFusion` is the route of `apply_transformations` and the viewer.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any, Collection, Optional

import dace
from dace import properties, subsets as dace_sbs, transformation
from dace.sdfg import nodes as dn, utils as sdutil

from gt4py_dace_xforms.analysis.producer import Decline
from gt4py_dace_xforms.analysis.sweep_pair import (
    ColumnBuffer,
    SweepPairPlan,
    same_map as _same_map,
    sweep_pair_plan,
)
from gt4py_dace_xforms.report import InlineRecord, InlineReport
from gt4py_dace_xforms.transformations.column_reads import gt_narrow_column_reads


if TYPE_CHECKING:
    from gt4py_dace_xforms.policy import InlinePolicy


def _column_memlet(buffer: ColumnBuffer, name: str, memlet: dace.Memlet) -> dace.Memlet:
    rng = [r for d, r in enumerate(memlet.subset.ndrange()) if d != buffer.dim]
    return dace.Memlet(data=name, subset=dace_sbs.Range(rng), dynamic=memlet.dynamic)


def _fresh_connector(node, base: str) -> str:
    name, k = base, 0
    while "IN_" + name in node.in_connectors or "OUT_" + name in node.out_connectors:
        k += 1
        name = f"{base}_{k}"
    return name


def _move_inputs(state: dace.SDFGState, plan: SweepPairPlan) -> None:
    """The slices' inputs enter through the reader's entry; the writers lose them."""
    reader = plan.reader
    for ws in plan.writers:
        taken: dict = {}
        for n in ws.nodes:
            for e in list(state.in_edges(n)):
                if e.src is not ws.entry:
                    continue
                if e.data.is_empty():
                    state.add_edge(reader, None, n, None, dace.Memlet())
                    state.remove_edge(e)
                    continue
                conn = e.src_conn[4:]
                if conn not in taken:
                    outer = next(iter(state.in_edges_by_connector(ws.entry, "IN_" + conn)))
                    new = _fresh_connector(reader, conn)
                    reader.add_in_connector("IN_" + new)
                    reader.add_out_connector("OUT_" + new)
                    state.add_edge(
                        outer.src,
                        outer.src_conn,
                        reader,
                        "IN_" + new,
                        dace.Memlet.from_memlet(outer.data),
                    )
                    taken[conn] = new
                state.add_edge(
                    reader, "OUT_" + taken[conn], n, e.dst_conn, dace.Memlet.from_memlet(e.data)
                )
                state.remove_edge(e)
        for conn in list(ws.entry.out_connectors):
            if conn.startswith("OUT_") and not list(state.out_edges_by_connector(ws.entry, conn)):
                for outer in list(state.in_edges_by_connector(ws.entry, "IN_" + conn[4:])):
                    state.remove_edge(outer)
                ws.entry.remove_in_connector("IN_" + conn[4:])
                ws.entry.remove_out_connector(conn)


def fuse_sweep_pair(sdfg: dace.SDFG, plan: SweepPairPlan) -> list[str]:
    """Apply `plan`: the writers move into the reader Map, their buffers become columns.

    Args:
        sdfg: the SDFG, changed in place.
        plan: the `SweepPairPlan` (`analysis.sweep_pair`): the reader Map, its writers
            and the buffers.

    Returns:
        The names of the new column buffers.
    """
    state, reader = plan.state, plan.reader
    made = []
    for b in plan.buffers:
        desc = sdfg.arrays[b.data]
        # Default storage: DaCe places a transient inside a Map scope on the stack (CPU) or in
        # registers / local memory (GPU device Map); the intermediate's own storage may be global.
        name, _ = sdfg.add_transient(
            f"__sweep_col_{b.data}",
            b.shape,
            desc.dtype,
            storage=dace.StorageType.Default,
            find_new_name=True,
        )
        made.append(name)
        col = state.add_access(name)
        for e in b.writes:
            state.add_edge(e.src, e.src_conn, col, None, _column_memlet(b, name, e.data))
            state.remove_edge(e)
        for e in b.reads:
            state.add_edge(col, None, e.dst, e.dst_conn, _column_memlet(b, name, e.data))
            state.remove_edge(e)
        for e in b.outer_in:
            state.remove_edge(e)
            e.src.remove_in_connector("IN_" + e.src_conn[4:])
            e.src.remove_out_connector(e.src_conn)
        state.remove_edge(b.outer_out)
        reader.remove_in_connector(b.outer_out.dst_conn)
        reader.remove_out_connector("OUT_" + b.outer_out.dst_conn[3:])
        state.remove_node(b.node)
    _move_inputs(state, plan)
    for ws in plan.writers:
        exit_ = ws.exit
        if ws.whole:
            state.remove_nodes_from([ws.entry, exit_])
        elif state.in_degree(exit_) == 0:
            raise RuntimeError(
                f"writer '{ws.entry.map.label}' keeps no output"
            )  # the plan said it does
    for b in plan.buffers:
        sdfg.remove_data(b.data, validate=False)
    return made


def _column_candidates(sdfg: dace.SDFG) -> list[str]:
    """2-D transients with one AccessNode whose one reader is a top-level Map and whose
    writers are all top-level Maps of the same range: what a narrowed read could fuse."""
    out = []
    for state in sdfg.states():
        scope = state.scope_dict()
        for node in state.data_nodes():
            desc = sdfg.arrays.get(node.data)
            if desc is None or not desc.transient or len(desc.shape) < 2:
                continue
            outs, ins = state.out_edges(node), state.in_edges(node)
            if (
                len(outs) != 1
                or not isinstance(outs[0].dst, dn.MapEntry)
                or scope[outs[0].dst] is not None
                or not ins
            ):
                continue
            reader = outs[0].dst.map
            if all(
                isinstance(e.src, dn.MapExit)
                and scope[state.entry_node(e.src)] is None
                and _same_map(e.src.map, reader)
                for e in ins
            ):
                out.append(node.data)
    return sorted(set(out))


def gt_fuse_sweep_pairs(
    sdfg: dace.SDFG,
    *,
    names: Optional[Collection[str]] = None,
    policy: Optional["InlinePolicy"] = None,
    narrow_columns: bool = True,
    keep_narrowed: bool = True,
    validate: bool = True,
) -> InlineReport:
    """Fuse every sweep pair of `sdfg`'s states (`SweepPairFusion`): each top-level Map
    reading columns of 2-D transients that Maps of its range write takes their writers in,
    the transients becoming per-iteration column buffers.

    Args:
        sdfg: the SDFG, changed in place.
        names: only these intermediates (None: every one).
        policy: an `InlinePolicy` whose `decide_sweep_pair` takes or declines each plan.
            None: every plan.
        narrow_columns: first pass the readers' nested SDFGs only their column of such
            transients (`gt_narrow_column_reads`, where its own proof holds), as the
            library's hooks do; gt4py passes a scan the whole array.
        keep_narrowed: a narrowed read stays narrowed even where the fusion then declines
            (it computes the same, docs/scans.md). False (the GPU, whose model keeps scans'
            whole-array reads): the plans are made and decided on a copy, and only the
            taken plans' reads are narrowed and fused in `sdfg`, which a decline leaves as
            it was.
        validate: validate the SDFG at the end.

    Returns:
        The report: one record per buffer (mode "sweep_pair") and per declined plan, and in
        `sweep_pairs_fused` the number of fusions (one per reader Map).
    """
    records: list[InlineRecord] = []
    if narrow_columns and not keep_narrowed and _column_candidates(sdfg):
        # (Without candidates narrowing changes nothing: no copy needed.)
        trial = copy.deepcopy(sdfg)
        _fuse_all(trial, names, True, policy, records)
        taken = sorted({r.intermediate for r in records if r.removed_intermediate})
        count = _fuse_all(sdfg, taken, True, policy, None) if taken else 0
    else:
        count = _fuse_all(sdfg, names, narrow_columns, policy, records)
    report = InlineReport(records=records, sweep_pairs_fused=count)
    if validate:
        sdfg.validate()
    return report


def _fuse_all(
    sdfg: dace.SDFG,
    names: Optional[Collection[str]],
    narrow_columns: bool,
    policy,
    records: Optional[list],
) -> int:
    """`gt_fuse_sweep_pairs`' work: narrow, then plan, decide and fuse reader by reader."""
    wanted = set(names) if names is not None else None
    if narrow_columns:
        cands = [n for n in _column_candidates(sdfg) if wanted is None or n in wanted]
        if cands:
            gt_narrow_column_reads(sdfg, names=cands, validate=False)
    count = 0
    declined: set = set()
    for state in list(sdfg.all_states()):
        if state.sdfg is not sdfg:
            continue
        changed = True
        while changed:
            changed = False
            for node in list(state.nodes()):
                if (
                    not isinstance(node, dn.MapEntry)
                    or node not in state.nodes()
                    or node in declined
                ):
                    continue
                plan = sweep_pair_plan(sdfg, state, node, wanted)
                if isinstance(plan, Decline):
                    continue
                decision = policy.decide_sweep_pair(sdfg, plan) if policy is not None else None
                accept = decision is None or decision.accept
                if records is not None:
                    for name in plan.names:
                        records.append(
                            InlineRecord(
                                state.label,
                                name,
                                node.map.label,
                                (),
                                accept,
                                "sound" if decision is None else decision.reason,
                                removed_intermediate=accept,
                                figures=None if decision is None else decision.figures,
                                mode="sweep_pair" if accept else "",
                            )
                        )
                if not accept:
                    declined.add(node)
                    continue
                fuse_sweep_pair(sdfg, plan)
                count += 1
                changed = True
                break
    return count


@properties.make_properties
@transformation.explicit_cf_compatible
class SweepPairFusion(transformation.SingleStateTransformation):
    """Fuse a top-level Map (the reader: the backward sweep) with the top-level Maps of the
    same one-dimensional range that write the columns of 2-D transients it reads (the
    forward sweep, a level-0 writer), the transients becoming one column buffer per
    iteration: written and read back in the same iteration, no field-sized array.

    Of a writer Map only the nodes that compute the columns move (a level-0 writer that
    also writes other data keeps that part); a writer left with nothing disappears.

    Pattern: the reader's `MapEntry`. Property `intermediates`: only these transients
    (all that qualify if unset).

    Restrictions (an intermediate that fails stays; with none left it is declined and the
    SDFG untouched): the intermediate has one AccessNode in the SDFG (no other reader or
    writer, in any state) and is read by the reader alone; every writer is a top-level
    Map with the same parameter, range and schedule; every memlet of it reads or writes
    the iteration's own column (the parameter plus a constant in one dimension), none
    dynamic on the writer side, none with a WCR; per iteration the writes are disjoint
    and tile the whole column; tasklet endpoints access one element, nested-SDFG
    endpoints see the column as a contiguous array. The part of a writer that moves
    consists of Tasklets, NestedSDFGs and AccessNodes directly in its scope, feeds only
    the intermediates, and reads only data that nothing else in the state writes.
    `can_be_applied()` never mutates and never raises.
    """

    reader = transformation.PatternNode(dn.MapEntry)

    intermediates = properties.SetProperty(
        element_type=str,
        default=None,
        allow_none=True,
        desc="fuse only for these intermediates (all if unset)",
    )

    @classmethod
    def expressions(cls) -> Any:
        """DaCe's pattern: one MapEntry, the reader (the backward sweep).

        Returns:
            One graph of the `reader` node.
        """
        return [sdutil.node_path_graph(cls.reader)]

    def _plan(self, state: dace.SDFGState, sdfg: dace.SDFG):
        names = set(self.intermediates) if self.intermediates is not None else None
        return sweep_pair_plan(sdfg, state, self.reader, names)

    def can_be_applied(
        self, graph: dace.SDFGState, expr_index: int, sdfg: dace.SDFG, permissive: bool = False
    ) -> bool:
        """Whether the reader has a sweep pair plan (for `intermediates`, if set).

        Args:
            graph: the state the pattern matched in.
            expr_index: which of `expressions()` matched (unused).
            sdfg: the SDFG holding `graph`.
            permissive: DaCe's permissive flag (unused).

        Returns:
            True where there is a plan; False otherwise, also where the analysis raised.
        """
        try:
            return not isinstance(self._plan(graph, sdfg), Decline)
        except Exception:  # noqa: BLE001  # a matcher must decline, never abort compilation
            return False

    def apply(self, graph: dace.SDFGState, sdfg: dace.SDFG) -> None:
        """Plan the match and `fuse_sweep_pair`.

        Args:
            graph: the state the pattern matched in.
            sdfg: the SDFG, changed in place.

        Raises:
            ValueError: the match declines.
        """
        plan = self._plan(graph, sdfg)
        if isinstance(plan, Decline):
            raise ValueError(f"SweepPairFusion does not apply: {plan.reason}")
        fuse_sweep_pair(sdfg, plan)
