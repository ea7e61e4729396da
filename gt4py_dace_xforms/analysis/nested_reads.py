"""Reads of an intermediate inside a nested SDFG of the consumer (column reads by scans).

gt4py lowers a scan (`scan_operator`) to a nested SDFG inside the consumer Map over the
horizontal dimension: it receives each input column as a whole array and, in a loop over
K, reads one element per level (`a[i - range_0, k - range_1]`). The consumer's memlet
carries a range, so the element-wise analysis sees "more than one element at once".

`match_nested_reads()` looks inside: every read of the array in the nested SDFG must be
a single element feeding a tasklet at the top level of its state, nothing there writes
the array or reads it on an interstate edge, and the nested SDFG must not define the
symbols the inlined dataflow needs. It returns the reads grouped by index (one copy of
the producer each, evaluated inside the loop at the level read). An input the nested
SDFG already receives whole, under its own name (`receives_whole`), is reused by the
copies; any other data of that name there declines the read. Pure: never mutates.

A scan receives one column: the memlet fixes the horizontal index (`a[i - range_0, 0:K]`)
and the nested array has only the K dimension. Such a *squeezed* dimension (size 1 in the
memlet, absent inside) is read at its fixed index, an expression of the enclosing Maps'
parameters, which the copies then receive as symbols (`NestedRead.scope_symbols`).
"""

from __future__ import annotations

import dataclasses
from typing import Union

import dace
import sympy
from dace import data as dace_data, subsets as dace_sbs
from dace.sdfg import nodes as dn
from dace.sdfg.state import LoopRegion, SDFGState

from gt4py_dace_xforms.analysis.producer import Decline, interstate_reads, is_single_element
from gt4py_dace_xforms.analysis.symbolic import canonical, to_sympy


@dataclasses.dataclass(frozen=True, eq=False)
class NestedReadGroup:
    """The reads of one element (index in the nested SDFG's symbols) in one state."""

    key: tuple[str, ...]
    state: SDFGState  # the nested SDFG's state holding the reads
    index: tuple[sympy.Expr, ...]
    edges: tuple


@dataclasses.dataclass(frozen=True, eq=False)
class NestedRead:
    """An intermediate passed whole (or as a window) to a nested SDFG that reads elements.

    Attributes:
        edge: the consumer-scope edge into the NestedSDFG node.
        node: the NestedSDFG node.
        connector: the name of the array inside the nested SDFG.
        offset: element `x` of the nested array is element `x + offset` of the intermediate
            (per dimension of the intermediate; a squeezed dimension's offset is its fixed
            index, and `x` there is 0).
        groups: one group per distinct (state, index) read; the index has one entry per
            dimension of the intermediate (0 for a squeezed one).
        squeezed: the intermediate's dimensions the nested array does not have.
        scope_symbols: parameters of the enclosing Maps the offset uses, which the copies
            receive as symbols of their own name.
    """

    edge: dace.sdfg.graph.MultiConnectorEdge
    node: dn.NestedSDFG
    connector: str
    offset: tuple[sympy.Expr, ...]
    groups: tuple[NestedReadGroup, ...]
    squeezed: tuple[int, ...] = ()
    scope_symbols: tuple[str, ...] = ()

    @property
    def key(self) -> tuple[str, ...]:
        """The nested SDFG node's label, which tells the reads of one nested SDFG from another's."""
        return (self.node.label,)


def defined_inside(nsdfg: dace.SDFG) -> set[str]:
    """Symbols a nested SDFG sets itself: loop variables and interstate assignments.

    Args:
        nsdfg: the nested SDFG.

    Returns:
        the symbols' names.
    """
    names = {
        r.loop_variable
        for r in nsdfg.all_control_flow_regions()
        if isinstance(r, LoopRegion) and r.loop_variable
    }
    for e in nsdfg.all_interstate_edges():
        names |= set(e.data.assignments)
    return names


def _squeezed_dims(desc, sub, ndim: int) -> Union[tuple[int, ...], Decline]:
    """The intermediate's dimensions the nested array lacks (none where it has them all),
    or a Decline where the memlet does not fix exactly that many to one index."""
    squeezed: tuple[int, ...] = ()
    if len(desc.shape) < ndim:
        # A column: the dimensions of size 1 are the ones the nested array lacks, and
        # there must be exactly as many as it lacks (else which one is which is a guess).
        squeezed = tuple(
            d for d, size in enumerate(sub.size()) if canonical(to_sympy(size)) == canonical(1)
        )
        if len(squeezed) != ndim - len(desc.shape):
            return Decline(
                "nested read: the nested array lacks dimensions of the intermediate that the memlet "
                "does not fix to one index"
            )
    return squeezed


def _read_groups(
    inner: dace.SDFG, conn: str, rank: int, squeezed: tuple[int, ...], ndim: int
) -> Union[dict, Decline]:
    """The nested SDFG's reads of `conn` (an array of `rank` dimensions) grouped by state
    and index in the intermediate's `ndim` dimensions (the `squeezed` ones at 0), or a
    Decline where it writes the array or reads it other than as a plain single element
    in a top-level tasklet."""
    groups: dict = {}
    for st in inner.all_states():
        scope = None
        for acc in st.data_nodes():
            if acc.data != conn:
                continue
            if st.in_degree(acc) > 0:
                return Decline("nested read: the nested SDFG writes the array")
            scope = scope or st.scope_dict()
            for e in st.out_edges(acc):
                if not isinstance(e.dst, dn.Tasklet) or scope[e.dst] is not None:
                    return Decline(
                        "nested read: the array is read by something other than a top-level tasklet"
                    )
                if e.data.wcr is not None or e.data.dynamic or not is_single_element(e.data.subset):
                    return Decline(
                        "nested read: a read inside the nested SDFG is not a plain single element"
                    )
                if e.data.data != conn or len(e.data.subset) != rank:
                    return Decline(
                        "nested read: a read inside the nested SDFG has an unexpected memlet"
                    )
                inner_index = iter(to_sympy(b) for b, _, _ in e.data.subset.ndrange())
                index = tuple(
                    sympy.Integer(0) if d in squeezed else next(inner_index) for d in range(ndim)
                )
                key = (st.label, *(canonical(x) for x in index))
                groups.setdefault((id(st), key), (st, key, index, []))[3].append(e)
    return groups


def match_nested_reads(state, edge, ndim: int) -> Union[NestedRead, Decline]:
    """Describe the reads behind `edge` (consumer scope -> NestedSDFG), or decline.

    Args:
        state: the consumer's state.
        edge: the edge from the consumer's scope into the NestedSDFG.
        ndim: the intermediate's rank.

    Returns:
        the `NestedRead`, or a `Decline` with the reason.
    """
    node = edge.dst
    if not isinstance(node, dn.NestedSDFG) or edge.dst_conn is None:
        return Decline("consumer reads more than one element of the intermediate at once")
    if edge.data.wcr is not None or edge.data.dynamic:
        return Decline("nested read: the memlet into the nested SDFG is dynamic or has a WCR")
    inner = node.sdfg
    conn = edge.dst_conn
    desc = inner.arrays.get(conn)
    if desc is None or type(desc) is not dace_data.Array or len(desc.shape) > ndim:
        return Decline(
            "nested read: the nested array is not an array of the intermediate's dimensionality"
        )
    sub = edge.data.get_src_subset(edge, state) or edge.data.subset
    if sub is None or len(sub) != ndim:
        return Decline(
            "nested read: the memlet into the nested SDFG has no subset of the intermediate"
        )
    squeezed = _squeezed_dims(desc, sub, ndim)
    if isinstance(squeezed, Decline):
        return squeezed
    offset = tuple(to_sympy(b) for b, _, _ in sub.ndrange())
    # The window's origin is an expression of the consumer's scope: the copy can use it
    # inside only if every symbol in it reaches the nested SDFG unchanged, or is a
    # parameter of an enclosing Map, which the rewrite passes in as a symbol.
    same = {k for k, v in node.symbol_mapping.items() if str(v) == k}
    scope_params = _enclosing_params(state, node)
    used = {str(s) for o in offset for s in o.free_symbols}
    if any(name not in same and name not in scope_params for name in used):
        return Decline(
            "nested read: the window origin uses symbols the nested SDFG does not see as they are"
        )
    passed = tuple(sorted(name for name in used if name not in same))
    if any(
        name in inner.arrays or name in defined_inside(inner) or name in node.symbol_mapping
        for name in passed
    ):
        return Decline(
            "nested read: the nested SDFG has its own meaning for a Map parameter the column index uses"
        )
    if conn in interstate_reads(inner):
        return Decline("nested read: the nested SDFG reads the array on an interstate edge")
    groups = _read_groups(inner, conn, len(desc.shape), squeezed, ndim)
    if isinstance(groups, Decline):
        return groups
    if not groups:
        return Decline("nested read: the nested SDFG does not read the array")
    return NestedRead(
        edge=edge,
        node=node,
        connector=conn,
        offset=offset,
        groups=tuple(
            NestedReadGroup(key, st, index, tuple(edges))
            for st, key, index, edges in groups.values()
        ),
        squeezed=squeezed,
        scope_symbols=passed,
    )


def _enclosing_params(state, node) -> set[str]:
    """The parameters of every Map enclosing `node` in `state`."""
    scope = state.scope_dict()
    names: set[str] = set()
    entry = scope[node]
    while entry is not None:
        names.update(entry.map.params)
        entry = scope[entry]
    return names


def symbol_conflict(read: NestedRead, names) -> str | None:
    """Why the copies could not use the symbols `names` inside the nested SDFG, or None:
    a name the nested SDFG defines itself, maps to something else, or uses for data.

    Args:
        read: the nested read.
        names: the symbols the copies would use.

    Returns:
        the reason, or None.
    """
    inner = read.node.sdfg
    defined = defined_inside(inner)
    for name in sorted(names):
        if name in defined or name in inner.arrays:
            return f"nested read: the nested SDFG defines '{name}' itself, which the producer uses"
        mapped = read.node.symbol_mapping.get(name)
        if mapped is not None and str(mapped) != name:
            return f"nested read: the nested SDFG maps '{name}' to '{mapped}', not to itself"
    return None


def whole_source(sdfg: dace.SDFG, state, node: dn.NestedSDFG, name: str):
    """The outer AccessNode whose array `name` the nested SDFG of `node` receives whole,
    under the same name and descriptor, and never writes; None if it does not. Whether
    that AccessNode holds the value a producer reads is the caller's question
    (`receives_whole`, or the producer reading the same AccessNode).

    Args:
        sdfg: the outer SDFG.
        state: the state of `node`.
        node: the NestedSDFG node.
        name: the array's name.

    Returns:
        the outer AccessNode, or None.
    """
    inner, outer = node.sdfg, sdfg.arrays.get(name)
    desc = inner.arrays.get(name)
    if (
        desc is None
        or outer is None
        or name not in node.in_connectors
        or name in node.out_connectors
    ):
        return None
    if type(desc) is not type(outer) or desc.dtype != outer.dtype or desc.transient:
        return None
    if tuple(map(str, desc.shape)) != tuple(map(str, outer.shape)) or tuple(
        map(str, desc.strides)
    ) != tuple(map(str, outer.strides)):
        return None
    edges = [e for e in state.in_edges(node) if e.dst_conn == name]
    if len(edges) != 1:
        return None
    e = edges[0]
    if e.data.data != name or e.data.wcr is not None or e.data.dynamic:
        return None
    if e.data.subset is None or str(e.data.subset) != str(dace_sbs.Range.from_array(outer)):
        return None
    source = state.memlet_path(e)[0].src
    if not isinstance(source, dn.AccessNode) or source.data != name:
        return None
    if any(
        n.data == name and st.in_degree(n) > 0 for st in inner.all_states() for n in st.data_nodes()
    ):
        return None
    return source


def receives_whole(sdfg: dace.SDFG, state, node: dn.NestedSDFG, name: str) -> bool:
    """Whether the nested SDFG of `node` already receives the outer array `name` whole
    under the same name and descriptor, read-only, from an AccessNode of `name` in a
    state that never writes `name`: then its `name` is the copies' input, unchanged, and
    the rewrite reuses it instead of passing it a second time.

    Args:
        sdfg: the outer SDFG.
        state: the state of `node`.
        node: the NestedSDFG node.
        name: the array's name.

    Returns:
        True where the nested SDFG already has the array, unchanged.
    """
    if whole_source(sdfg, state, node, name) is None:
        return False
    # written in this state: the nested SDFG may see another value
    return not any(n.data == name and state.in_degree(n) > 0 for n in state.data_nodes())
