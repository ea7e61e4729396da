"""Split fragments: one computation written by several Maps over adjacent ranges.

gt4py splits a Map along a horizontal dimension where its domain crosses zone bounds
(the halo, a limited-area grid's boundary), and leaves one Map per piece, each a copy of
the same dataflow over its own range, all writing one transient. icon4py's
`apply_divergence_damping_and_update_vn` writes its `gtir_tmp_58` (an Edge x K field) with
three such Maps (edges 1812:1968, 1968:29850, 29850:30093) and reads it through `E2C2E`.
To the inline analysis that is a concat node, and an indirect read of a concat node is
not supported: which writer holds a neighbor is known only at run time. But the writers
compute the same function of the index, so one Map over the union computes exactly what
the pieces do; `transformations/merge_fragments.py` makes it, and the read is then an
indirect read of one producer (docs/indirect_reads.md).

Pure analysis. `split_fragments` holds where (all checked, each with its reason):

- every writer of the AccessNode in its state is a top-level Map whose only output is
  that node (no WCR), with no empty (ordering) memlet into it;
- the Maps have the same parameters and schedule, and ranges that agree in every
  dimension but one, where they have unit steps and follow each other without gap or
  overlap (proven symbolically);
- their bodies are one graph up to node identity: the same tasklets (code and
  connectors), access nodes, inner Maps (parameters and ranges) and memlets (data,
  subset, WCR), connected alike, where a transient only the piece accesses may have a
  name of its own (of the same type and shape); a nested SDFG or any other node kind
  declines;
- every piece reads the same data through the same connectors, each from an AccessNode;
  where this state writes that data, from the very same AccessNode (another node of it
  may hold another version), so the merged Map reads what every piece read.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from typing import Union

import networkx as nx
from dace.sdfg import nodes as dn
from dace.sdfg.state import SDFGState

from gt4py_dace_xforms.analysis.producer import Decline
from gt4py_dace_xforms.analysis.symbolic import prove_zero


@dataclasses.dataclass(frozen=True, eq=False)
class SplitFragments:
    """The pieces of one split Map writing `node`: `entries` ordered along dimension `dim`
    of their ranges, which together run from `lo` to `hi` (inclusive, as dace's ranges)."""

    state: SDFGState
    node: dn.AccessNode
    entries: tuple[dn.MapEntry, ...]
    dim: int
    lo: object
    hi: object


def _locals(state: SDFGState, scope, accesses: Counter) -> dict[str, str]:
    """The transients only this scope accesses (gt4py's Map fusion names them per piece:
    `__map_fusion_gtir_tmp_44_0`, `_1`, ...), each by a name that says what it holds.
    `accesses`: the AccessNodes of each data in the whole SDFG."""
    sdfg = state.sdfg
    inside = Counter(n.data for n in scope.nodes() if isinstance(n, dn.AccessNode))
    got = {}
    for name in sorted(d for d, k in inside.items() if k == accesses[d]):
        desc = sdfg.arrays[name]
        if desc.transient:
            got[name] = f"<local {desc.dtype} {tuple(map(str, desc.shape))}>"
    return got


def _node_label(
    node: dn.Node, entry: dn.MapEntry, exit_: dn.MapExit, local: dict[str, str]
) -> Union[tuple, None]:
    """What two pieces' nodes must share to correspond, or None for a kind not compared."""
    if node is entry:
        return ("entry",)
    if node is exit_:
        return ("exit",)
    if isinstance(node, dn.Tasklet):
        return (
            "tasklet",
            node.code.as_string,
            str(node.language),
            tuple(sorted(node.in_connectors)),
            tuple(sorted(node.out_connectors)),
            node.side_effects,
        )
    if isinstance(node, dn.AccessNode):
        return ("access", local.get(node.data, node.data))
    if isinstance(node, dn.MapEntry):
        return ("map_entry", tuple(node.map.params), str(node.map.range))
    if isinstance(node, dn.MapExit):
        return ("map_exit", tuple(node.map.params), str(node.map.range))
    return None


def _body(
    state: SDFGState, entry: dn.MapEntry, accesses: Counter
) -> Union[nx.MultiDiGraph, Decline]:
    """The piece's scope as a labelled graph (its entry's outer edges left out)."""
    exit_ = state.exit_node(entry)
    scope = state.scope_subgraph(entry)
    local = _locals(state, scope, accesses)
    graph = nx.MultiDiGraph()
    for node in scope.nodes():
        label = _node_label(node, entry, exit_, local)
        if label is None:
            return Decline(
                f"split fragments: {entry.map.label} holds a {type(node).__name__}, not compared"
            )
        graph.add_node(id(node), label=label)
    for e in scope.edges():
        m = e.data
        graph.add_edge(
            id(e.src),
            id(e.dst),
            label=(
                e.src_conn,
                e.dst_conn,
                local.get(m.data, m.data),
                str(m.subset),
                str(m.other_subset),
                str(m.wcr),
                m.dynamic,
            ),
        )
    return graph


def _same_body(a: nx.MultiDiGraph, b: nx.MultiDiGraph) -> bool:
    def match(x, y) -> bool:
        return x["label"] == y["label"]

    def match_edges(x, y) -> bool:
        # a multigraph's edge attributes come keyed: compare the multisets of labels
        return sorted(map(str, (d["label"] for d in x.values()))) == sorted(
            map(str, (d["label"] for d in y.values()))
        )

    return nx.is_isomorphic(a, b, node_match=match, edge_match=match_edges)


def _outer_inputs(state: SDFGState, entry: dn.MapEntry, written: set[str]) -> Union[tuple, Decline]:
    """(data, connector, source) of every outer read; the source is the AccessNode itself
    where this state writes the data (another node of it may hold another version)."""
    got = []
    for e in state.in_edges(entry):
        if e.data.data is None:
            return Decline(f"split fragments: an empty memlet orders {entry.map.label}")
        if not isinstance(e.src, dn.AccessNode):
            return Decline(
                f"split fragments: {entry.map.label} reads from a {type(e.src).__name__}"
            )
        got.append((e.data.data, e.dst_conn, id(e.src) if e.data.data in written else None))
    return tuple(sorted(got, key=str))


def _writer_maps(state: SDFGState, node: dn.AccessNode) -> Union[list, Decline]:
    """The entries of the top-level Maps writing only `node`, one per writer edge."""
    writers = state.in_edges(node)
    if len(writers) < 2:
        return Decline("split fragments: fewer than two writers")
    scopes = state.scope_dict()
    entries = []
    for e in writers:
        exit_ = e.src
        if not isinstance(exit_, dn.MapExit) or scopes.get(state.entry_node(exit_)) is not None:
            return Decline("split fragments: a writer is no top-level Map")
        if e.data.wcr is not None or state.out_degree(exit_) != 1:
            return Decline(f"split fragments: {exit_.map.label} writes more than the node")
        entries.append(state.entry_node(exit_))
    if len({id(x) for x in entries}) != len(entries):
        return Decline("split fragments: one Map writes the node twice")
    return entries


def _chain(entries: list, dim: int) -> Union[list, None]:
    """`entries` in the order their ranges follow each other along `dim` (each starting one
    past the previous one's end, proven), or None."""
    rest = list(entries)
    start = [
        x
        for x in rest
        if not any(prove_zero(x.map.range[dim][0] - y.map.range[dim][1] - 1) for y in rest)
    ]
    if len(start) != 1:
        return None
    order = [start[0]]
    rest.remove(start[0])
    while rest:
        last = order[-1].map.range[dim][1]
        nxt = [x for x in rest if prove_zero(x.map.range[dim][0] - last - 1)]
        if len(nxt) != 1:
            return None
        order.append(nxt[0])
        rest.remove(nxt[0])
    return order


def split_fragments(state: SDFGState, node: dn.AccessNode) -> Union[SplitFragments, Decline]:
    """The Maps writing `node` in `state` as pieces of one split Map, or why they are not.

    Args:
        state: the state.
        node: the AccessNode the pieces write.

    Returns:
        The `SplitFragments`, or a `Decline` with the reason.
    """
    entries = _writer_maps(state, node)
    if isinstance(entries, Decline):
        return entries
    first = entries[0].map
    for entry in entries[1:]:
        m = entry.map
        if list(m.params) != list(first.params) or m.schedule != first.schedule:
            return Decline(
                f"split fragments: {m.label} has other parameters or another schedule than "
                f"{first.label}"
            )
    # The dimension the pieces split: the one whose ranges are not all the same.
    dims = [
        d
        for d in range(len(first.range))
        if not all(prove_zero(x.map.range[d][0] - first.range[d][0]) for x in entries)
        or not all(prove_zero(x.map.range[d][1] - first.range[d][1]) for x in entries)
    ]
    if len(dims) != 1:
        return Decline(f"split fragments: the ranges differ in {len(dims)} dimensions, not one")
    (dim,) = dims
    if not all(x.map.range[d][2] == 1 for x in entries for d in range(len(first.range))):
        return Decline("split fragments: a range has a step other than 1")
    order = _chain(entries, dim)
    if order is None:
        return Decline("split fragments: the ranges are not proven to follow each other")
    written = {n.data for n in state.data_nodes() if state.in_degree(n) > 0}
    inputs = _outer_inputs(state, order[0], written)
    if isinstance(inputs, Decline):
        return inputs
    # Which data each piece alone accesses: every AccessNode of the SDFG, counted once.
    accesses = Counter(
        n.data for n, _ in state.sdfg.all_nodes_recursive() if isinstance(n, dn.AccessNode)
    )
    body = _body(state, order[0], accesses)
    if isinstance(body, Decline):
        return body
    for entry in order[1:]:
        other = _outer_inputs(state, entry, written)
        if isinstance(other, Decline):
            return other
        if other != inputs:
            return Decline(
                f"split fragments: {entry.map.label} reads other data (or another node of data "
                f"this state writes) than {first.label}"
            )
        graph = _body(state, entry, accesses)
        if isinstance(graph, Decline):
            return graph
        if not _same_body(body, graph):
            return Decline(f"split fragments: {entry.map.label} computes other than {first.label}")
    return SplitFragments(
        state,
        node,
        tuple(order),
        dim,
        order[0].map.range[dim][0],
        order[-1].map.range[dim][1],
    )
