"""Write-back retargeting: let the writers of a write-back buffer write the output itself.

gt4py computes a result `T` on the points its readers need and copies the part that is
a program output into `G` (`T[A] -> G[B]`, often a later state). Once no Map reads `T`
any more (the inliner took them), the copy is `T`'s only reader, and the writers of `T`
can write `G[B]` directly: each writer Map is restricted to the points inside `A`
(the rest only fed the readers that are gone), each writer copy is clipped to `A`, and
both are shifted by `B - A`. `T` and the copy disappear; the writers stay the streaming
loops gt4py made them (`docs/writeback.md`; the Map form of the copy,
`transformations/writeback.py`, instead recomputes the producer per element).

Pure analysis: `retarget_plan` returns a frozen plan or a `Decline`; the mutation is in
`transformations/retarget.py`. Conditions (all are checked, none assumed):

- `T` is a transient array read by exactly one copy edge into a global array `G`
  (unit stride, same size, no WCR), plus, with `allow_map_readers`, top-level Maps
  (which the caller inlines first).
- Every write of `T` is in one state, by a top-level Map that writes nothing else and
  writes one element `T[p_0 + c_0, ...]` per iteration (a distinct parameter per
  dimension, step 1, no dynamic range), or by a copy edge with explicit subsets; no WCR.
- Each writer's box meets `A` in a box the symbolic prover can name (every bound of the
  intersection is provably one of the two), so the restricted range needs no `Min`/`Max`
  guesswork.
- Moving the write of `G` from the copy's state to the writers' state changes nothing
  observable: `G` is not accessed in the writers' state nor in any state that may run in
  between (bounded control flow, `analysis/crossstate.py`), nor on an interstate edge;
  in the copy's state the copy's target is `G`'s only AccessNode and the copy its only
  writer; no symbol of the bounds is reassigned in between.
"""

from __future__ import annotations

import dataclasses
from typing import Optional, Union, cast

import dace
import networkx as nx
import sympy
from dace import data as dace_data
from dace.sdfg import nodes as dn
from dace.sdfg.state import SDFGState

from gt4py_dace_xforms.analysis import boxes
from gt4py_dace_xforms.analysis.crossstate import states_between
from gt4py_dace_xforms.analysis.producer import Decline, interstate_reads
from gt4py_dace_xforms.analysis.races import UnorderedAccess, race_problem
from gt4py_dace_xforms.analysis.symbolic import (
    UnsupportedIndex,
    free_names,
    prove_nonnegative,
    split_index,
    to_sympy,
)
from gt4py_dace_xforms.analysis.writeback import WriteBackCopy, writeback_copies


Box = tuple[tuple[sympy.Expr, sympy.Expr], ...]  # per dimension (first, end), end exclusive


@dataclasses.dataclass(frozen=True)
class RetargetWriter:
    """One write of `T`: the edge into `T`'s AccessNode and the box it keeps (in `T`'s
    indices, the intersection with the copied box). For a Map writer also its entry and
    the restricted parameter ranges (`param -> (first, last)`, inclusive), and the
    per-dimension parameter offset `c` of its element write `T[p + c]`."""

    node: dn.AccessNode
    edge: dace.sdfg.graph.MultiConnectorEdge
    box: Box
    entry: Optional[dn.MapEntry] = None
    ranges: tuple[tuple[str, sympy.Expr, sympy.Expr], ...] = ()


@dataclasses.dataclass(frozen=True)
class RetargetPlan:
    """`T` (`name`) written by `writers` in `writer_state`, copied by `copy` into the
    global array `copy.target.data`; `shift[d]` maps `T`'s index to `G`'s (`B - A`)."""

    name: str
    writer_state: SDFGState
    copies: tuple[WriteBackCopy, ...]
    copied: Box
    shift: tuple[sympy.Expr, ...]
    writers: tuple[RetargetWriter, ...]

    @property
    def copy(self) -> WriteBackCopy:
        """The first write-back copy (the one where there is one)."""
        return self.copies[0]

    @property
    def target(self) -> str:
        """The name of the write-back target `G`."""
        return self.copy.target.data

    @property
    def copied_extents(self) -> tuple[sympy.Expr, ...]:
        """The extent of the copied box of `T` per dimension."""
        return tuple(sympy.expand(hi - lo) for lo, hi in self.copied)


def box_of(subset) -> Box:
    """The box of a DaCe subset, half-open: `(begin, end + 1)` per dimension.

    Args:
        subset: a DaCe subset (unit steps).

    Returns:
        the box.
    """
    return tuple((to_sympy(b), to_sympy(e) + 1) for b, e, _ in subset.ndrange())


def provably_le(a, b) -> bool:
    """Whether `a <= b` is proven for every value of the symbols.

    Args:
        a: an expression (anything `to_sympy` takes).
        b: another.

    Returns:
        True where proven.
    """
    return prove_nonnegative(sympy.expand(to_sympy(b) - to_sympy(a))) is True


def meet(w: Box, a: Box) -> Union[Box, str]:
    """The intersection of two boxes where every bound is provably one of the two.

    Args:
        w: a box.
        a: another box of the same rank.

    Returns:
        the intersection, or why it is not provable.
    """
    out = []
    for d, ((w0, w1), (a0, a1)) in enumerate(zip(w, a)):
        lo = a0 if provably_le(w0, a0) else w0 if provably_le(a0, w0) else None
        hi = a1 if provably_le(a1, w1) else w1 if provably_le(w1, a1) else None
        if lo is None or hi is None:
            return f"cannot order the written and the copied bounds in dimension {d}"
        out.append((lo, hi))
    return tuple(out)


def element_write(
    state: SDFGState, edge, data: str, params, ndim: int, *, other_side: bool = False
) -> Union[tuple, str]:
    """`(param, offset)` per dimension of the one element `data[p + c]` that every leaf of
    the Map exit's edge `edge` writes per iteration (`param` None: the constant `c`), or
    why not (a phrase to follow the writer's name). Shared by `map_writer` and
    `analysis.output_buffer`. `other_side`: also take an inner memlet named after its
    source whose `other_subset` is the write of `data` (`OutputAsBuffer` proves those;
    `map_writer` declines them).

    Args:
        state: the writer's state.
        edge: the Map exit's outer edge.
        data: the written data.
        params: the Map's parameters.
        ndim: the data's rank.
        other_side: also take an edge whose memlet names the other side of the copy.

    Returns:
        the `(param, offset)` pairs, or the reason.
    """
    tree = state.memlet_tree(edge)
    inner = [x for x in tree if x is not edge]
    if not inner or {id(x) for x in inner} != {id(leaf) for leaf in tree.leaves()}:
        return f"writes '{data}' through nested scopes"
    found: Optional[tuple[tuple[Optional[str], sympy.Expr], ...]] = None
    for x in inner:
        m = x.data
        if m.wcr is not None:
            return f"writes '{data}' with a WCR"
        sub = m.subset if m.data == data else m.other_subset if other_side else None
        if sub is None or len(sub) != ndim:
            return f"writes '{data}' through a view or other data"
        try:
            terms = []
            for b, e, _ in sub.ndrange():
                if sympy.expand(to_sympy(e) - to_sympy(b)) != 0:
                    raise UnsupportedIndex("a range")
                terms.append(split_index(b, params))
        except UnsupportedIndex:
            return f"does not write one element '{data}[p + c]' per iteration"
        key = tuple((t.param, sympy.expand(t.offset)) for t in terms)
        if found is not None and key != found:
            return f"writes '{data}' at several offsets"
        found = key
    return cast(tuple, found)  # `inner` is not empty: the loop set it


def map_writer(sdfg, state, node, edge, copied: Box) -> Union[RetargetWriter, str]:
    """A top-level Map writing the buffer `node` through `edge` as a `RetargetWriter`, its write
    restricted to the copied box, or why it cannot write the target instead.

    Args:
        sdfg: the SDFG.
        state: the writer's state.
        node: the buffer's AccessNode.
        edge: the `MapExit -> node` edge.
        copied: the box of the buffer the write-back copies read.

    Returns:
        the writer, or the reason.
    """
    exit_ = edge.src
    entry = state.entry_node(exit_)
    if state.scope_dict()[entry] is not None:
        return f"writer '{entry.map.label}' is not a top-level Map"
    if any(not c.startswith("IN_") for c in entry.in_connectors):
        return f"writer '{entry.map.label}' has a dynamic range"
    if any(e.dst is not node for e in state.out_edges(exit_)):
        return f"writer '{entry.map.label}' writes other data too"
    params = list(entry.map.params)
    ranges = {
        p: (to_sympy(b), to_sympy(e), to_sympy(s))
        for p, (b, e, s) in zip(params, entry.map.range.ndrange())
    }
    if any(s != 1 for _, _, s in ranges.values()):
        return f"writer '{entry.map.label}' has a strided range"
    ndim = len(sdfg.arrays[node.data].shape)
    found = element_write(state, edge, node.data, params, ndim)
    if isinstance(found, str):
        return f"writer '{entry.map.label}' {found}"
    if found is None:
        return f"writer '{entry.map.label}' has no element write"
    used = [p for p, _ in found]
    if None in used or len(set(used)) != ndim or set(used) != set(params):
        return f"writer '{entry.map.label}' does not give each dimension its own parameter"
    written = tuple((ranges[p][0] + c, ranges[p][1] + 1 + c) for p, c in found)
    box = meet(written, copied)
    if isinstance(box, str):
        return f"writer '{entry.map.label}': {box}"
    new_ranges = tuple(
        (p, sympy.expand(lo - c), sympy.expand(hi - 1 - c)) for (p, c), (lo, hi) in zip(found, box)
    )
    return RetargetWriter(node, edge, box, entry, new_ranges)


def copy_writer(sdfg, state, node, edge, copied: Box) -> Union[RetargetWriter, str]:
    """A copy into the buffer `node` through `edge` as a `RetargetWriter`, or why it cannot write
    the target instead.

    Args:
        sdfg: the SDFG.
        state: the copy's state.
        node: the buffer's AccessNode.
        edge: the `AccessNode -> node` copy edge.
        copied: the box of the buffer the write-back copies read.

    Returns:
        the writer, or the reason.
    """
    src = edge.src
    if state.scope_dict()[src] is not None:
        return "a copy into the buffer inside a scope"
    if edge.data.wcr is not None:
        return "a copy into the buffer has a WCR"
    s, t = edge.data.get_src_subset(edge, state), edge.data.get_dst_subset(edge, state)
    if s is None or t is None or len(s) != len(t):
        return "a copy into the buffer has no explicit subsets"
    if any(x != 1 for x in (*s.strides(), *t.strides())) or any(
        sympy.expand(to_sympy(a) - to_sympy(b)) != 0 for a, b in zip(s.size(), t.size())
    ):
        return "a copy into the buffer is strided or reshapes"
    box = meet(box_of(t), copied)
    if isinstance(box, str):
        return f"copy from '{src.data}': {box}"
    return RetargetWriter(node, edge, box)


def retarget_plan(
    sdfg: dace.SDFG, name: str, *, allow_map_readers: bool = False
) -> Union[RetargetPlan, Decline]:
    """The plan for letting the writers of the transient `name` write its write-back
    target directly, or a Decline saying why not (see the module docstring).

    `allow_map_readers`: top-level Maps may still read `name` (the caller inlines them
    before applying the plan, which must then be recomputed).

    Args:
        sdfg: the SDFG.
        name: the transient's name.
        allow_map_readers: let top-level Maps read `name`.

    Returns:
        the `RetargetPlan`, or a `Decline` with the reason.
    """
    desc = sdfg.arrays.get(name)
    if desc is None or not desc.transient or type(desc) is not dace_data.Array:
        return Decline(f"'{name}' is not a transient array")
    copies = writeback_copies(sdfg, name)
    if isinstance(copies, Decline):
        return copies
    if not copies:
        return Decline(f"'{name}' has no write-back copy")
    merged = merge_copies(copies)
    if isinstance(merged, str):
        return Decline(merged)
    copied, shift = merged
    cp = copies[0]
    gname = cp.target.data
    if {name, gname} & interstate_reads(sdfg):
        return Decline(f"'{name}' or '{gname}' is read on an interstate edge")

    writer_state, writes = None, []
    for st in sdfg.states():
        scope = st.scope_dict()
        for node in st.data_nodes():
            if node.data != name:
                continue
            if scope[node] is not None:
                return Decline(f"'{name}' is accessed inside a scope")
            for e in st.out_edges(node):
                if any(e is c.edge for c in copies):
                    continue
                if not (allow_map_readers and isinstance(e.dst, dn.MapEntry)):
                    return Decline(f"'{name}' has a reader besides its write-back copy")
            if st.in_degree(node):
                if writer_state is not None and writer_state is not st:
                    return Decline(f"'{name}' is written in several states")
                writer_state = st
                writes += [(node, e) for e in st.in_edges(node)]
    if writer_state is None:
        return Decline(f"'{name}' is never written")

    writers = []
    for node, e in writes:
        if isinstance(e.src, dn.MapExit):
            w = map_writer(sdfg, writer_state, node, e, copied)
        elif isinstance(e.src, dn.AccessNode):
            w = copy_writer(sdfg, writer_state, node, e, copied)
        else:
            w = f"'{name}' is written by a {type(e.src).__name__}"
        if isinstance(w, str):
            return Decline(w)
        writers.append(w)

    problem = _ordering_problem(sdfg, writer_state, copies, writers)
    race = race_problem(sdfg, [writer_state], ())
    if problem or race:  # no problem: then a race
        return Decline(problem or cast(UnorderedAccess, race).reason)
    return RetargetPlan(name, writer_state, tuple(copies), copied, shift, tuple(writers))


def copy_boxes(copies: list[WriteBackCopy]) -> tuple[list[Box], list[tuple]]:
    """Per copy, the box of `T` it reads and its shift to `G`'s indices.

    Args:
        copies: the write-back copies.

    Returns:
        `(boxes, shifts)`, one of each per copy.
    """
    boxes_, shifts = [], []
    for c in copies:
        a = box_of(c.edge.data.get_src_subset(c.edge, c.state))
        b = box_of(c.edge.data.get_dst_subset(c.edge, c.state))
        boxes_.append(a)
        shifts.append(tuple(sympy.expand(b0 - a0) for (a0, _), (b0, _) in zip(a, b)))
    return boxes_, shifts


def merge_copies(copies: list[WriteBackCopy]) -> Union[tuple[Box, tuple], str]:
    """The box of `T` the copies read together and the shift to `G`'s indices: one copy,
    or several (gt4py splits the copy of a concat_where result at the branch boundary)
    into the same array in one state, with one shift, that tile a box (split along any
    dimensions, `boxes.prove_tiling`).

    Args:
        copies: the write-back copies.

    Returns:
        `(box, shift)`, or the reason they do not merge.
    """
    boxes_, shifts = copy_boxes(copies)
    if len(copies) == 1:
        return boxes_[0], shifts[0]
    if len({c.target.data for c in copies}) != 1 or len({id(c.state) for c in copies}) != 1:
        return "the write-back copies go to several arrays or states"
    if any(sympy.expand(x - y) != 0 for s in shifts[1:] for x, y in zip(s, shifts[0])):
        return "the write-back copies shift differently"
    # Pieces split along any dimensions (a decomposed rank's halo splits the copy in Cell
    # as well as at the concat's level): they must tile one box, proven by `boxes`.
    whole, reason = boxes.prove_tiling(
        [tuple((lo, hi - 1) for lo, hi in b) for b in boxes_], what="copies"
    )
    if reason:
        return f"the write-back copies do not tile one box: {reason}"
    # no reason: the pieces tile `whole`
    return tuple((lo, hi + 1) for lo, hi in cast(Box, whole)), shifts[0]


def always_reached(sdfg: dace.SDFG, first: SDFGState, second: SDFGState) -> bool:
    """Every path from `first` to an exit of the top-level graph passes `second`.

    Args:
        sdfg: the SDFG.
        first: the earlier state.
        second: the later state.

    Returns:
        True where proven.
    """
    g = nx.DiGraph()
    g.add_nodes_from(sdfg.nodes())
    g.add_edges_from((e.src, e.dst) for e in sdfg.edges())
    exits = {n for n in g if g.out_degree(n) == 0}
    if second in exits and len(exits) == 1:
        return nx.has_path(g, first, second)
    g.remove_node(second)
    return not any(nx.has_path(g, first, x) for x in exits - {second})


def _ordering_problem(sdfg, writer_state: SDFGState, copies, writers) -> Optional[str]:
    """Why writing `G` in the writers' state instead of the copies' could be observed."""
    cp = copies[0]
    gname = cp.target.data
    targets = {id(c.target) for c in copies}
    if any(n.data == gname and id(n) not in targets for n in cp.state.data_nodes()):
        return f"'{gname}' has another AccessNode in the copy's state"
    if any(
        not any(e is c.edge for c in copies) for c in copies for e in cp.state.in_edges(c.target)
    ):
        return f"'{gname}' is written by more than the copy"
    if writer_state is cp.state:
        # One state: the copy must read the very node the writers write (no second
        # AccessNode of `T` whose order against the writes only the edges would tell).
        if any(w.node is not c.source for w in writers for c in copies):
            return f"'{cp.source.data}' is written and copied through different AccessNodes"
        if len(targets) > 1 and any(cp.state.out_degree(c.target) for c in copies):
            # The writers will write the first target; a read of another one would lose its order.
            return f"'{gname}' is read after copies into several AccessNodes"
        return None
    if any(n.data == gname for n in writer_state.data_nodes()):
        return f"'{gname}' is accessed in the writers' state"
    if writer_state.parent_graph is not sdfg or cp.state.parent_graph is not sdfg:
        return "the writers or the copy are inside a control-flow region"
    if not always_reached(sdfg, writer_state, cp.state):
        # Written early, `G` would change on a path where the copy never runs.
        return "the copy does not run on every path after the writers"
    between = states_between(sdfg, writer_state, cp.state)
    if between is None:
        return "cannot bound the control flow between the writers and the copy"
    states, edges = between
    for st in states:
        if any(n.data == gname for n in st.data_nodes()):
            return f"'{gname}' is accessed in state '{st.label}' between the writers and the copy"
    symbols = set()
    for w in writers:
        for lo, hi in w.box:
            symbols |= free_names(lo) | free_names(hi)
    for c in copies:
        for subset in (
            c.edge.data.get_src_subset(c.edge, c.state),
            c.edge.data.get_dst_subset(c.edge, c.state),
        ):
            symbols |= set(map(str, subset.free_symbols))
    for e in edges:
        if set(e.data.assignments) & symbols:
            return f"symbols {sorted(set(e.data.assignments) & symbols)} are reassigned between the writers and the copy"
    return None
