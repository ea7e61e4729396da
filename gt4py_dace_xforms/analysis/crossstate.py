"""Reads of an intermediate in a later state than its producers: what may run in between.

Inlining moves the producer's reads from the producer's state to the consumer's state.
That is sound only if nothing the inlined dataflow reads (data or symbols) changes on
any path in between. The control-flow analysis here is conservative: anything it
cannot bound (loops around either state, cycles) makes it answer "unknown".
"""

from __future__ import annotations

from typing import Iterable, Optional

import dace
import networkx as nx
from dace.sdfg.state import ConditionalBlock, ControlFlowRegion, LoopRegion, SDFGState


def top_block(sdfg: dace.SDFG, state: SDFGState):
    """The block of the SDFG's top-level control-flow graph that contains `state`.

    Args:
        sdfg: the SDFG.
        state: a state of it, at any depth.

    Returns:
        the top-level block.
    """
    block = state
    while block.parent_graph is not sdfg:
        block = block.parent_graph
        if block is None:
            return None
    return block


def in_loop(sdfg: dace.SDFG, state: SDFGState) -> bool:
    """Whether `state` lies inside a loop region of `sdfg`.

    Args:
        sdfg: the SDFG.
        state: the state.

    Returns:
        True inside a `LoopRegion`.
    """
    g = state.parent_graph
    while g is not None and g is not sdfg:
        if isinstance(g, LoopRegion):
            return True
        g = g.parent_graph
    return False


def _states_of(block) -> list[SDFGState]:
    if isinstance(block, SDFGState):
        return [block]
    return list(block.all_states())


def _interstate_edges_of(block) -> list:
    if isinstance(block, ControlFlowRegion):
        return list(block.all_interstate_edges())
    return [e for r in getattr(block, "branches", ()) for e in r[1].all_interstate_edges()]


def states_between(sdfg: dace.SDFG, first: SDFGState, second: SDFGState):
    """States and interstate edges that may execute after `first` and before `second`.

    Returns `(states, edges)` over-approximating that set, or `None` if the control flow
    cannot be bounded: either state in a loop, a cycle in the top-level graph, both in
    one top-level block, or `second` not reachable from `first`.

    Args:
        sdfg: the SDFG.
        first: the earlier state.
        second: the later state.

    Returns:
        `(states, edges)`, or None.
    """
    if first is second or in_loop(sdfg, first) or in_loop(sdfg, second):
        return None
    b1, b2 = top_block(sdfg, first), top_block(sdfg, second)
    if b1 is None or b2 is None or b1 is b2:
        return None
    g = nx.DiGraph()
    g.add_nodes_from(sdfg.nodes())
    g.add_edges_from((e.src, e.dst) for e in sdfg.edges())
    if not nx.is_directed_acyclic_graph(g) or not nx.has_path(g, b1, b2):
        return None
    middle = (nx.descendants(g, b1) & nx.ancestors(g, b2)) | {b1, b2}
    states = [s for b in middle for s in _states_of(b) if s is not first and s is not second]
    edges = [e for e in sdfg.edges() if e.src in middle and e.dst in middle]
    edges += [e for b in middle for e in _interstate_edges_of(b)]
    return states, edges


def cross_state_conflict(
    sdfg: dace.SDFG,
    first: SDFGState,
    second: SDFGState,
    data: Iterable[str],
    symbols: Iterable[str],
) -> Optional[str]:
    """Why reading `data` and `symbols` in `second` could differ from `first`, or None.

    Conservative: any write of the data in a state in between, or in `second` at all,
    and any assignment of the symbols on an interstate edge in between, is a conflict.

    Args:
        sdfg: the SDFG.
        first: the state where the values are read first.
        second: the state that reads them again.
        data: the data read.
        symbols: the symbols read.

    Returns:
        the reason, or None.
    """
    between = states_between(sdfg, first, second)
    if between is None:
        return "cannot bound the control flow between producer and consumer state"
    states, edges = between
    data, symbols = set(data), set(symbols)
    for st in [*states, second]:
        for node in st.data_nodes():
            if node.data in data and st.in_degree(node) > 0:
                return f"'{node.data}' is written in state '{st.label}' before the consumer"
    for e in edges:
        assigned = set(e.data.assignments) & (symbols | data)
        if assigned:
            return f"symbols {sorted(assigned)} are reassigned between producer and consumer"
    return None


def _branch_path(state: SDFGState) -> Optional[dict[int, tuple[object, int]]]:
    """id(block) -> (block, index of its branch holding `state`) for every
    `ConditionalBlock` around `state`; None if a loop (a `LoopRegion` or a cycle of
    interstate edges) is around it, where different iterations may take different
    branches."""
    path: dict[int, tuple[object, int]] = {}
    child, g = state, state.parent_graph
    while g is not None:
        if isinstance(g, LoopRegion):
            return None
        if isinstance(g, ConditionalBlock):
            index = next((i for i, (_, region) in enumerate(g.branches) if region is child), None)
            if index is None:
                return None
            path[id(g)] = (g, index)
        elif isinstance(g, ControlFlowRegion) and not nx.is_directed_acyclic_graph(g.nx):
            return None
        if isinstance(g, dace.SDFG):
            break
        child, g = g, g.parent_graph
    return path


def mutually_exclusive(a: SDFGState, b: SDFGState) -> bool:
    """True only if no call runs both states: they lie in different branches of one
    `ConditionalBlock` that no loop repeats (conservatively False otherwise).

    Args:
        a: a state.
        b: another state.

    Returns:
        True only where proven.
    """
    pa, pb = _branch_path(a), _branch_path(b)
    if pa is None or pb is None:
        return False
    return any(pa[k][1] != pb[k][1] for k in pa.keys() & pb.keys())


def co_executed_sets(states: list[SDFGState], limit: int = 12) -> list[frozenset[int]]:
    """The maximal sets of indices into `states` that one call may all run (no two
    `mutually_exclusive`). More than `limit` states: one set of all (conservative).

    Args:
        states: the states.
        limit: the most states compared pairwise.

    Returns:
        the sets, as frozensets of indices.
    """
    n = len(states)
    everything = frozenset(range(n))
    if n > limit:
        return [everything]
    clash = {
        (i, j)
        for i in range(n)
        for j in range(i + 1, n)
        if mutually_exclusive(states[i], states[j])
    }
    if not clash:
        return [everything]
    fits = [frozenset(i for i in range(n) if mask >> i & 1) for mask in range(1, 1 << n)]
    fits = [s for s in fits if not any((i, j) in clash for i in s for j in s if i < j)]
    return [s for s in fits if not any(s < t for t in fits)]
