"""Analysis of the Map that produces an intermediate: its write index and dataflow slice.

Everything here is read-only: the functions inspect a state and return frozen
descriptions, or a `Decline` that says why the producer cannot be inlined.
"""

from __future__ import annotations

import dataclasses
from typing import Optional, Union

import dace
from dace import data as dace_data
from dace.sdfg import nodes as dn
from dace.sdfg.state import SDFGState

from gt4py_dace_xforms.analysis.symbolic import (
    IndexTerm,
    UnsupportedIndex,
    prove_zero,
    split_index,
    to_sympy,
)


@dataclasses.dataclass(frozen=True)
class Decline:
    """A candidate that cannot be rewritten, and the reason in one line."""

    reason: str

    def __bool__(self) -> bool:  # a decline is falsy, so `if not result:` reads naturally
        return False


@dataclasses.dataclass(frozen=True)
class SliceInput:
    """Outside data the producer's slice reads: the data name and the AccessNode it comes from."""

    data: str
    source: dn.AccessNode


@dataclasses.dataclass(frozen=True, eq=False)
class ProducerSlice:
    """The part of a producer Map that computes one element of the intermediate.

    Attributes:
        map_entry, map_exit: the producer Map.
        write_edge: the edge inside the Map that writes the intermediate's element.
        nodes: the nodes inside the Map the written value depends on, in the state's
            node order (deterministic; not topological: the rewrite copies edges).
        inputs: outside data read by the slice, one entry per data name.
        write_terms: the write index per dimension of the intermediate as
            `producer_param + c` (or a constant with `param=None`).
        param_ranges: producer parameter -> (first, last) iteration, inclusive.
        fixed_params: parameters absent from the write index, each with its only value.
    """

    map_entry: dn.MapEntry
    map_exit: dn.MapExit
    write_edge: dace.sdfg.graph.MultiConnectorEdge
    nodes: tuple
    inputs: tuple[SliceInput, ...]
    write_terms: tuple[IndexTerm, ...]
    param_ranges: tuple[tuple[str, object, object], ...]
    fixed_params: tuple[tuple[str, object], ...] = ()

    def range_of(self, param: str):
        """The first and last value of the producer Map's parameter `param`.

        Args:
            param: the parameter's name.

        Returns:
            `(first, last)`, inclusive.

        Raises:
            KeyError: where the Map has no parameter `param`.
        """
        for p, first, last in self.param_ranges:
            if p == param:
                return first, last
        raise KeyError(param)


def _is_view(desc: dace_data.Data) -> bool:
    return isinstance(desc, dace_data.View)


def is_single_element(subset) -> bool:
    """True if every dimension of `subset` has exactly one index.

    Args:
        subset: a DaCe subset.

    Returns:
        True where each dimension's range is one index.
    """
    return subset is not None and all(
        prove_zero(to_sympy(e) - to_sympy(b)) for b, e, _ in subset.ndrange()
    )


def data_users(sdfg: dace.SDFG) -> dict[str, list[tuple[SDFGState, dn.AccessNode]]]:
    """Map data name -> every (state, AccessNode) that refers to it in `sdfg` (not nested).

    Args:
        sdfg: the SDFG.

    Returns:
        the map.
    """
    users: dict[str, list] = {}
    for st in sdfg.states():
        for node in st.data_nodes():
            users.setdefault(node.data, []).append((st, node))
    return users


def interstate_reads(sdfg: dace.SDFG) -> set[str]:
    """Names (symbols and data) read on any interstate edge or control-flow condition.

    Args:
        sdfg: the SDFG (its nested SDFGs are not looked into).

    Returns:
        the names.
    """
    names: set[str] = set()
    for edge in sdfg.all_interstate_edges():
        names |= set(edge.data.read_symbols())
    for region in sdfg.all_control_flow_regions():
        for code in getattr(region, "branches", ()):
            cond = code[0]
            if cond is not None:
                names |= {str(s) for s in cond.get_free_symbols()}
        cond = getattr(region, "loop_condition", None)
        if cond is not None:
            names |= {str(s) for s in cond.get_free_symbols()}
    return names


def referenced_elsewhere(sdfg: dace.SDFG, data: str, nodes, users=None) -> bool:
    """True if an AccessNode of `data` other than `nodes` exists (any state of `sdfg`),
    or an interstate edge or control-flow condition reads it.

    Args:
        sdfg: the SDFG.
        data: the data's name.
        nodes: the AccessNodes that do not count.
        users: data name -> the `(state, AccessNode)` pairs that access it (`data_users`).

    Returns:
        True where something else refers to `data`.
    """
    users = data_users(sdfg) if users is None else users
    if any(all(node is not n for n in nodes) for _, node in users.get(data, ())):
        return True
    return data in interstate_reads(sdfg)


def slice_nodes(state: SDFGState, map_entry: dn.MapEntry, start: dn.Node) -> tuple:
    """All nodes inside the Map from which `start` is reachable, `start` included, in the
    state's node order: a set of nodes iterates in address order, which made the inlined
    copy's node order and the first decline's message differ from one process to the next.

    Args:
        state: the state.
        map_entry: the Map's entry.
        start: the node the slice ends at.

    Returns:
        the nodes, in the state's order.
    """
    seen: set = set()
    stack = [start]
    while stack:
        node = stack.pop()
        if node is map_entry or node in seen:
            continue
        seen.add(node)
        stack.extend(e.src for e in state.in_edges(node))
    return tuple(n for n in state.nodes() if n in seen)


def _write_index(wsub, prod_map: dn.Map) -> Union[tuple[tuple, list], Decline]:
    """The producer's write index: each dimension `param + c` or a constant, each parameter
    in one dimension; a parameter it leaves out must take one value only. Returns the
    index terms and the `(param, value)` of those left out, or a Decline."""
    params = list(prod_map.params)
    try:
        terms = tuple(split_index(b, params) for b, _, _ in wsub.ndrange())
    except UnsupportedIndex as err:
        return Decline(f"producer write index unsupported: {err}")
    used = [t.param for t in terms if t.param is not None]
    if len(used) != len(set(used)):
        return Decline("producer write index uses one parameter in several dimensions")
    fixed = []
    for p, (first, last, _) in zip(params, prod_map.range.ndrange()):
        if p in used:
            continue
        # A parameter missing from the write index is fine if it takes one value only
        # (gt4py folds a one-level range `0:1` into the index as the constant `0`).
        if not prove_zero(to_sympy(last) - to_sympy(first)):
            return Decline(
                f"producer writes one element from several iterations (parameter '{p}' unused)"
            )
        fixed.append((p, to_sympy(first)))
    return terms, fixed


def analyse_producer(
    sdfg: dace.SDFG,
    state: SDFGState,
    outer_write: dace.sdfg.graph.MultiConnectorEdge,
    users: dict[str, list],
) -> Union[ProducerSlice, Decline]:
    """Describe how the Map behind `outer_write` (a `MapExit -> AccessNode` edge) computes
    that AccessNode's data, or say why it cannot be inlined.

    Args:
        sdfg: the SDFG.
        state: the producer's state.
        outer_write: the `MapExit -> AccessNode` edge.
        users: data name -> the `(state, AccessNode)` pairs that access it (`data_users`).

    Returns:
        the `ProducerSlice`, or a `Decline` with the reason.
    """
    map_exit = outer_write.src
    if not isinstance(map_exit, dn.MapExit):
        return Decline("producer is not a Map")
    map_entry = state.entry_node(map_exit)
    if state.scope_dict()[map_entry] is not None:
        return Decline("producer Map is not at the top level of the state")
    for conn in map_entry.in_connectors:
        if not conn.startswith("IN_"):
            return Decline(f"producer Map has a dynamic range input '{conn}'")
    prod_map = map_entry.map
    for _, _, step in prod_map.range.ndrange():
        if not prove_zero(to_sympy(step) - 1):
            return Decline("producer Map has a step other than 1")

    if outer_write.data.wcr is not None:
        return Decline("producer writes the intermediate with a WCR")
    if outer_write.src_conn is None or not outer_write.src_conn.startswith("OUT_"):
        return Decline("producer writes the intermediate through an unexpected connector")
    inner = list(state.in_edges_by_connector(map_exit, "IN_" + outer_write.src_conn[4:]))
    if len(inner) != 1:
        return Decline("producer writes the intermediate through several edges")
    write_edge = inner[0]
    if write_edge.data.wcr is not None:
        return Decline("producer writes the intermediate with a WCR")
    wsub = write_edge.data.get_dst_subset(write_edge, state)
    if wsub is None or not is_single_element(wsub):
        return Decline("producer writes more than one element per iteration")

    params = list(prod_map.params)
    index = _write_index(wsub, prod_map)
    if isinstance(index, Decline):
        return index
    terms, fixed = index

    nodes = slice_nodes(state, map_entry, write_edge.src) if write_edge.src is not map_entry else ()
    reason = _check_slice_nodes(sdfg, state, map_entry, nodes, write_edge, users)
    if reason:
        return Decline(reason)

    inputs = _slice_inputs(sdfg, state, map_entry, nodes, write_edge, users)
    if isinstance(inputs, Decline):
        return inputs

    ranges = tuple((p, b, e) for p, (b, e, _) in zip(params, prod_map.range.ndrange()))
    return ProducerSlice(
        map_entry=map_entry,
        map_exit=map_exit,
        write_edge=write_edge,
        nodes=nodes,
        inputs=inputs,
        write_terms=terms,
        param_ranges=ranges,
        fixed_params=tuple(fixed),
    )


def _check_slice_nodes(sdfg, state, map_entry, nodes, write_edge, users) -> Optional[str]:
    scope_nodes = set(
        state.scope_subgraph(map_entry, include_entry=True, include_exit=True).nodes()
    )
    for node in nodes:
        if isinstance(node, dn.AccessNode):
            desc = sdfg.arrays[node.data]
            if not desc.transient:
                return f"producer dataflow writes global data '{node.data}'"
            if _is_view(desc):
                return f"producer dataflow uses the view '{node.data}'"
            if any(n not in scope_nodes for _, n in users.get(node.data, ())):
                return f"producer-local data '{node.data}' is used outside the producer"
        elif isinstance(node, (dn.Tasklet, dn.LibraryNode, dn.NestedSDFG)):
            # A nested SDFG answers for the code nodes inside it.
            if node.has_side_effects(sdfg):
                return f"producer node '{node.label}' has side effects"
        elif isinstance(node, dn.MapExit):
            if any(e.dst not in nodes and e is not write_edge for e in state.out_edges(node)):
                return (
                    f"nested Map '{node.label}' also computes results outside the inlined dataflow"
                )
        elif isinstance(node, dn.MapEntry):
            pass
        else:
            return f"producer contains an unsupported node '{type(node).__name__}'"
        for e in state.in_edges(node):
            if e.data.wcr is not None:
                return "producer dataflow contains a WCR edge"
    return None


def _slice_inputs(sdfg, state, map_entry, nodes, write_edge, users):
    """Outside data read by the slice, with the AccessNode that supplies it."""
    entry_edges = [e for n in nodes for e in state.in_edges(n) if e.src is map_entry]
    if write_edge.src is map_entry:
        entry_edges.append(write_edge)
    found: dict[str, SliceInput] = {}
    for e in entry_edges:
        if e.data.is_empty():
            continue
        outer = list(state.in_edges_by_connector(map_entry, "IN_" + e.src_conn[4:]))
        if len(outer) != 1 or not isinstance(outer[0].src, dn.AccessNode):
            return Decline("producer input does not come from an AccessNode")
        src = outer[0].src
        if _is_view(sdfg.arrays[src.data]):
            return Decline(f"producer reads the view '{src.data}'")
        if e.data.data != src.data:
            return Decline("producer input Memlet renames its data")
        prev = found.get(src.data)
        if prev is not None and prev.source is not src:
            return Decline(f"producer reads '{src.data}' through two AccessNodes")
        found[src.data] = SliceInput(src.data, src)
    # The consumer will read the same AccessNodes later; nothing in the state may write
    # that data on any other node, or the inlined copy could see a different value.
    for inp in found.values():
        for st, node in users.get(inp.data, ()):
            if st is state and node is not inp.source and state.in_degree(node) > 0:
                return Decline(f"producer input '{inp.data}' is written elsewhere in the state")
    return tuple(found.values())
