"""Output as buffer: a write-back buffer `T` that other dataflow also reads becomes the
output `G` it is copied into.

gt4py computes a result into a transient `T`, lets Maps, copies and nested SDFGs (other
states, the branches of an `if`) read it, and copies `T[A]` into the program output
`G[B]` at the end. `WriteBackRetarget` can drop `T` only once the copy is its last reader;
here every access of `T` is moved to `G` at the copy's shift `B - A` instead, so nothing
is recomputed and `T` and the copy disappear (`docs/writeback.md`).

Pure analysis: `output_buffer_plan` returns a frozen plan or a `Decline`; the mutation is
in `transformations/output_buffer.py`. Conditions (all checked, none assumed):

- `T` is a transient array, `G` a global array of the same dtype, storage and rank; the
  copies `T[A] -> G[B]` are plain (unit stride, no WCR), all at one shift, and cover
  pairwise disjoint boxes (`_copied_boxes`: those that tile a box are one box; `A` is the
  union of the rest, e.g. the two boundary zones of a limited-area rank that gt4py's
  `concat_where` copies while Maps write the interior of `G` themselves); neither is read
  on an interstate edge or a condition. Where `T` is
  copied into several outputs (or in several states), one output's copies (the first for
  which every condition holds) are these; the other copies read `T` like any reader and
  read `G` afterwards.
- Every access of `T` is at the top level of a state, by an edge whose `T`-side subset
  lies provably inside `A` (so `G` outside `B` is never touched), or a writer that can be
  restricted to `A` (`_map_split`: a top-level Map writing one element `T[p + c]` per
  iteration, kept as one Map per box of `A` it meets, copies of its scope where it meets
  several; its other outputs must be transient arrays that nothing reads outside the
  points the kept iterations write, so the points it no longer writes fed nobody; or a
  copy meeting one box of `A`, as `WriteBackRetarget` clips it); it goes to or comes
  from a Map, a tasklet, a nested SDFG or another array (not a View or a library node);
  no WCR. A nested SDFG that sees `T` gets `G`'s strides, so it must see all dimensions,
  or one column of `T` (the dimensions of size 1 in its memlet dropped). A read outside
  `A` is allowed where `T` got those points by a copy from `G` at the copy's shift
  (`_echoes`): that copy then goes.
- `G` is touched by nothing but the copies during `T`'s lifetime: in no state of any
  top-level block on a path between two blocks that access `T` or hold the copy, and in
  the copy's state only by the copies' target nodes and the sources of the copies from
  `G` into `T` (`_echoes`), written outside `B` if at all. The target nodes may have
  other writers where each writes provably outside `B` (`_other_writers_problem`), and
  readers, which read after all of the node's writes.
- The copies run in one top-level state that every path from a writer of `T` reaches
  (else `G` would change where the copy never runs) and that no write of `T` follows;
  the blocks accessing `T` are states or branches outside loops, in an acyclic top-level
  graph; no symbol of the subsets is reassigned in between; no unordered access of `T`
  or `G` (`analysis/races.py`).

Points of `A` that no writer of `T` writes were copied uninitialized before and keep
`G`'s old values now: both are undefined values.
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import Optional, Union, cast

import dace
import networkx as nx
import sympy
from dace import data as dace_data
from dace.sdfg import nodes as dn
from dace.sdfg.state import ConditionalBlock, SDFGState

from gt4py_dace_xforms.analysis import boxes
from gt4py_dace_xforms.analysis.crossstate import in_loop, top_block
from gt4py_dace_xforms.analysis.producer import Decline, interstate_reads
from gt4py_dace_xforms.analysis.races import race_problem
from gt4py_dace_xforms.analysis.retarget import (
    Box,
    RetargetWriter,
    always_reached,
    box_of,
    copy_boxes,
    copy_writer,
    element_write,
    meet,
    merge_copies,
)
from gt4py_dace_xforms.analysis.symbolic import to_sympy
from gt4py_dace_xforms.analysis.writeback import WriteBackCopy, writeback_copies


@dataclasses.dataclass(frozen=True)
class BufferEdge:
    """One edge that accesses `T` (not a copy): `state`, the AccessNode of `T`, the edge,
    and whether it writes `T`."""

    state: SDFGState
    node: dn.AccessNode
    edge: dace.sdfg.graph.MultiConnectorEdge
    writes: bool
    #: a copy writer that also writes points outside the copied box, clipped to it (those
    #: points fed nothing: every read lies inside the box)
    restricted: Optional[RetargetWriter] = None
    #: a Map writer that also writes points outside the copied boxes: kept as one Map per
    #: box it meets (`SplitWriter`)
    split: Optional["SplitWriter"] = None


@dataclasses.dataclass(frozen=True)
class SplitWriter:
    """A writer Map of `T` (`entry`) whose iterations write points outside the copied
    boxes, kept only where they write inside: one Map per box of `A` it meets, each with
    `pieces[j]` as its ranges (`(param, first, last)`, inclusive, in the Map's order). The
    Map itself keeps the first piece; the others are copies of its scope. `boxes[j]`: the
    box of `T` piece `j` writes (end exclusive); `others`: each other output edge of the
    Map's exit with the box of its data piece `j` writes, which covers every read of that
    data (`_lost_points_problem`)."""

    entry: dn.MapEntry
    pieces: tuple[tuple[tuple[str, sympy.Expr, sympy.Expr], ...], ...]
    boxes: tuple[Box, ...]
    others: tuple[tuple[object, tuple[Box, ...]], ...] = ()


@dataclasses.dataclass(frozen=True)
class NestedView:
    """A nested SDFG (at any depth) whose array `inner` sees `T`: it gets `G`'s strides."""

    nsdfg: dn.NestedSDFG
    inner: str
    #: `G`'s dimensions the nested array has (all of them, unless it sees one column of
    #: `T`, e.g. a scan's `T[i, 0:K]`: the dimensions of size 1 in the memlet are dropped)
    kept: Optional[tuple[int, ...]] = None


@dataclasses.dataclass(frozen=True)
class OutputBufferPlan:
    """`T` (`name`) becomes `target` (`G`) at `shift` (`G`'s index minus `T`'s)."""

    name: str
    target: str
    copies: tuple[WriteBackCopy, ...]
    #: the copied region `A` of `T`: pairwise disjoint boxes (end exclusive), one where
    #: the copies tile one box
    copied: tuple[Box, ...]
    shift: tuple[sympy.Expr, ...]
    accesses: tuple[BufferEdge, ...]
    nested: tuple[NestedView, ...]
    #: copies `G[p + shift] -> T[p]` outside the copied box (`_echoes`): with `T` being
    #: `G` they copy a point onto itself, and go
    echoes: tuple[BufferEdge, ...] = ()

    @property
    def states(self) -> tuple[SDFGState, ...]:
        """The states the rewrite changes (those of the buffer's accesses and copies), each once,
        in the order first met."""
        seen: dict[int, SDFGState] = {}
        for a in self.accesses:
            seen.setdefault(id(a.state), a.state)
        for c in self.copies:
            seen.setdefault(id(c.state), c.state)
        return tuple(seen.values())

    def saved_elements(self) -> sympy.Expr:
        """Elements of the copy that no longer runs (each read once and written once).

        Returns:
            the element count, a sympy expression of the SDFG's symbols.
        """
        total = sympy.Integer(0)
        for box in self.copied:
            n = sympy.Integer(1)
            for lo, hi in box:
                n *= sympy.expand(hi - lo)
            total += n
        return sympy.expand(total)

    @property
    def splits(self) -> tuple[SplitWriter, ...]:
        """The writer Maps split into one Map per copied box they meet (more than one)."""
        return tuple(
            a.split for a in self.accesses if a.split is not None and len(a.split.pieces) > 1
        )


def _inside(box: Box, copied: tuple[Box, ...]) -> bool:
    """Every point of `box` (end exclusive) lies in one of the `copied` boxes: inside one of
    them, or covered by them together (`boxes.prove_cover`)."""
    if any(boxes.contains(c, box) for c in copied):
        return True
    return len(copied) > 1 and boxes.prove_cover(_closed(box), [_closed(c) for c in copied]).proven


def _edge_problem(
    sdfg: dace.SDFG, state: SDFGState, node, edge, writes: bool, copied: tuple[Box, ...]
) -> Optional[str]:
    """Why moving this access of `T` to `G` could read or write outside `G[B]`."""
    other = edge.src if writes else edge.dst
    if writes and edge.data.wcr is not None:
        return "a write of the buffer has a WCR"
    if isinstance(other, dn.AccessNode) and not isinstance(
        sdfg.arrays[other.data], dace_data.Array
    ):
        return f"the buffer is accessed through '{other.data}', a {type(sdfg.arrays[other.data]).__name__}"
    if isinstance(other, dn.AccessNode) and isinstance(sdfg.arrays[other.data], dace_data.View):
        return f"the buffer is accessed through the View '{other.data}'"
    if isinstance(other, dn.LibraryNode):
        return f"the buffer is accessed by the library node '{other.label}'"
    if not isinstance(other, (dn.AccessNode, dn.MapEntry, dn.MapExit, dn.Tasklet, dn.NestedSDFG)):
        return f"the buffer is accessed by a {type(other).__name__}"
    subset = (
        edge.data.get_dst_subset(edge, state) if writes else edge.data.get_src_subset(edge, state)
    )
    if subset is None:
        return "an access of the buffer has no explicit subset"
    if not _inside(box_of(subset), copied):
        verb = "writes" if writes else "reads"
        return f"'{getattr(other, 'label', other)}' {verb} the buffer outside the copied box"
    return None


def _echo_problem(
    state: SDFGState, edge, writes: bool, copied: tuple[Box, ...], echo_boxes: list
) -> Optional[str]:
    """ "echo" where a read outside the copied box lies inside it and the echoes' boxes
    together (`_echoes`); else None (the caller keeps its own reason)."""
    if writes:
        return None
    subset = edge.data.get_src_subset(edge, state)
    if subset is None:
        return None
    pieces = [*(_closed(c) for c in copied), *echo_boxes]
    return "echo" if boxes.prove_cover(_closed(box_of(subset)), pieces).proven else None


def _nested_views(
    sdfg: dace.SDFG, state: SDFGState, edge, gdesc, name: str
) -> Union[list[NestedView], str]:
    """The nested SDFGs an access edge reaches (through its memlet tree, then through
    nested SDFGs that pass the array on), or why they cannot take `G`'s strides."""
    found: list[NestedView] = []
    work = []
    ndim = len(gdesc.shape)
    for leaf in state.memlet_tree(edge).leaves():
        if leaf.data.wcr is not None:
            return "an access of the buffer has a WCR"
        for end, conn in ((leaf.dst, leaf.dst_conn), (leaf.src, leaf.src_conn)):
            if isinstance(end, dn.NestedSDFG) and conn is not None:
                inner = end.sdfg.arrays.get(conn)
                kept = tuple(range(ndim))
                if inner is not None and type(inner) is dace_data.Array and len(inner.shape) < ndim:
                    # One column (or plane) of the buffer: the dimensions of size 1 go.
                    sub = leaf.data.subset if leaf.data.data == name else leaf.data.other_subset
                    sizes = sub.size() if sub is not None else ()
                    kept = tuple(d for d, n in enumerate(sizes) if to_sympy(n) != 1)
                    if len(sizes) != ndim or len(kept) != len(inner.shape):
                        return f"nested SDFG '{end.label}' sees the buffer with other dimensions"
                work.append((end, conn, kept))
    strides_syms = set()
    for s in (*gdesc.strides, gdesc.total_size):
        strides_syms |= {str(x) for x in dace.symbolic.pystr_to_symbolic(s).free_symbols}
    while work:
        nsdfg, conn, kept = work.pop()
        inner = nsdfg.sdfg.arrays.get(conn)
        if inner is None:
            return f"nested SDFG '{nsdfg.label}' has no array '{conn}'"
        if isinstance(inner, dace_data.Scalar):
            continue  # one element passed by value: no strides involved
        if type(inner) is not dace_data.Array or inner.transient:
            return f"nested SDFG '{nsdfg.label}' sees the buffer as a {type(inner).__name__}"
        if len(inner.shape) != len(kept):
            return f"nested SDFG '{nsdfg.label}' sees the buffer with other dimensions"
        for s in strides_syms:
            mapped = nsdfg.symbol_mapping.get(s)
            if (mapped is not None and str(mapped) != s) or s in nsdfg.sdfg.arrays:
                return f"nested SDFG '{nsdfg.label}' has its own meaning of the stride symbol '{s}'"
        found.append(NestedView(nsdfg, conn, None if len(kept) == ndim else kept))
        for ist in nsdfg.sdfg.states():
            for n in ist.data_nodes():
                if n.data != conn:
                    continue
                for e in [*ist.in_edges(n), *ist.out_edges(n)]:
                    o = e.src if e.dst is n else e.dst
                    if isinstance(o, dn.AccessNode) and isinstance(
                        nsdfg.sdfg.arrays[o.data], dace_data.View
                    ):
                        return f"nested SDFG '{nsdfg.label}' views the buffer through '{o.data}'"
                    for leaf in ist.memlet_tree(e).leaves():
                        for end, c in ((leaf.dst, leaf.dst_conn), (leaf.src, leaf.src_conn)):
                            if isinstance(end, dn.NestedSDFG) and c is not None:
                                work.append((end, c, kept))
    return found


def _block_graph(sdfg: dace.SDFG) -> nx.DiGraph:
    g = nx.DiGraph()
    g.add_nodes_from(sdfg.nodes())
    g.add_edges_from((e.src, e.dst) for e in sdfg.edges())
    return g


def _states_in(block) -> list[SDFGState]:
    return [block] if isinstance(block, SDFGState) else list(block.all_states())


def _echoes(
    sdfg: dace.SDFG, name: str, gname: str, copied: tuple[Box, ...], shift
) -> Union[list[BufferEdge], str]:
    """The copies `G[p + shift] -> T[p]` of points outside the copied box `A`: gt4py's
    `concat_where(cond, f(x), x)` with `x` an output copies `x`'s own values into the
    concat node where `cond` is false, and copies back only the points `f` changed (the
    solvers' `next_w` at the lowest level). Nothing else writes `G` outside `B` while `T`
    lives (`_lifetime_problem`), so `T[p]` is `G[p + shift]` from the copy on: a reader of
    `T[p]` may read `G` there. Returned where every such copy is plain and disjoint from
    `A`; a copy from `G` at another index is a reason."""
    out: list[BufferEdge] = []
    for st in sdfg.states():
        for node in st.data_nodes():
            if node.data != name:
                continue
            for e in st.in_edges(node):
                if not (isinstance(e.src, dn.AccessNode) and e.src.data == gname):
                    continue
                src, dst = e.data.get_src_subset(e, st), e.data.get_dst_subset(e, st)
                if e.data.wcr is not None or src is None or dst is None:
                    return f"a copy of '{gname}' into '{name}' has a WCR or no explicit subsets"
                if any(to_sympy(x) != 1 for *_, x in (*src.ndrange(), *dst.ndrange())):
                    return f"a copy of '{gname}' into '{name}' has a stride"
                tbox, gbox = box_of(dst), box_of(src)
                if any(
                    sympy.expand(glo - tlo - d) != 0 or sympy.expand(ghi - thi - d) != 0
                    for (tlo, thi), (glo, ghi), d in zip(tbox, gbox, shift)
                ):
                    return f"'{gname}' is copied into '{name}' at another index than the write-back copy's"
                if not all(boxes.disjoint(_closed(tbox), _closed(c)) for c in copied):
                    return f"'{gname}' is copied into '{name}' inside the copied box"
                if any(a.node is node or a.edge.src is e.src for a in out):
                    return f"'{gname}' is copied into '{name}' twice through one AccessNode"
                out.append(BufferEdge(st, node, e, True))
    return out


def _outside(subset, copies) -> bool:
    """`subset` of `G` provably misses every copy's target box `B`."""
    return subset is not None and all(
        boxes.disjoint(
            _closed(box_of(subset)), _closed(box_of(c.edge.data.get_dst_subset(c.edge, c.state)))
        )
        for c in copies
    )


def _closed(box: Box) -> Box:
    """A half-open box (`analysis.retarget`'s) as `analysis.boxes` takes it."""
    return tuple((lo, hi - 1) for lo, hi in box)


def _copied_boxes(copies: list[WriteBackCopy]) -> Union[tuple[tuple[Box, ...], tuple], str]:
    """The boxes of `T` the copies read (pairwise disjoint, end exclusive) and the one shift
    to `G`'s indices, or why not. Copies that tile one box (`merge_copies`: gt4py splits
    the copy of a `concat_where` result at the branch boundary) are that box. Otherwise
    their boxes must be provably disjoint (gt4py copies a limited-area rank's two boundary
    zones of a `concat_where` result, and its Maps write the interior of the output
    themselves); of those, any two that tile a box are merged, so that a writer spanning
    both is not split for nothing."""
    pieces, shifts = copy_boxes(copies)
    if any(sympy.expand(x - y) != 0 for sh in shifts[1:] for x, y in zip(sh, shifts[0])):
        return "the write-back copies shift differently"
    if len(copies) == 1:
        return (pieces[0],), shifts[0]
    merged = merge_copies(copies)
    if not isinstance(merged, str):
        return (merged[0],), merged[1]
    closed = [_closed(p) for p in pieces]
    overlap = boxes.prove_disjoint(closed, what="write-back copies")
    if overlap:
        return f"the write-back copies neither tile one box nor are disjoint: {overlap}"
    merging = True
    while merging:
        merging = False
        for i, j in itertools.combinations(range(len(closed)), 2):
            whole, _ = boxes.prove_tiling([closed[i], closed[j]])
            if whole is not None:
                closed = [whole if k == i else x for k, x in enumerate(closed) if k != j]
                merging = True
                break
    return tuple(tuple((lo, hi + 1) for lo, hi in b) for b in closed), shifts[0]


def _meet_box(w: Box, a: Box) -> Union[Box, str, None]:
    """The intersection of two boxes (end exclusive): None where they are provably
    disjoint, the box where every bound of it is provably one of the two's, else why not."""
    if boxes.disjoint(_closed(w), _closed(a)):
        return None
    return meet(w, a)


def _lost_points_problem(sdfg: dace.SDFG, data: str, kept: list[Box], label: str) -> Optional[str]:
    """Why a restricted or split writer Map's other output `data` could miss the points
    the Map no longer writes, or None: `data` is a transient array that nothing reads
    (at the top level of any state, on an interstate edge or a condition) outside the
    `kept` boxes, the points the kept iterations still write with the same values."""
    desc = sdfg.arrays[data]
    if type(desc) is not dace_data.Array or not desc.transient:
        return f"writer '{label}' also writes '{data}', not a transient array: restricting it would lose points of it"
    if data in interstate_reads(sdfg):
        return f"writer '{label}' also writes '{data}', which is read on an interstate edge or a condition"
    closed = [_closed(b) for b in kept]
    for st in sdfg.states():
        scope = None
        for n in st.data_nodes():
            if n.data != data:
                continue
            scope = scope or st.scope_dict()
            if scope[n] is not None:
                return f"writer '{label}' also writes '{data}', which is accessed inside a scope"
            for e in st.out_edges(n):
                if e.data.is_empty():
                    continue
                sub = e.data.get_src_subset(e, st)
                if sub is None or not boxes.prove_cover(_closed(box_of(sub)), closed).proven:
                    return (
                        f"writer '{label}' also writes '{data}', which is read outside the points "
                        f"it would keep"
                    )
    return None


def _map_split(
    sdfg: dace.SDFG, state: SDFGState, node, edge, copied: tuple[Box, ...], name: str
) -> Union[SplitWriter, str]:
    """The writer Map at `edge` (a MapExit -> `T` edge) kept as one Map per copied box it
    meets, or why it cannot be: it must be a top-level Map with a static unit-step range
    writing one element `T[p + c]` per iteration (each dimension its own parameter), its
    written box must meet each copied box in a box the prover can name, and its other
    outputs must not lose a point anyone reads (`_lost_points_problem`)."""
    exit_ = edge.src
    entry = state.entry_node(exit_)
    label = entry.map.label
    if state.scope_dict()[entry] is not None:
        return f"writer '{label}' is not a top-level Map"
    if any(not c.startswith("IN_") for c in entry.in_connectors):
        return f"writer '{label}' has a dynamic range"
    params = list(entry.map.params)
    ndr = entry.map.range.ndrange()
    if any(to_sympy(st) != 1 for _, _, st in ndr):
        return f"writer '{label}' has a strided range"
    ranges = {p: (to_sympy(b), to_sympy(e)) for p, (b, e, _) in zip(params, ndr)}
    found = element_write(state, edge, name, params, len(sdfg.arrays[name].shape), other_side=True)
    if isinstance(found, str):
        return f"writer '{label}' {found}"
    used = [p for p, _ in found]
    if None in used or len(set(used)) != len(used) or set(used) != set(params):
        return f"writer '{label}' does not give each dimension of '{name}' its own parameter"
    written = tuple((ranges[p][0] + c, ranges[p][1] + 1 + c) for p, c in found)
    kept = []
    for box in copied:
        m = _meet_box(written, box)
        if isinstance(m, str):
            return f"writer '{label}': {m}"
        if m is not None:
            kept.append(m)
    if not kept:
        return f"writer '{label}' writes nothing inside the copied boxes"
    pieces = []
    for m in kept:
        by_param = {
            p: (sympy.expand(lo - c), sympy.expand(hi - 1 - c))
            for (p, c), (lo, hi) in zip(found, m)
        }
        pieces.append(tuple((p, *by_param[p]) for p in params))
    others = []
    for e in state.out_edges(exit_):
        if e is edge:
            continue
        if e.data.is_empty() or e.data.wcr is not None or not isinstance(e.dst, dn.AccessNode):
            return f"writer '{label}' has an output that is not a plain write of an array"
        if e.dst.data == name:
            return f"writer '{label}' writes '{name}' through several edges"
        ow = element_write(
            state, e, e.dst.data, params, len(sdfg.arrays[e.dst.data].shape), other_side=True
        )
        if isinstance(ow, str):
            return f"writer '{label}' {ow}"
        oboxes = []
        for piece in pieces:
            r = {p: (lo, hi) for p, lo, hi in piece}
            oboxes.append(
                tuple((c, c + 1) if p is None else (r[p][0] + c, r[p][1] + 1 + c) for p, c in ow)
            )
        problem = _lost_points_problem(sdfg, e.dst.data, oboxes, label)
        if problem:
            return problem
        others.append((e, tuple(oboxes)))
    return SplitWriter(entry, tuple(pieces), tuple(kept), tuple(others))


def _copy_restriction(
    sdfg: dace.SDFG, state: SDFGState, node, edge, copied: tuple[Box, ...]
) -> Union[RetargetWriter, str]:
    """A copy into `T` that also writes outside the copied boxes, clipped to the one box it
    meets (`copy_writer`), or why not (it meets several: not split)."""
    dst = edge.data.get_dst_subset(edge, state)
    if dst is None:
        return copy_writer(sdfg, state, node, edge, copied[0])
    meets = [c for c in copied if not boxes.disjoint(_closed(box_of(dst)), _closed(c))]
    if len(meets) != 1:
        return f"a copy into the buffer meets {len(meets)} of the copied boxes, not one"
    return copy_writer(sdfg, state, node, edge, meets[0])


def _other_writers_problem(state: SDFGState, copies, gname: str) -> Optional[str]:
    """Why the copies' target nodes have writers besides the copies that the rewrite
    cannot keep, or None.

    Sound where each other writer writes `G` provably outside the copied boxes `B`: the
    node's value is the union of its writes, which are disjoint, so the order between
    them does not matter, and its readers read after all of them, then as now. The
    copies' source node (becoming `G`, written by `T`'s writers inside `B` only) merges
    into the target node; that adds orderings, and a cycle where a reader of `T` precedes
    another writer, which is declined (as are several source nodes for one target)."""
    copy_edges = {id(c.edge) for c in copies}
    for target in {id(c.target): c.target for c in copies}.values():
        others = [e for e in state.in_edges(target) if id(e) not in copy_edges]
        if not others:
            continue
        sources = {id(c.source): c.source for c in copies if c.target is target}
        if len(sources) != 1 or any(
            c.target is not target for c in copies if id(c.source) in sources
        ):
            return (
                f"'{gname}' is written by more than the copies, which come from several AccessNodes"
            )
        (source,) = sources.values()
        for e in others:
            label = getattr(e.src, "label", e.src)
            if not e.data.is_empty():
                if e.data.wcr is not None:
                    return f"'{label}' writes '{gname}' with a WCR"
                if not _outside(e.data.get_dst_subset(e, state), copies):
                    return f"'{label}' writes '{gname}' where the buffer is copied into it (or is not proven not to)"
            if nx.has_path(state.nx, source, e.src):
                return f"'{label}' writes '{gname}' after reading the buffer in the copy's state"
    return None


def _lifetime_problem(sdfg: dace.SDFG, plan_parts, gname: str, echoes=()) -> Optional[str]:
    """Why writing `G` where `T` is written, and reading it where `T` is read, could be
    observed (see the module docstring), or None. The sources of `echoes` read `G`
    outside the copied box, where nothing writes it: they are not such an access."""
    accesses, copies = plan_parts
    echo_sources = {id(a.edge.src) for a in echoes}
    cstate = copies[0].state
    if cstate.parent_graph is not sdfg:
        return "the write-back copy is inside a control-flow region"
    blocks: dict[int, Union[SDFGState, ConditionalBlock]] = {}
    writer_blocks: dict[int, Union[SDFGState, ConditionalBlock]] = {}
    for a in accesses:
        if in_loop(sdfg, a.state):
            return f"the buffer is accessed inside a loop (state '{a.state.label}')"
        block = top_block(sdfg, a.state)
        if block is None or not isinstance(block, (SDFGState, ConditionalBlock)):
            return f"the buffer is accessed in a {type(block).__name__} (state '{a.state.label}')"
        blocks[id(block)] = block
        if a.writes:
            writer_blocks[id(block)] = block
    blocks[id(cstate)] = cstate
    g = _block_graph(sdfg)
    if not nx.is_directed_acyclic_graph(g):
        return "the top-level control flow has a cycle"
    after_copy = nx.descendants(g, cstate)
    for w in writer_blocks.values():
        if w in after_copy:
            return "the buffer is written after its write-back copy"
        if w is not cstate and not always_reached(sdfg, w, cstate):
            return "the copy does not run on every path after a writer of the buffer"
    # The copy's state: writes of `T` there must come before the copy.
    sources = {id(c.source) for c in copies}
    targets = {id(c.target) for c in copies}
    for a in accesses:
        if a.state is cstate and a.writes and id(a.node) not in sources:
            if not any(nx.has_path(cstate.nx, a.node, c.source) for c in copies):
                return "the buffer is written in the copy's state without preceding the copy"
    # Blocks in the lifetime: between any two of the ones that touch `T`.
    life = set(blocks.values())
    for a in list(blocks.values()):
        desc = nx.descendants(g, a)
        for b in blocks.values():
            if b is not a and b in desc:
                life |= desc & nx.ancestors(g, b)
    for block in life:
        for st in _states_in(block):
            for n in st.data_nodes():
                if n.data != gname:
                    continue
                if st is cstate and id(n) in targets:
                    continue
                if (
                    id(n) in echo_sources
                    and all(any(e is a.edge for a in echoes) for e in st.out_edges(n))
                    and all(_outside(e.data.get_dst_subset(e, st), copies) for e in st.in_edges(n))
                ):
                    continue  # becomes the node `T`'s writers write: ordered as before
                return f"'{gname}' is accessed in state '{st.label}' during the buffer's lifetime"
    problem = _other_writers_problem(cstate, copies, gname)
    if problem:
        return problem
    # Symbols the subsets use must mean the same in every state of the lifetime.
    symbols: set[str] = set()
    for a in accesses:
        symbols |= {str(s) for s in a.edge.data.free_symbols}
    for c in copies:
        symbols |= {str(s) for s in c.edge.data.free_symbols}
    for e in sdfg.edges():
        if e.src in life and e.dst in life and set(e.data.assignments) & symbols:
            return f"symbols {sorted(set(e.data.assignments) & symbols)} are reassigned during the buffer's lifetime"
    for block in life:
        if not isinstance(block, SDFGState):
            for e in block.all_interstate_edges():
                if set(e.data.assignments) & symbols:
                    return f"symbols {sorted(set(e.data.assignments) & symbols)} are reassigned during the buffer's lifetime"
    return None


def output_buffer_plan(sdfg: dace.SDFG, name: str) -> Union[OutputBufferPlan, Decline]:
    """The plan for replacing the transient `name` by the output it is copied into, or a
    Decline saying why not (see the module docstring). Never mutates, never raises for a
    well-formed SDFG.

    Args:
        sdfg: the SDFG.
        name: the transient buffer's name.

    Returns:
        the `OutputBufferPlan`, or a `Decline` with the reason.
    """
    desc = sdfg.arrays.get(name)
    if desc is None or not desc.transient or type(desc) is not dace_data.Array:
        return Decline(f"'{name}' is not a transient array")
    copies = writeback_copies(sdfg, name)
    if isinstance(copies, Decline):
        return copies
    if not copies:
        return Decline(f"'{name}' has no write-back copy")
    groups: dict[tuple, list[WriteBackCopy]] = {}
    for c in copies:
        groups.setdefault((c.target.data, id(c.state)), []).append(c)
    if len(groups) == 1:
        return _plan(sdfg, name, desc, copies)
    # Copies into several outputs (or states): one group becomes the buffer, the others
    # are readers of it like any other (their copies then read that output).
    reasons = []
    for group in groups.values():
        plan = _plan(sdfg, name, desc, group)
        if not isinstance(plan, Decline):
            return plan
        reasons.append(f"'{group[0].target.data}' in '{group[0].state.label}': {plan.reason}")
    return Decline("no copy's target can be the buffer: " + "; ".join(reasons))


def _target_problem(sdfg: dace.SDFG, name: str, desc, gname: str) -> Optional[str]:
    """Why the copies' target `gname` cannot stand in for the buffer `name` (not an array;
    another dtype, storage or rank; an index offset; read on an interstate edge), or None."""
    gdesc = sdfg.arrays[gname]
    if type(gdesc) is not dace_data.Array:
        return f"'{gname}' is a {type(gdesc).__name__}, not an array"
    if (
        gdesc.dtype != desc.dtype
        or gdesc.storage != desc.storage
        or len(gdesc.shape) != len(desc.shape)
    ):
        return f"'{gname}' differs from '{name}' in dtype, storage or rank"
    if (
        any(dace.symbolic.pystr_to_symbolic(o) != 0 for o in (*desc.offset, *gdesc.offset))
        or desc.start_offset
        or gdesc.start_offset
    ):
        return f"'{name}' or '{gname}' has an index offset"
    if {name, gname} & interstate_reads(sdfg):
        return f"'{name}' or '{gname}' is read on an interstate edge or a condition"
    return None


def _buffer_edge(
    sdfg: dace.SDFG, st, node, e, writes: bool, copied, echo_boxes: list, gdesc, name: str
) -> Union[tuple[BufferEdge, list[NestedView]], Decline]:
    """One access `e` of the buffer (a write where `writes`) as the plan keeps it, with the
    nested SDFGs that see the buffer through it; a writer outside the copied box is
    restricted to it (a copy) or split (a Map), else the access is declined."""
    problem = _edge_problem(sdfg, st, node, e, writes, copied)
    if echo_boxes and problem:
        problem = _echo_problem(st, e, writes, copied, echo_boxes) or problem
        problem = None if problem == "echo" else problem
    restricted = split = None
    if problem and writes and "outside the copied box" in problem:
        if isinstance(e.src, dn.MapExit):
            split = _map_split(sdfg, st, node, e, copied, name)
        elif isinstance(e.src, dn.AccessNode):
            restricted = _copy_restriction(sdfg, st, node, e, copied)
        for r in (restricted, split):
            if isinstance(r, str):
                return Decline(f"{problem}, and cannot be restricted to it: {r}")
        problem = None if (restricted or split) is not None else problem
    if problem:
        return Decline(problem)
    restricted = cast(Optional[RetargetWriter], restricted)  # a str declined above
    split = cast(Optional[SplitWriter], split)
    views = _nested_views(sdfg, st, e, gdesc, name)
    if isinstance(views, str):
        return Decline(views)
    if views and split is not None and len(split.pieces) > 1:
        return Decline(
            f"writer '{split.entry.map.label}' would be split, but a nested SDFG in it "
            f"sees the buffer"
        )
    return BufferEdge(st, node, e, writes, restricted, split), views


def _echo_overlap(
    accesses: list[BufferEdge], echo_boxes: list, name: str, gname: str
) -> Optional[str]:
    """Why a writer of the buffer overlaps a box where the target is copied back into it
    (an echo), or None."""
    for a in accesses:
        if a.writes:
            wbox = _closed(box_of(a.edge.data.get_dst_subset(a.edge, a.state)))
            if not all(boxes.disjoint(wbox, b) for b in echo_boxes):
                return (
                    f"'{getattr(a.edge.src, 'label', a.edge.src)}' writes '{name}' where "
                    f"'{gname}' is copied into it"
                )
    return None


def _plan(
    sdfg: dace.SDFG, name: str, desc, copies: list[WriteBackCopy]
) -> Union[OutputBufferPlan, Decline]:
    """The plan with `copies` (one target, one state) as the write-back copies; any other
    copy of `T` is one of its readers."""
    merged = _copied_boxes(copies)
    if isinstance(merged, str):
        return Decline(merged)
    copied, shift = merged
    gname = copies[0].target.data
    target = _target_problem(sdfg, name, desc, gname)
    if target:
        return Decline(target)
    gdesc = sdfg.arrays[gname]

    echoes = _echoes(sdfg, name, gname, copied, shift)
    if isinstance(echoes, str):
        return Decline(echoes)
    echo_boxes = [_closed(box_of(a.edge.data.get_dst_subset(a.edge, a.state))) for a in echoes]
    accesses: list[BufferEdge] = []
    nested: list[NestedView] = []
    copy_edges = {id(c.edge) for c in copies} | {id(a.edge) for a in echoes}
    for st in sdfg.states():
        scope = None
        for node in st.data_nodes():
            if node.data != name:
                continue
            scope = scope or st.scope_dict()
            if scope[node] is not None:
                return Decline(f"'{name}' is accessed inside a scope")
            for writes, edges in ((True, st.in_edges(node)), (False, st.out_edges(node))):
                for e in edges:
                    if id(e) in copy_edges:
                        continue
                    kept = _buffer_edge(sdfg, st, node, e, writes, copied, echo_boxes, gdesc, name)
                    if isinstance(kept, Decline):
                        return kept
                    accesses.append(kept[0])
                    nested += kept[1]
    if not any(a.writes for a in accesses):
        return Decline(f"'{name}' is never written")
    overlap = _echo_overlap(accesses, echo_boxes, name, gname) if echo_boxes else None
    if overlap:
        return Decline(overlap)
    problem = _lifetime_problem(sdfg, (accesses, copies), gname, echoes)
    if problem:
        return Decline(problem)
    plan = OutputBufferPlan(
        name, gname, tuple(copies), copied, shift, tuple(accesses), tuple(nested), tuple(echoes)
    )
    race = race_problem(sdfg, plan.states, (name, gname))
    if race:
        return Decline(race.reason)
    return plan
