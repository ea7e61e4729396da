"""The sweep pair: 2-D transients that Maps over the cells write column by column and one
Map over the same cells reads back, each iteration its own column (docs/scans.md).

icon4py's implicit solvers solve a tridiagonal system with two scans. The forward scan
(a Map over the cells whose nested SDFG loops over K) writes levels 1..K-1 of two 2-D
transients, another Map over the same cells writes their level 0 (copies of scalars),
and the backward scan (a third Map over the same cells) reads each cell's column back.
Fused into one Map over the cells, the arrays are one column per iteration: written and
read back in the same iteration, no field-sized array left. gt4py's MapFusionVertical
does not do it (two producers of one array, the level-0 writer also writes other data
the forward scan reads).

`sweep_pair_plan(sdfg, state, reader)` finds the intermediates of one reader Map and the
parts of their writer Maps that move into the reader's scope; pure, never mutates, and
declines (a `Decline`) rather than raise on anything it does not understand.

Conditions, per intermediate `T` (one that fails is left alone, with its reason; when
none is left the plan declines with all the reasons):

- `T` is a transient Array of rank >= 2 (not a View), with one AccessNode in the whole
  SDFG (no other state, no other reader or writer), not read on an interstate edge;
  its only out-edge goes into the reader Map (a top-level Map with one parameter, no
  dynamic range input); every in-edge comes from the exit of another top-level Map
  with the same parameter, range and schedule. No memlet of it has a WCR.
- Every inner memlet of `T` (writer side and reader side) holds, in one dimension `d`,
  one index that is the Map parameter plus a term free of it, the same for all of them
  (the iteration's own column); the writers' memlets are not dynamic. Each inner edge's
  other end lies directly in the Map's scope: a Tasklet reading or writing one element,
  or a NestedSDFG whose array is the column as it will be (the non-unit dimensions of
  the memlet, strides of a contiguous buffer).
- Per iteration, the writers' boxes (the other dimensions) are disjoint and cover the
  whole column `[0, n - 1]` (`boxes.prove_tiling`), so the buffer is written whole
  before the reader reads any of it.

Per writer Map, the slice that moves is every node of its scope that the writes of the
kept intermediates depend on. It must be Tasklets, NestedSDFGs and AccessNodes directly
in the scope (no inner Map), it must feed nothing but the kept intermediates, and every
datum it reads from outside must come from an AccessNode whose data nothing else in the
state writes (no other AccessNode of it has an in-edge): the slice then computes the
same values when it runs in the reader's iteration. A writer whose slice is its whole
scope and whose outputs are all kept intermediates disappears.

Why nothing else can be ordered between the writers and the reader: the slice writes
only intermediates that the reader alone reads, so nothing else depends on it, and what
it reads is written only upstream of its writer, which is upstream of the reader.
"""

from __future__ import annotations

import dataclasses
from typing import Optional, Union, cast

import dace
import sympy
from dace import data as dace_data
from dace.sdfg import nodes as dn

from gt4py_dace_xforms.analysis import boxes
from gt4py_dace_xforms.analysis.producer import Decline, interstate_reads
from gt4py_dace_xforms.analysis.symbolic import to_sympy


@dataclasses.dataclass(frozen=True, eq=False)
class ColumnBuffer:
    """One intermediate `data` that becomes a per-iteration buffer of `shape` (its shape
    less dimension `dim`, whose index in every inner memlet is `index`).

    Attributes:
        writes: the inner edges into the writers' exits that write it.
        reads: the inner edges out of the reader's entry that read it.
        outer_in: the edges from the writers' exits into its AccessNode.
        outer_out: the edge from its AccessNode into the reader's entry.
    """

    data: str
    node: dn.AccessNode
    dim: int
    index: sympy.Expr
    shape: tuple
    writes: tuple
    reads: tuple
    outer_in: tuple
    outer_out: dace.sdfg.graph.MultiConnectorEdge


@dataclasses.dataclass(frozen=True, eq=False)
class WriterSlice:
    """The nodes of writer Map `entry` (exit `exit`) that move into the reader's scope;
    `whole`: they are all of its scope and it writes nothing else (the Map disappears)."""

    entry: dn.MapEntry
    exit: dn.MapExit
    nodes: tuple
    whole: bool


@dataclasses.dataclass(frozen=True, eq=False)
class SweepPairPlan:
    """Fuse `writers`' slices into the reader Map `reader`; `buffers` become per-iteration
    columns. `skipped` lists the reader's other 2-D transient inputs and why they stay."""

    state: dace.SDFGState
    reader: dn.MapEntry
    buffers: tuple
    writers: tuple
    skipped: tuple = ()

    @property
    def names(self) -> tuple[str, ...]:
        """The column intermediates the fusion makes per-column buffers of."""
        return tuple(b.data for b in self.buffers)


def same_map(a: dn.Map, b: dn.Map) -> bool:
    """The same parameters, range and schedule.

    Args:
        a: a Map.
        b: another Map.

    Returns:
        True where they iterate alike.
    """
    if [str(p) for p in a.params] != [str(p) for p in b.params] or a.schedule != b.schedule:
        return False
    if len(a.range) != len(b.range):
        return False
    return all(
        sympy.expand(to_sympy(x) - to_sympy(y)) == 0
        for ra, rb in zip(a.range.ndrange(), b.range.ndrange())
        for x, y in zip(ra, rb)
    )


def _column_index(subset, param: str) -> Optional[tuple[int, sympy.Expr]]:
    """The one dimension whose single index is `param` plus a term free of it."""
    found = None
    for d, (b, e, _) in enumerate(subset.ndrange()):
        lo = sympy.expand(to_sympy(b))
        if sympy.expand(to_sympy(e) - lo) != 0 or param not in {str(f) for f in lo.free_symbols}:
            continue
        sym = next(f for f in lo.free_symbols if str(f) == param)
        rest = sympy.expand(lo - sym)
        if param in {str(f) for f in rest.free_symbols}:
            return None
        if found is not None:
            return None
        found = (d, lo)
    return found


def _kept_box(subset, dim: int) -> Optional[boxes.Box]:
    rng = [r for d, r in enumerate(subset.ndrange()) if d != dim]
    if any(sympy.expand(to_sympy(s)) != 1 for _, _, s in rng):
        return None
    return boxes.as_box([(b, e) for b, e, _ in rng])


def _endpoint_problem(
    sdfg: dace.SDFG,
    state: dace.SDFGState,
    node,
    conn,
    scope: dn.MapEntry,
    memlet,
    dim: int,
    shape: tuple,
) -> Optional[str]:
    """Why the node at the other end of an inner edge cannot take the buffer instead."""
    if state.scope_dict()[node] is not scope:
        return f"'{node}' is not directly in the scope of '{scope.map.label}'"
    if isinstance(node, dn.Tasklet):
        return (
            None
            if memlet.subset.num_elements() == 1
            else f"tasklet '{node}' accesses more than one element"
        )
    if not isinstance(node, dn.NestedSDFG) or conn is None:
        return f"'{node}' is neither a tasklet nor a nested SDFG"
    desc = node.sdfg.arrays.get(conn)
    kept = [(d, b, e) for d, (b, e, _) in enumerate(memlet.subset.ndrange()) if d != dim]
    wide = [d for d, b, e in kept if sympy.expand(to_sympy(e) - to_sympy(b)) != 0]
    keep_dims = [d for d in range(len(shape) + 1) if d != dim]
    strides = []
    for d in wide:
        k = keep_dims.index(d)
        s = 1
        for x in shape[k + 1 :]:
            s = s * to_sympy(x)
        strides.append(sympy.expand(s))
    if type(desc) is not dace_data.Array or len(desc.shape) != len(wide):
        return f"nested SDFG '{node.label}' does not see '{conn}' as the column"
    if any(sympy.expand(to_sympy(x) - y) != 0 for x, y in zip(desc.strides, strides)):
        return f"nested SDFG '{node.label}' sees '{conn}' with strides other than a column buffer's"
    return None


def _data_nodes(sdfg: dace.SDFG, name: str) -> list:
    return [(st, n) for st in sdfg.all_states() for n in st.data_nodes() if n.data == name]


def _buffer(
    sdfg: dace.SDFG, state: dace.SDFGState, node: dn.AccessNode, reader: dn.MapEntry
) -> Union[ColumnBuffer, str]:
    """The buffer plan of one intermediate, or why it stays."""
    name = node.data
    desc = sdfg.arrays[name]
    if type(desc) is not dace_data.Array or not desc.transient or len(desc.shape) < 2:
        return f"'{name}' is not a transient array of rank 2 or more"
    if len(_data_nodes(sdfg, name)) != 1 or name in interstate_reads(sdfg):
        return f"'{name}' is accessed elsewhere (another AccessNode or an interstate edge)"
    outs = state.out_edges(node)
    if (
        len(outs) != 1
        or outs[0].dst is not reader
        or not (outs[0].dst_conn or "").startswith("IN_")
    ):
        return f"'{name}' has a reader other than '{reader.map.label}'"
    ins = state.in_edges(node)
    if not ins or not all(isinstance(e.src, dn.MapExit) for e in ins):
        return f"'{name}' is written by something other than a Map"
    scope = state.scope_dict()
    param = str(reader.map.params[0])
    writes, reads = [], []
    for e in ins:
        entry = state.entry_node(e.src)
        if entry is reader or scope[entry] is not None or not same_map(entry.map, reader.map):
            return f"'{name}' is written by '{entry.map.label}', not a top-level Map of the reader's range"
        if e.src_conn is None or len(list(state.out_edges_by_connector(e.src, e.src_conn))) != 1:
            return f"'{entry.map.label}' writes '{name}' through a connector with other out-edges"
        for x in state.in_edges_by_connector(e.src, "IN_" + e.src_conn[4:]):
            writes.append((entry, x))
    reads = [
        (reader, x) for x in state.out_edges_by_connector(reader, "OUT_" + outs[0].dst_conn[3:])
    ]
    return _columns(sdfg, state, node, writes, reads, param, tuple(ins), outs[0])


def _columns(
    sdfg, state, node, writes, reads, param, outer_in, outer_out
) -> Union[ColumnBuffer, str]:
    name, desc = node.data, sdfg.arrays[node.data]
    found = None
    pieces: list[boxes.Box] = []
    wanted: list[boxes.Box] = []
    for k, (_scope, e) in enumerate(writes + reads):
        m = e.data
        is_write = k < len(writes)
        if (
            m.is_empty()
            or m.data != name
            or m.wcr is not None
            or (is_write and m.dynamic)
            or m.subset is None
        ):
            return (
                f"a memlet of '{name}' is empty, names other data, has a WCR or is a dynamic write"
            )
        if m.other_subset is not None or len(m.subset) != len(desc.shape):
            return f"a memlet of '{name}' is a copy or has another rank"
        col = _column_index(m.subset, param)
        if col is None or (
            found is not None and (col[0] != found[0] or sympy.expand(col[1] - found[1]) != 0)
        ):
            return f"'{name}' is not accessed at one column, the iteration's own, in every memlet"
        found = col
        box = _kept_box(m.subset, col[0])
        if box is None:
            return f"a memlet of '{name}' has a step"
        (pieces if is_write else wanted).append(box)
    dim, index = cast(tuple[int, sympy.Expr], found)  # set by the loop: `writes` is not empty
    shape = tuple(s for d, s in enumerate(desc.shape) if d != dim)
    for k, (scope, e) in enumerate(writes + reads):
        other, conn = (e.src, e.src_conn) if k < len(writes) else (e.dst, e.dst_conn)
        problem = _endpoint_problem(sdfg, state, other, conn, scope, e.data, dim, shape)
        if problem:
            return problem
    tiled, reason = boxes.prove_tiling(pieces, what=f"the writes of '{name}'")
    if reason:
        return reason
    whole = cast(boxes.Box, tiled)  # no reason: the pieces tile it
    full = boxes.as_box([(0, to_sympy(s) - 1) for s in shape])
    if not (boxes.contains(whole, full) and boxes.contains(full, whole)):
        return f"the writes of '{name}' tile {boxes.show(whole)}, not the whole column {boxes.show(full)}"
    return ColumnBuffer(
        name,
        node,
        dim,
        index,
        shape,
        tuple(e for _, e in writes),
        tuple(e for _, e in reads),
        outer_in,
        outer_out,
    )


def _slice(state: dace.SDFGState, entry: dn.MapEntry, targets: list) -> Union[WriterSlice, str]:
    """The nodes of `entry`'s scope that the edges `targets` (into its exit) depend on."""
    exit_ = state.exit_node(entry)
    label = entry.map.label
    if any(not (c or "").startswith("IN_") for c in entry.in_connectors):
        return f"writer '{label}' has a dynamic range input"
    todo = [e.src for e in targets]
    nodes: set = set()
    while todo:
        n = todo.pop()
        if n in nodes or n is entry:
            continue
        if (
            not isinstance(n, (dn.Tasklet, dn.NestedSDFG, dn.AccessNode))
            or state.scope_dict()[n] is not entry
        ):
            return f"writer '{label}' computes the columns with '{n}', not a node directly in its scope"
        nodes.add(n)
        todo.extend(e.src for e in state.in_edges(n))
    target_ids = {id(e) for e in targets}
    for n in nodes:
        for e in state.out_edges(n):
            if e.dst not in nodes and id(e) not in target_ids:
                return f"writer '{label}': '{n}' also feeds '{e.dst}' ({e.data.data})"
    everything = set(state.scope_children()[entry]) - {exit_}
    whole = everything == nodes and all(id(e) in target_ids for e in state.in_edges(exit_))
    return WriterSlice(entry, exit_, tuple(sorted(nodes, key=state.node_id)), whole)


def _input_problem(
    sdfg: dace.SDFG, state: dace.SDFGState, ws: WriterSlice, buffers: set
) -> Optional[str]:
    """Why the slice might read other values in the reader's iteration than in its own Map."""
    for n in ws.nodes:
        for e in state.in_edges(n):
            if e.src is not ws.entry or e.data.is_empty():
                continue
            if not (e.src_conn or "").startswith("OUT_"):
                return (
                    f"writer '{ws.entry.map.label}' feeds '{n}' through a connector other than OUT_"
                )
            for outer in state.in_edges_by_connector(ws.entry, "IN_" + e.src_conn[4:]):
                src = outer.src
                if not isinstance(src, dn.AccessNode) or src.data in buffers:
                    return f"writer '{ws.entry.map.label}' reads '{outer.data.data}' not from an AccessNode"
                for other in state.data_nodes():
                    if other.data == src.data and other is not src and state.in_degree(other) > 0:
                        return f"'{src.data}', read by '{ws.entry.map.label}', is also written in the state"
    return None


def sweep_pair_plan(
    sdfg: dace.SDFG, state: dace.SDFGState, reader: dn.MapEntry, names: Optional[set[str]] = None
) -> Union[SweepPairPlan, Decline]:
    """The plan for fusing `reader` with the writers of its column intermediates (only
    those in `names`, if given), or a Decline (see the module docstring).

    Args:
        sdfg: the SDFG.
        state: the reader's state.
        reader: the backward sweep's Map entry.
        names: the intermediates to consider (None: all).

    Returns:
        the `SweepPairPlan`, or a `Decline` with the reason.
    """
    if not isinstance(reader, dn.MapEntry) or state.scope_dict()[reader] is not None:
        return Decline("not a top-level Map")
    if len(reader.map.params) != 1:
        return Decline(f"'{reader.map.label}' is not a Map with one parameter")
    if any(not (c or "").startswith("IN_") for c in reader.in_connectors):
        return Decline(f"'{reader.map.label}' has a dynamic range input")
    bufs: list[ColumnBuffer] = []
    skipped: list[tuple[str, str]] = []
    for e in state.in_edges(reader):
        node = e.src
        if not isinstance(node, dn.AccessNode) or (names is not None and node.data not in names):
            continue
        if node.data not in sdfg.arrays or not isinstance(sdfg.arrays[node.data], dace_data.Array):
            continue
        if len(sdfg.arrays[node.data].shape) < 2 or not sdfg.arrays[node.data].transient:
            continue
        if any(b.node is node for b in bufs):
            continue
        b = _buffer(sdfg, state, node, reader)
        (skipped.append((node.data, b)) if isinstance(b, str) else bufs.append(b))
    if not bufs:
        why = "; ".join(f"{n}: {r}" for n, r in skipped) or "no 2-D transient input"
        return Decline(f"'{reader.map.label}': {why}")
    return _writers(sdfg, state, reader, bufs, skipped)


def _writers(sdfg, state, reader, bufs, skipped) -> Union[SweepPairPlan, Decline]:
    targets: dict = {}
    for b in bufs:
        for e in b.writes:
            targets.setdefault(state.entry_node(e.dst), []).append(e)
    slices = []
    names = {b.data for b in bufs}
    stays = "".join(f"; {n} stays: {r}" for n, r in skipped)
    for entry, edges in targets.items():
        ws = _slice(state, entry, edges)
        if isinstance(ws, str):
            return Decline(ws + stays)
        problem = _input_problem(sdfg, state, ws, names)
        if problem:
            return Decline(problem + stays)
        slices.append(ws)
    return SweepPairPlan(state, reader, tuple(bufs), tuple(slices), tuple(skipped))
