"""`NestedColumnRead`: pass a nested SDFG (a scan) only the column of its Map iteration
that it reads (analysis/column_reads.py says when; docs/scans.md).

`narrow_to_column` is the mutation, driven by a frozen `ColumnReadPlan`;
`gt_narrow_column_reads` applies it to every such read of a transient, which lets gt4py's
MapFusionVertical fuse a column producer (a vertical window, a column Map) with the scan
in its next round; `NestedColumnRead` is the route of the viewer and
`apply_transformations`.
"""

from __future__ import annotations

from typing import Any, Collection, Optional

import dace
from dace import properties, subsets as dace_sbs, transformation
from dace.sdfg import nodes as dn, utils as sdutil

from gt4py_dace_xforms.analysis.column_reads import ColumnReadPlan, column_read_plan
from gt4py_dace_xforms.analysis.producer import Decline
from gt4py_dace_xforms.report import InlineReport


def narrow_to_column(sdfg: dace.SDFG, plan: ColumnReadPlan) -> None:
    """Apply `plan`: the outer memlet takes one index (the Map parameter) in `plan.dim`,
    the nested array and every memlet of it inside lose that dimension.

    Args:
        sdfg: the SDFG, changed in place.
        plan: the `ColumnReadPlan` (`analysis.column_reads`): the edge into the nested
            SDFG and the dimension `dim` read at one index.
    """
    d = plan.dim
    m = plan.edge.data
    rng = list(m.subset.ndrange())
    index = dace.symbolic.pystr_to_symbolic(str(plan.index))
    rng[d] = (index, index, 1)
    plan.edge.data = dace.Memlet(data=m.data, subset=dace_sbs.Range(rng))
    desc = plan.node.sdfg.arrays[plan.connector]
    keep = [i for i in range(len(desc.shape)) if i != d]
    shape = [desc.shape[i] for i in keep]
    strides = [desc.strides[i] for i in keep]
    offset = [desc.offset[i] for i in keep]
    total = 1
    for s in shape:
        total *= s
    desc.set_shape(shape, strides=strides, total_size=total, offset=offset)
    for _, e in plan.inner:
        r = e.data.subset.ndrange()
        e.data.subset = dace_sbs.Range([r[i] for i in keep])


def gt_narrow_column_reads(
    sdfg: dace.SDFG, *, names: Optional[Collection[str]] = None, validate: bool = True
) -> InlineReport:
    """Narrow every read of a transient by a nested SDFG in a top-level Map to the Map
    iteration's column, where the plan holds (`NestedColumnRead`).

    Args:
        sdfg: the SDFG, changed in place.
        names: only these transients (None: every one).
        validate: validate the SDFG at the end.

    Returns:
        The report: in `column_reads` the (array, nested SDFG) pairs narrowed, in order.
    """
    done = []
    for state in sdfg.states():
        for node in list(state.nodes()):
            if not isinstance(node, dn.NestedSDFG):
                continue
            for edge in list(state.in_edges(node)):
                data = edge.data.data
                if data is None or data not in sdfg.arrays or not sdfg.arrays[data].transient:
                    continue
                if names is not None and data not in names:
                    continue
                plan = column_read_plan(sdfg, state, edge)
                if isinstance(plan, Decline):
                    continue
                narrow_to_column(sdfg, plan)
                done.append((data, node.label))
    if validate:
        sdfg.validate()
    return InlineReport(column_reads=done)


@properties.make_properties
@transformation.explicit_cf_compatible
class NestedColumnRead(transformation.SingleStateTransformation):
    """Pass a nested SDFG inside a top-level Map only the column of the array it reads:
    where every read of the array inside it, in every state and loop iteration, is at the
    Map's parameter plus a constant in one dimension (gt4py's scans read
    `a[i - range_0, k]`; a transient of a domain `start:end` is laid out from `start`),
    the memlet `T[0:i - start + 1, 0:K]` becomes `T[i - start, 0:K]` and the nested array
    loses that dimension. The
    nested SDFG computes what it did; MapFusionVertical can then fuse a column producer
    with it, so that `T` is one column per iteration instead of a 2-D array.

    Pattern: `(MapEntry) -> (NestedSDFG)`, the edge carrying an array of rank >= 2.

    Restrictions (declined, the SDFG untouched): a dynamic or WCR memlet; the nested SDFG
    writes the array, reads it on an interstate edge, views it or passes it on to a
    deeper nested SDFG; a read whose index in every dimension either is a range, uses a
    symbol the nested SDFG defines (a loop variable), or is not one Map parameter plus a
    term free of the Map's parameters once the symbol mapping is substituted. `can_be_applied()` never mutates and never raises.
    """

    map_entry = transformation.PatternNode(dn.MapEntry)
    nested = transformation.PatternNode(dn.NestedSDFG)

    @classmethod
    def expressions(cls) -> Any:
        """DaCe's pattern: a MapEntry with an edge into a nested SDFG (the scan).

        Returns:
            One path graph, `map_entry` -> `nested`.
        """
        return [sdutil.node_path_graph(cls.map_entry, cls.nested)]

    def _plans(self, state: dace.SDFGState, sdfg: dace.SDFG) -> list:
        plans = []
        for e in state.edges_between(self.map_entry, self.nested):
            plan = column_read_plan(sdfg, state, e)
            if not isinstance(plan, Decline):
                plans.append(plan)
        return plans

    def can_be_applied(
        self, graph: dace.SDFGState, expr_index: int, sdfg: dace.SDFG, permissive: bool = False
    ) -> bool:
        """Whether some edge from `map_entry` into `nested` reads one column.

        Args:
            graph: the state the pattern matched in.
            expr_index: which of `expressions()` matched (unused).
            sdfg: the SDFG holding `graph`.
            permissive: DaCe's permissive flag (unused).

        Returns:
            True if some edge has a plan; False otherwise, also where the analysis raised.
        """
        try:
            return bool(self._plans(graph, sdfg))
        except Exception:  # noqa: BLE001  # a matcher must decline, never abort compilation
            return False

    def apply(self, graph: dace.SDFGState, sdfg: dace.SDFG) -> None:
        """Narrow every edge from `map_entry` into `nested` that reads one column.

        Args:
            graph: the state the pattern matched in.
            sdfg: the SDFG, changed in place.

        Raises:
            ValueError: no edge reads one column at the Map's index.
        """
        plans = self._plans(graph, sdfg)
        if not plans:
            raise ValueError(
                "NestedColumnRead does not apply: no read of one column at the Map's index"
            )
        for plan in plans:
            narrow_to_column(sdfg, plan)
