"""Write-back copies: a transient copied into global data, which keeps the transient alive.

gt4py computes a field operator's result into a transient `T` and, for a program
output `G` that other operators also read, copies `T` into `G` (an AccessNode ->
AccessNode edge, often in a later state) while the other readers keep reading `T`.
gt4py's `GT4PyWriteBackBufferElimination` turns `T` into `G` when the copy provably
covers all of `T`; where it does not (`T` computed on more levels than `G` receives, for
the shifted readers), `T` stays, and every reader that the inliner could take is
declined because the copy needs `T` anyway ("the intermediate stays for other readers").

A write-back copy is also a pointwise reader of `T`: written as a Map, it is a consumer
like any other, and the inliner can compute `G` there from the producer's inputs. This
module finds the copies (pure analysis); `transformations.writeback` turns them into
Maps, and only where inlining every reader of `T` is then sound and accepted.
"""

from __future__ import annotations

import dataclasses
from typing import Optional, Union, cast

import dace
from dace import data as dace_data
from dace.sdfg import nodes as dn
from dace.sdfg.state import SDFGState

from gt4py_dace_xforms.analysis.producer import Decline
from gt4py_dace_xforms.analysis.races import UnorderedAccess, race_problem


@dataclasses.dataclass(frozen=True)
class WriteBackCopy:
    """One copy edge `T -> G`: `state`, the two AccessNodes and the edge."""

    state: SDFGState
    source: dn.AccessNode
    target: dn.AccessNode
    edge: dace.sdfg.graph.MultiConnectorEdge


def _copy_problem(sdfg: dace.SDFG, state: SDFGState, edge) -> Optional[str]:
    """Why the copy `edge` cannot become a pointwise Map, or None."""
    src, dst = edge.src, edge.dst
    sdesc, ddesc = sdfg.arrays[src.data], sdfg.arrays[dst.data]
    if type(ddesc) is not dace_data.Array:
        return f"write-back target '{dst.data}' is a {type(ddesc).__name__}, not an array"
    if edge.data.wcr is not None:
        return f"write-back copy into '{dst.data}' has a WCR"
    if len(sdesc.shape) != len(ddesc.shape):
        return f"write-back copy into '{dst.data}' changes the dimensionality"
    src_subset = edge.data.get_src_subset(edge, state)
    dst_subset = edge.data.get_dst_subset(edge, state)
    if src_subset is None or dst_subset is None:
        return f"write-back copy into '{dst.data}' has no explicit subsets"
    if any(s != 1 for s in (*src_subset.strides(), *dst_subset.strides())):
        return f"write-back copy into '{dst.data}' is strided"
    if any((a - b) != 0 for a, b in zip(src_subset.size(), dst_subset.size())):
        return f"write-back copy into '{dst.data}' reshapes"
    return None


def writeback_copies(sdfg: dace.SDFG, name: str) -> Union[list[WriteBackCopy], Decline]:
    """Every copy of the transient array `name` into global (non-transient) data, in
    any state, or a Decline when some such copy cannot be written as a pointwise Map.
    An empty list: `name` has no write-back copy.

    Args:
        sdfg: the SDFG.
        name: the transient's name.

    Returns:
        the copies, or a `Decline` with the reason.
    """
    desc = sdfg.arrays.get(name)
    if desc is None or not desc.transient or type(desc) is not dace_data.Array:
        return []
    found = []
    for state in sdfg.states():
        scope = state.scope_dict()
        for node in state.data_nodes():
            if node.data != name:
                continue
            for e in state.out_edges(node):
                dst = e.dst
                if not isinstance(dst, dn.AccessNode) or sdfg.arrays[dst.data].transient:
                    continue
                if scope[node] is not None:
                    return Decline(f"write-back copy of '{name}' inside a scope")
                problem = _copy_problem(sdfg, state, e)
                race = race_problem(sdfg, [state], (name, dst.data))
                if problem or race:  # no problem: then a race
                    return Decline(problem or cast(UnorderedAccess, race).reason)
                found.append(WriteBackCopy(state, node, dst, e))
    return found


def _reads(sdfg: dace.SDFG, name: str):
    """(state, AccessNode, edge) for every edge leaving an AccessNode of `name`."""
    for state in sdfg.states():
        for node in state.data_nodes():
            if node.data == name:
                for e in state.out_edges(node):
                    yield state, node, e


def map_readers(sdfg: dace.SDFG, name: str) -> list[tuple[SDFGState, dn.AccessNode, dn.MapEntry]]:
    """(state, AccessNode, MapEntry) for every top-level Map that reads `name`.

    Args:
        sdfg: the SDFG.
        name: the data's name.

    Returns:
        the triples.
    """
    return [(st, node, e.dst) for st, node, e in _reads(sdfg, name)
            if isinstance(e.dst, dn.MapEntry) and st.scope_dict()[node] is None]  # fmt: skip


def other_readers(sdfg: dace.SDFG, name: str) -> list[tuple[SDFGState, dn.AccessNode, object]]:
    """Edges that read `name` and are neither a Map consumer nor a write-back copy
    (another transient, a tasklet, a nested SDFG at the top level): with any of them,
    converting the copies cannot make `name` disappear.

    Args:
        sdfg: the SDFG.
        name: the data's name.

    Returns:
        `(state, AccessNode, reader)` per such read.
    """
    return [(st, node, e) for st, node, e in _reads(sdfg, name)
            if not isinstance(e.dst, dn.MapEntry)
            and not (isinstance(e.dst, dn.AccessNode) and not sdfg.arrays[e.dst.data].transient)]  # fmt: skip
