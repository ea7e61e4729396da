"""A scan's inputs computed by one Map: `scan_input_set`. Pure: never mutates.

gt4py lowers the implicit solvers' tridiagonal coefficients to one Map over (cells,
levels) writing several 2-D transients (icon4py's `vertically_implicit_solver_at_*_step`:
`a`, `b`, `c`, `d` of the forward sweep), each read by the scan's nested SDFG, one column
per iteration of the scan's Map and one element per level of its loop. Inlining one of
them into the loop (a nested read, `analysis/nested_reads.py`) leaves the Map in place for
the others: priced alone, each copy adds the loads the Map still does. Inlining all of
them moves the whole Map into the loop: every point is still evaluated once, at the level
the scan reads it, and every array goes (GridTools' k-caches, icon4py's Fortran solver
loop nest).

`scan_input_set(sdfg, cand)` is that set: the candidates for every output of `cand`'s
producer Map, where each output is an intermediate this analysis proves inlinable into
the same scan (nested reads in a loop of the same nested SDFG), read by nothing else, each
element of it read at one level per iteration (one copy); None otherwise. A Map with one
output is a set of one: moved into the loop, it too is evaluated once per point.
"""

from __future__ import annotations

from typing import Optional, cast

import dace
from dace.sdfg import nodes as dn
from dace.sdfg.state import LoopRegion

from gt4py_dace_xforms.analysis.candidate import InlineCandidate, analyse_candidate
from gt4py_dace_xforms.analysis.producer import Decline, ProducerSlice


def has_loop(nsdfg: dace.SDFG) -> bool:
    """Whether `nsdfg` (a nested SDFG) has a loop: how a scan is told from other nested SDFGs.

    Args:
        nsdfg: the nested SDFG.

    Returns:
        True where it has a loop region.
    """
    return any(isinstance(r, LoopRegion) for r in nsdfg.all_control_flow_regions())


def is_scan_read(cand: InlineCandidate) -> bool:
    """`cand` reads its intermediate only inside one nested SDFG with a loop (a scan),
    one element per level (one copy), and removes the intermediate.

    Args:
        cand: the inline candidate.

    Returns:
        True for such a scan read.
    """
    if not cand.nested or cand.groups or cand.indirect or not cand.removes_intermediate:
        return False
    if cand.concat is not None or cand.selected is not None or cand.producer is None:
        return False
    nodes = {id(r.node) for r in cand.nested}
    return len(nodes) == 1 and has_loop(cand.nested[0].node.sdfg) and cand.copies == 1


def scan_input_set(sdfg: dace.SDFG, cand: InlineCandidate) -> Optional[list[InlineCandidate]]:
    """Every output of `cand`'s producer Map as a candidate read by the same scan (see the
    module docstring), `cand` first (alone where the Map has no other output); None where
    some output is not.

    Args:
        sdfg: the SDFG.
        cand: a candidate `is_scan_read` accepts.

    Returns:
        the candidates, or None.
    """
    if not is_scan_read(cand):
        return None
    # a scan read has a producer Map (`is_scan_read`)
    state, prod = cand.producer_state, cast(ProducerSlice, cand.producer)
    scan = cand.nested[0].node
    members = [cand]
    for e in state.out_edges(prod.map_exit):
        node = e.dst
        if not isinstance(node, dn.AccessNode) or node is cand.intermediate:
            continue
        if node.data == cand.intermediate.data:
            return None
        readers = [r for r in state.out_edges(node)]
        consumers = {id(r.dst): r.dst for r in readers}
        if len(consumers) != 1 or not isinstance(readers[0].dst, dn.MapEntry):
            return None
        other = analyse_candidate(sdfg, state, node, readers[0].dst)
        if (
            isinstance(other, Decline)
            or not is_scan_read(other)
            or other.nested[0].node is not scan
        ):
            return None
        if other.producer is None or other.producer.map_entry is not prod.map_entry:
            return None
        members.append(other)
    return members
