"""`gt_trim_split_hazards`: a Map that writes all of a transient its one reader reads only in
part, at run-time bounds gt4py's `MapSplitter` cannot split, computes only that part.

gt4py's `MapSplitter` (in `gt_auto_optimize`, after the top-level fusion rounds) splits
such a Map at what is read and removes the rest; for a read of `Max(0, nc):32` of `0:32`
its `decompose_subset` finds no split and `apply` asserts, failing the build
(`analysis.later_stages.splitter_failures`, issue 60). The library's rewrites can leave
that shape (a partial inline takes one reader of a transient that two scans split at `nc`
read, and the column narrowing makes the other's read exact). This pass does what the
splitter would: the Map's range shrinks to the part read, so no element the reader needs
is lost and nothing is computed that nobody reads.

Restrictions: the Map writes only that transient, at `param - start` in every dimension
(gt4py's canonical write; anything else is left as it is); top-level states only.
"""

from __future__ import annotations

import dace
import sympy
from dace.sdfg import nodes as dn, propagation

from gt4py_dace_xforms.analysis.later_stages import splitter_failures
from gt4py_dace_xforms.analysis.symbolic import to_sympy
from gt4py_dace_xforms.report import InlineReport


def gt_trim_split_hazards(sdfg: dace.SDFG, *, validate: bool = True) -> InlineReport:
    """Shrink each Map `splitter_failures` names to the part of its transient that is read.

    Args:
        sdfg: the SDFG, changed in place.
        validate: validate the SDFG at the end.

    Returns:
        The report: in `split_hazards_trimmed` the transients whose writers were trimmed.
    """
    trimmed = []
    for label, data, consumed in splitter_failures(sdfg):
        state = next((s for s in sdfg.states() if s.label == label), None)
        node = (
            next((n for n in state.data_nodes() if n.data == data), None)
            if state is not None
            else None
        )
        if node is not None and _trim(sdfg, state, node, consumed):
            trimmed.append(data)
    if validate:
        sdfg.validate()
    return InlineReport(split_hazards_trimmed=trimmed)


def _trim(sdfg: dace.SDFG, state: dace.SDFGState, node: dn.AccessNode, consumed) -> bool:
    writes = state.in_edges(node)
    if (
        len(writes) != 1
        or not isinstance(writes[0].src, dn.MapExit)
        or state.out_degree(writes[0].src) != 1
    ):
        return False
    exit_ = writes[0].src
    entry = state.entry_node(exit_)
    inner = [e for e in state.in_edges(exit_) if e.dst_conn == "IN_" + writes[0].src_conn[4:]]
    params, ranges = entry.map.params, entry.map.range.ranges
    if len(inner) != 1 or len(params) != len(consumed.ranges) or inner[0].data.subset is None:
        return False
    index = inner[0].data.subset.ranges
    new = []
    for d, (param, (start, _, step), (lo, hi, cstep)) in enumerate(
        zip(params, ranges, consumed.ranges)
    ):
        i0, i1, _ = index[d]
        want = to_sympy(param) - to_sympy(start)
        if (
            sympy.simplify(to_sympy(i0) - want) != 0
            or sympy.simplify(to_sympy(i1) - want) != 0
            or step != 1
            or cstep != 1
        ):
            return False
        new.append((start + lo, start + hi, 1))
    entry.map.range = dace.subsets.Range(new)
    propagation.propagate_memlets_state(sdfg, state)
    return True
