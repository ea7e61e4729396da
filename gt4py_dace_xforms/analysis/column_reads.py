"""Column reads: a nested SDFG in a horizontal Map that reads only its own column of an
array, although the memlet into it spans more.

gt4py passes each field a scan reads to the scan's nested SDFG as a whole array, and the
memlet into it covers every column up to the Map's index (`T[0:i + 1, 0:nlev]`) or all of
them; inside, a loop over K reads `a[i - range_0, k - range_1]`. Read that way, the memlet
is not pointwise in the Map's parameter, so no Map fusion can give the scan its input
column by column: a column Map before the scan (gt4py's, or a vertical window) has to
write the whole 2-D array first (the solvers' `gtir_tmp_161/172/181/198`).

`column_read_plan()` proves that every access of the array inside the nested SDFG is at
one index in one dimension, the same in every state and loop iteration, that is the
enclosing Map's parameter plus a constant once the nested SDFG's symbols are mapped out
(`i`, or `i - start` where gt4py lays the transient out from its domain's first point);
the transformation (`transformations/column_reads.py`) then passes that column alone:
the memlet becomes `T[i - start, 0:nlev]`, the nested array loses the dimension. What the nested SDFG
computes is unchanged, and MapFusionVertical can then fuse the column producer with the
scan (the array becomes one column per iteration). Pure: never mutates, never raises for
a well-formed SDFG.

Conditions (all checked):

- The edge goes from the entry of a top-level Map to an input connector of a NestedSDFG
  directly in that Map's scope; the memlet is plain (no WCR, not dynamic) on a transient
  or global Array of rank >= 2, with a subset of that rank.
- Inside, the connector's array is a non-transient Array of the same rank, only read (no
  AccessNode of it has an in-edge), not read on an interstate edge, not passed to a
  deeper nested SDFG or a View; every memlet of it (through inner Map scopes too) holds,
  in the chosen dimension, one index.
- That index, with the nested SDFG's symbol mapping substituted, plus the outer memlet's
  start in that dimension, is one parameter of the enclosing Map plus a term free of the
  Map's parameters (a transient starts at its domain's first point: `i - 2560`), the same
  for every read; no symbol in it is defined inside the nested SDFG (loop variables,
  interstate assignments).
"""

from __future__ import annotations

import dataclasses
from typing import Optional, Union

import dace
import sympy
from dace import data as dace_data
from dace.sdfg import nodes as dn

from gt4py_dace_xforms.analysis.nested_reads import defined_inside
from gt4py_dace_xforms.analysis.producer import Decline, interstate_reads
from gt4py_dace_xforms.analysis.symbolic import to_sympy


@dataclasses.dataclass(frozen=True, eq=False)
class ColumnReadPlan:
    """Pass only column `param` (dimension `dim`) of the outer array through `edge`.

    Attributes:
        edge: the Map-scope edge into the NestedSDFG node.
        node: the NestedSDFG node.
        connector: the array's name inside the nested SDFG.
        dim: the dimension that is one index per Map iteration.
        param: the enclosing Map's parameter the index follows (outer symbols).
        inner: every inner edge whose memlet refers to the array, with its state.
        index: the column, in the outer array's coordinates: `param` plus a constant
            (the array's first point in the Map's domain).
    """

    edge: dace.sdfg.graph.MultiConnectorEdge
    node: dn.NestedSDFG
    connector: str
    dim: int
    param: str
    inner: tuple
    index: sympy.Expr


def _index_problem(inner_edges, ndim: int) -> Union[list[dict[int, sympy.Expr]], str]:
    """The single index each memlet holds per dimension (dimensions with a range are
    left out), or why a memlet cannot be read that way."""
    out = []
    for _, e in inner_edges:
        m = e.data
        if m.wcr is not None:
            return "a memlet of the array inside the nested SDFG has a WCR"
        if m.subset is None or len(m.subset) != ndim:
            return "a memlet of the array inside the nested SDFG has another rank"
        single = {}
        for d, (b, end, _step) in enumerate(m.subset.ndrange()):
            if sympy.simplify(to_sympy(end) - to_sympy(b)) == 0:
                single[d] = to_sympy(b)
        out.append(single)
    return out


def _param_plus_constant(index: sympy.Expr, params: set[str]) -> Optional[str]:
    """The Map parameter `p` where `index` is `p + c` and `c` names no Map parameter
    (gt4py's transients start at the domain's first point: the column of iteration `i`
    of a Map over `start:end` is `i - start`), else None."""
    named = [f for f in index.free_symbols if str(f) in params]
    if len(named) != 1:
        return None
    rest = sympy.expand(index - named[0])
    if any(str(f) in params for f in rest.free_symbols):
        return None
    return str(named[0])


def _inner_reads(node: dn.NestedSDFG, conn: str) -> Union[list, Decline]:
    """Every inner edge (with its state) whose memlet refers to `conn` inside `node`'s
    SDFG, or a Decline where the nested SDFG writes it, views it, passes it on to a deeper
    nested SDFG, copies it with a memlet of other data, or does not read it."""
    inner_sdfg = node.sdfg
    inner: list = []
    for st in inner_sdfg.all_states():
        for acc in st.nodes():
            if isinstance(acc, dn.NestedSDFG) and any(
                e.data.data == conn for e in st.all_edges(acc)
            ):
                return Decline(f"nested SDFG '{node.label}' passes '{conn}' on to a nested SDFG")
            if not isinstance(acc, dn.AccessNode) or acc.data != conn:
                continue
            if st.in_degree(acc) > 0:
                return Decline(f"nested SDFG '{node.label}' writes '{conn}'")
            for e in st.out_edges(acc):
                other = e.dst
                if isinstance(other, dn.AccessNode) and isinstance(
                    inner_sdfg.arrays[other.data], dace_data.View
                ):
                    return Decline(f"nested SDFG '{node.label}' views '{conn}'")
                for x in st.memlet_tree(e):
                    if x.data.data != conn:
                        return Decline(
                            f"nested SDFG '{node.label}' copies '{conn}' with a memlet of other data"
                        )
                    inner.append((st, x))
    if not inner:
        return Decline(f"nested SDFG '{node.label}' does not read '{conn}'")
    return inner


def _column_in_dimension(
    singles: list[dict[int, sympy.Expr]],
    d: int,
    defined: set[str],
    mapping: dict,
    params: set[str],
    start: sympy.Expr,
) -> Optional[tuple[str, sympy.Expr]]:
    """The Map parameter and the outer index (the parameter plus a constant) every read
    holds in dimension `d`, or None where a read has a range there, names a symbol defined
    inside the nested SDFG or one the symbol mapping lacks, or where the reads disagree."""
    if not all(d in s for s in singles):
        return None
    found: Optional[tuple[str, sympy.Expr]] = None
    for s in singles:
        x = s[d]
        if {str(f) for f in x.free_symbols} & defined:
            return None
        if not all(str(f) in mapping for f in x.free_symbols):
            return None
        outer_index = sympy.expand(x.xreplace({f: mapping[str(f)] for f in x.free_symbols}) + start)
        name = _param_plus_constant(outer_index, params)
        if name is None or (found is not None and (name, outer_index) != found):
            return None
        found = (name, outer_index)
    return found


def column_read_plan(
    sdfg: dace.SDFG, state: dace.SDFGState, edge
) -> Union[ColumnReadPlan, Decline]:
    """The plan for passing only the Map iteration's column through `edge`, or a Decline
    saying why not (see the module docstring).

    Args:
        sdfg: the SDFG.
        state: the state holding `edge`.
        edge: the edge from a Map entry into a nested SDFG's input connector.

    Returns:
        the `ColumnReadPlan`, or a `Decline` with the reason.
    """
    node, conn = edge.dst, edge.dst_conn
    if not isinstance(node, dn.NestedSDFG) or conn is None or not isinstance(edge.src, dn.MapEntry):
        return Decline("not an edge from a Map entry into a nested SDFG")
    entry = edge.src
    scope = state.scope_dict()
    if scope[entry] is not None or scope[node] is not entry:
        return Decline("the nested SDFG is not directly inside a top-level Map")
    m = edge.data
    if m.is_empty() or m.wcr is not None or m.dynamic or m.data not in sdfg.arrays:
        return Decline("the memlet into the nested SDFG is empty, dynamic or has a WCR")
    outer = sdfg.arrays[m.data]
    if type(outer) is not dace_data.Array or len(outer.shape) < 2:
        return Decline(f"'{m.data}' is not an array of rank 2 or more")
    ndim = len(outer.shape)
    subset = m.subset  # the edge's memlet names the outer array
    if subset is None or len(subset) != ndim or m.other_subset is not None:
        return Decline("the memlet into the nested SDFG has no subset of the array")
    inner_sdfg = node.sdfg
    desc = inner_sdfg.arrays.get(conn)
    if type(desc) is not dace_data.Array or desc.transient or len(desc.shape) != ndim:
        return Decline(
            f"nested SDFG '{node.label}' sees '{m.data}' as something other than an array of its rank"
        )
    if conn in interstate_reads(inner_sdfg):
        return Decline(f"nested SDFG '{node.label}' reads '{conn}' on an interstate edge")
    inner = _inner_reads(node, conn)
    if isinstance(inner, Decline):
        return inner
    singles = _index_problem(inner, ndim)
    if isinstance(singles, str):
        return Decline(singles)
    defined = defined_inside(inner_sdfg)
    mapping = {k: to_sympy(v) for k, v in node.symbol_mapping.items()}
    params = {str(p) for p in entry.map.params}
    starts = [to_sympy(b) for b, _, _ in subset.ndrange()]
    for d in range(ndim):
        found = _column_in_dimension(singles, d, defined, mapping, params, starts[d])
        if found is not None:
            return ColumnReadPlan(edge, node, conn, d, found[0], tuple(inner), found[1])
    return Decline(
        f"nested SDFG '{node.label}' does not read '{conn}' at the Map's index in any dimension"
    )
