"""`WriteBackToMap`: write a write-back copy `T -> G` as a pointwise Map, so that the
inliner can take it as a reader (analysis/writeback.py says when and why; docs/writeback.md).

`copy_to_map` is the mutation; `group_problem` decides, on a deep copy of the SDFG, whether
converting lets every reader of `T` be inlined under a policy; `convert_writeback_copies`
(run by `gt_inline_intermediates` first) and the `WriteBackToMap` transformation (the viewer's
and `apply_transformations`' route, with "everything sound") convert only then, so a
declined group leaves the SDFG unchanged.
"""

from __future__ import annotations

import copy as _copy
from typing import Any, Optional, cast

import dace
from dace import properties, subsets as dace_sbs, transformation
from dace.sdfg import nodes as dn, utils as sdutil

from gt4py_dace_xforms.analysis.candidate import analyse_candidate
from gt4py_dace_xforms.analysis.producer import Decline
from gt4py_dace_xforms.analysis.retarget import retarget_plan
from gt4py_dace_xforms.analysis.siblings import sibling_candidates
from gt4py_dace_xforms.analysis.writeback import (
    WriteBackCopy,
    map_readers,
    other_readers,
    writeback_copies,
)
from gt4py_dace_xforms.policy import InlinePolicy, InlineWhereSound
from gt4py_dace_xforms.policy.decide import decide_candidate


def _param_names(sdfg: dace.SDFG, state: dace.SDFGState, copy: WriteBackCopy) -> list[str]:
    """One Map parameter per dimension, named like the parameter a Map writing `T` uses
    in that dimension (gt4py names them after the dimension, `i_K_gtx_vertical`, and its
    later passes order loops by those names); `__wb<d>` where none is found."""
    ndim = len(sdfg.arrays[copy.source.data].shape)
    names = [f"__wb{d}" for d in range(ndim)]
    for st in sdfg.states():
        for node in st.data_nodes():
            if node.data != copy.source.data:
                continue
            for e in st.in_edges(node):
                if not isinstance(e.src, dn.MapExit):
                    continue
                params = set(st.entry_node(e.src).map.params)
                subset = e.data.get_dst_subset(e, st)
                inner = [
                    ie for ie in st.in_edges(e.src) if ie.dst_conn == "IN_" + (e.src_conn or "")[4:]
                ]
                if inner:
                    subset = inner[0].data.get_dst_subset(inner[0], st) or subset
                if subset is None or len(subset) != ndim:
                    continue
                found = []
                for b, _, _ in subset.ndrange():
                    used = sorted(
                        str(s)
                        for s in dace.symbolic.pystr_to_symbolic(str(b)).free_symbols
                        if str(s) in params
                    )
                    found.append(used[0] if len(used) == 1 else None)
                if all(found) and len(set(found)) == ndim:
                    taken = set(map(str, sdfg.free_symbols)) | set(sdfg.symbols)
                    if not taken & set(found):
                        return cast(list[str], found)  # all(found): no None
    return names


def copy_to_map(sdfg: dace.SDFG, copy: WriteBackCopy, label: str = "") -> dn.MapEntry:
    """Replace the copy edge `T[a] -> G[b]` by a Map `G[b0 + p] = T[a0 + p]` over the
    copy's extent (same nodes, same order).

    Args:
        sdfg: the SDFG, changed in place.
        copy: the write-back copy (`analysis.writeback.WriteBackCopy`): its state, edge,
            source `T` and target `G`.
        label: the Map's name (default `writeback_T_G`; gt4py splits some copies into
            several edges).

    Returns:
        The new Map's entry.
    """
    state, edge = copy.state, copy.edge
    src = edge.data.get_src_subset(edge, state)
    dst = edge.data.get_dst_subset(edge, state)
    params = _param_names(sdfg, state, copy)
    ranges = {p: f"0:{size}" for p, size in zip(params, src.size())}
    read = dace_sbs.Range(
        [(f"{p} + ({b})", f"{p} + ({b})", 1) for p, (b, _, _) in zip(params, src.ndrange())]
    )
    write = dace_sbs.Range(
        [(f"{p} + ({b})", f"{p} + ({b})", 1) for p, (b, _, _) in zip(params, dst.ndrange())]
    )
    src_name, dst_name = copy.source.data, copy.target.data
    tasklet, entry, _ = state.add_mapped_tasklet(
        label or f"writeback_{src_name}_{dst_name}",
        ranges,
        inputs={"__inp": dace.Memlet(data=src_name, subset=read)},
        code="__out = __inp",
        outputs={"__out": dace.Memlet(data=dst_name, subset=write)},
        external_edges=True,
        input_nodes={src_name: copy.source},
        output_nodes={dst_name: copy.target},
    )
    tasklet.in_connectors["__inp"] = sdfg.arrays[src_name].dtype
    tasklet.out_connectors["__out"] = sdfg.arrays[dst_name].dtype
    state.remove_edge(edge)
    return entry


def writeback_labels(copies: list[WriteBackCopy]) -> list[str]:
    """Map names for the copies: `writeback_T_G`, numbered where one pair has several edges.

    Args:
        copies: the write-back copies of one transient.

    Returns:
        One name per copy, in order.
    """
    base = [f"writeback_{c.source.data}_{c.target.data}" for c in copies]
    return [b if base.count(b) == 1 else f"{b}_{base[:i].count(b)}" for i, b in enumerate(base)]


def group_problem(sdfg: dace.SDFG, name: str, policy: InlinePolicy) -> Optional[str]:
    """Why writing the write-back copies of `name` as Maps would not let every reader of
    `name` be inlined under `policy`, or None. Never mutates `sdfg`: the decisive check
    runs on a deep copy (only once the cheap checks pass).

    Args:
        sdfg: the SDFG holding the transient (not changed).
        name: the transient's name.
        policy: the policy deciding the group of readers.

    Returns:
        The reason, or None where converting the copies lets every reader be inlined.
    """
    copies = writeback_copies(sdfg, name)
    if isinstance(copies, Decline):
        return copies.reason
    if not copies:
        return f"'{name}' has no write-back copy"
    if other_readers(sdfg, name):
        return f"'{name}' has readers other than Maps and write-back copies"
    for st, node, entry in map_readers(sdfg, name):
        verdict = analyse_candidate(sdfg, st, node, entry)
        if isinstance(verdict, Decline):
            return f"reader {entry.map.label}: {verdict.reason}"
    trial = _copy.deepcopy(sdfg)
    # the copy of `sdfg`, whose copies were found above
    tcopies = cast(list[WriteBackCopy], writeback_copies(trial, name))
    entries = [copy_to_map(trial, c, lab) for c, lab in zip(tcopies, writeback_labels(tcopies))]
    cand = analyse_candidate(trial, tcopies[0].state, tcopies[0].source, entries[0])
    if isinstance(cand, Decline):
        return f"the copy as a Map: {cand.reason}"
    if sibling_candidates(trial, cand) is None:
        return f"not every reader of '{name}' can be inlined once the copy is a Map"
    decision = decide_candidate(trial, policy, cand)
    return None if decision.accept else f"policy: {decision.reason}"


def convert_writeback_copies(sdfg: dace.SDFG, policy: InlinePolicy) -> list[str]:
    """Write the write-back copies of every transient as Maps where `group_problem` finds
    none (the policy accepts inlining the whole group). A policy with
    `writeback_copies = False` opts out; a copy `WriteBackRetarget` can take (with
    `writeback_retarget`) is left to it.

    Args:
        sdfg: the SDFG, changed in place.
        policy: the policy deciding each transient's group of readers.

    Returns:
        The names of the transients whose copies became Maps, sorted.
    """
    if not policy.writeback_copies:
        return []
    retargets = policy.writeback_retarget
    converted = []
    for name in sorted(n for n, d in sdfg.arrays.items() if d.transient):
        copies = writeback_copies(sdfg, name)
        if not copies or isinstance(copies, Decline):
            continue
        if retargets and not isinstance(retarget_plan(sdfg, name, allow_map_readers=True), Decline):
            continue  # the writers will write the output: no need to recompute it in a Map
        if group_problem(sdfg, name, policy) is not None:
            continue
        for c, lab in zip(copies, writeback_labels(copies)):
            copy_to_map(sdfg, c, lab)
        converted.append(name)
    return converted


@properties.make_properties
@transformation.explicit_cf_compatible
class WriteBackToMap(transformation.SingleStateTransformation):
    """Write a copy of a transient into global data (gt4py's write-back of an output that
    other operators read shifted) as a pointwise Map, so that `InlineFuser` can inline the
    transient's producer there as in any reader, and the transient can go away.

    Pattern: `(T) -> (G)`, `T` a transient array, `G` global data, a plain copy edge.
    Applies only where, with every write-back copy of `T` written as a Map, every reader
    of `T` is a sound `InlineFuser` candidate ("everything sound"; `gt_inline_intermediates`
    asks its policy instead, see `convert_writeback_copies`).

    Restrictions (declined, the SDFG untouched): a copy `WriteBackRetarget` can take once
    the Map readers are inlined (the writers then write `G`, no recomputation); strided,
    reshaping or WCR copies, copies into a View, a transient read by anything other than
    Maps and such copies, a copy whose Map could not recompute the producer (an input
    written in between).
    `can_be_applied()` never mutates and never raises.
    """

    source = transformation.PatternNode(dn.AccessNode)
    target = transformation.PatternNode(dn.AccessNode)

    @classmethod
    def expressions(cls) -> Any:
        """DaCe's pattern: a transient's access node (`T`) copied into a global one (`G`).

        Returns:
            One path graph, `source` -> `target`.
        """
        return [sdutil.node_path_graph(cls.source, cls.target)]

    def why_not(self, state: dace.SDFGState, sdfg: dace.SDFG) -> Optional[str]:
        """Why this match does not apply, or None.

        Args:
            state: the state the pattern matched in.
            sdfg: the SDFG holding `state` (not changed).

        Returns:
            The reason (also where the analysis raised), or None.
        """
        try:
            desc, gdesc = sdfg.arrays[self.source.data], sdfg.arrays[self.target.data]
            if not desc.transient or gdesc.transient:
                return "not a copy of a transient into global data"
            if state.scope_dict()[self.source] is not None:
                return "the copy is inside a scope"
            if not isinstance(
                retarget_plan(sdfg, self.source.data, allow_map_readers=True), Decline
            ):
                # As in `gt_inline_intermediates`: inline the Map readers, then `WriteBackRetarget`.
                return "the writers can write the output directly once the Maps are inlined (WriteBackRetarget)"
            return group_problem(sdfg, self.source.data, InlineWhereSound())
        except Exception as err:  # noqa: BLE001  # a matcher must decline, never abort compilation
            return f"analysis failed: {type(err).__name__}: {err}"

    def can_be_applied(
        self, graph: dace.SDFGState, expr_index: int, sdfg: dace.SDFG, permissive: bool = False
    ) -> bool:
        """Whether `why_not` finds no reason.

        Args:
            graph: the state the pattern matched in.
            expr_index: which of `expressions()` matched (unused).
            sdfg: the SDFG holding `graph`.
            permissive: DaCe's permissive flag (unused).

        Returns:
            True where the match applies.
        """
        return self.why_not(graph, sdfg) is None

    def apply(self, graph: dace.SDFGState, sdfg: dace.SDFG) -> None:
        """Write the matched copy (every edge of it from `source` to `target` in `graph`)
        as a Map (`copy_to_map`); `can_be_applied` must have held.

        Args:
            graph: the state the pattern matched in.
            sdfg: the SDFG, changed in place.
        """
        # found by can_be_applied
        copies = cast(list[WriteBackCopy], writeback_copies(sdfg, self.source.data))
        labels = writeback_labels(copies)
        for c, lab in zip(copies, labels):
            if c.state is graph and c.source is self.source and c.target is self.target:
                copy_to_map(sdfg, c, lab)
