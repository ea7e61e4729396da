"""Copy into readers: a copy `S[A] -> D[B]` between two AccessNodes of one state, where
Maps of the same state read `S` at every point of `A`, one point per iteration.

gt4py lowers `D = S` (icon4py's first predictor substep: `exner_dynamical_increment =
current_exner`) to a plain AccessNode copy, which DaCe's code generator expands into its
own loop nest (or `cudaMemcpy2D`): `S` is read twice, once by the copy and once by the
Maps that compute from it. Writing `D[p + B - A] = S[p]` in the Maps' own iterations, where
they load `S[p]` anyway, saves the copy's read of `S`; nothing is recomputed, the write of
`D` stays (docs/copy_into_readers.md).

Pure analysis: `copy_into_readers_plan` returns a frozen plan or a `Decline`; the mutation
is in `transformations/copy_into_readers.py`. Conditions (all checked, none assumed):

- exactly one edge `S -> D`, a plain copy (no WCR, unit steps, the same extent per
  dimension on both sides); `S` and `D` arrays (not Views) of the same rank, dtype and
  storage;
- `D`'s node has that edge only, and `D` has no other AccessNode in the state (nothing
  else reads or writes it there, so moving its write into the Maps reorders nothing);
- `S` is written nowhere in the state (every read of it, the copy's included, sees the
  same values);
- the readers: top-level Maps of the state (not nested in another scope) fed by an
  AccessNode of `S`, with unit steps, that read one point of `S` per iteration on an edge
  out of their entry (each dimension indexed by its own parameter plus a constant, or by a
  constant alone; a parameter that indexes nothing has a single value); the iterations of the chosen ones read pairwise disjoint boxes that
  together are exactly `A` (`analysis.boxes`: symbolic and literal bounds alike). Maps
  reading the same points (icon4py's predictor has two) are taken in the state's order,
  the first that fit;
- no unordered access of `S` or `D` (`analysis.races`).
"""

from __future__ import annotations

import dataclasses
from typing import Optional, Union

import dace
import sympy
from dace import data as dace_data
from dace.sdfg import nodes as dn

from gt4py_dace_xforms.analysis import boxes
from gt4py_dace_xforms.analysis.producer import Decline
from gt4py_dace_xforms.analysis.races import race_problem
from gt4py_dace_xforms.analysis.symbolic import UnsupportedIndex, prove_zero, split_index, to_sympy


@dataclasses.dataclass(frozen=True)
class ReaderPiece:
    """One reader Map: its entry, the connector it reads `S` on (`OUT_` side), the point
    `S[p + c]` it reads (one sympy expression per dimension of `S`) and the box of `S` its
    iterations read."""

    entry: dn.MapEntry
    connector: str
    point: tuple
    box: boxes.Box


@dataclasses.dataclass(frozen=True)
class CopyReadersPlan:
    """A copy `S[A] -> D[B]` and the Maps that will write `D` instead: `shift` is `B - A`
    per dimension."""

    state: dace.SDFGState
    edge: dace.sdfg.graph.MultiConnectorEdge
    src: dn.AccessNode
    dst: dn.AccessNode
    pieces: tuple[ReaderPiece, ...]
    shift: tuple
    elements: sympy.Expr

    @property
    def names(self) -> tuple[str, str]:
        """The copy's source and destination data, in that order."""
        return self.src.data, self.dst.data


def copy_into_readers_plan(
    sdfg: dace.SDFG, state: dace.SDFGState, src: dn.AccessNode, dst: dn.AccessNode
) -> Union[CopyReadersPlan, Decline]:
    """The plan for the copy `src -> dst` in `state`, or why it cannot be made (see the
    module docstring).

    Args:
        sdfg: the SDFG.
        state: the copy's state.
        src: the copy's source AccessNode.
        dst: the copy's destination AccessNode.

    Returns:
        the `CopyReadersPlan`, or a `Decline` with the reason.
    """
    name, target = src.data, dst.data
    what = f"copy {name} -> {target}"
    edges = [e for e in state.out_edges(src) if e.dst is dst]
    if len(edges) != 1:
        return Decline(f"{what}: {len(edges)} edges between the nodes, not one")
    edge = edges[0]
    problem = _arrays_problem(sdfg, name, target)
    if problem:
        return Decline(f"{what}: {problem}")
    memlet = edge.data
    if memlet.wcr is not None or memlet.is_empty():
        return Decline(f"{what}: not a plain copy (WCR or empty memlet)")
    a, b = memlet.get_src_subset(edge, state), memlet.get_dst_subset(edge, state)
    if a is None or b is None or len(a) != len(b):
        return Decline(f"{what}: the copy's source and target subsets are not both known")
    if any(s != 1 for _, _, s in a.ndrange()) or any(s != 1 for _, _, s in b.ndrange()):
        return Decline(f"{what}: a copy with steps")
    box_a, box_b = boxes.from_subset(a), boxes.from_subset(b)
    shift = tuple(sympy.expand(lb - la) for (la, _), (lb, _) in zip(box_a, box_b))
    if not all(prove_zero((hb - lb) - (ha - la)) for (la, ha), (lb, hb) in zip(box_a, box_b)):
        return Decline(f"{what}: source and target subsets differ in shape")
    problem = _state_problem(state, src, dst, edge)
    if problem:
        return Decline(f"{what}: {problem}")
    race = race_problem(sdfg, [state], (name, target))
    if race is not None:
        return Decline(f"{what}: unordered access of '{race.data}' (docs/races.md)")
    found = _reader_pieces(state, name, box_a)
    chosen: list[ReaderPiece] = []
    for piece in found:
        if all(boxes.disjoint(piece.box, c.box) for c in chosen):
            chosen.append(piece)
    if not chosen:
        return Decline(
            f"{what}: no top-level Map reads {name} one point per iteration inside the copied box"
        )
    cover = boxes.prove_cover(box_a, [c.box for c in chosen], what=f"the Maps reading {name}")
    if not cover.proven:
        return Decline(f"{what}: {cover.reason}")
    elements = sympy.expand(sympy.Mul(*[hi - lo + 1 for lo, hi in box_a]))
    return CopyReadersPlan(state, edge, src, dst, tuple(chosen), shift, elements)


def _arrays_problem(sdfg: dace.SDFG, name: str, target: str) -> Optional[str]:
    s, d = sdfg.arrays[name], sdfg.arrays[target]
    for n, desc in ((name, s), (target, d)):
        if isinstance(desc, dace_data.View) or not isinstance(desc, dace_data.Array):
            return f"'{n}' is not an array (a View or a scalar)"
    if len(s.shape) != len(d.shape) or s.dtype != d.dtype or s.storage != d.storage:
        return "source and target differ in rank, dtype or storage"
    return None


def _state_problem(
    state: dace.SDFGState, src: dn.AccessNode, dst: dn.AccessNode, edge
) -> Optional[str]:
    if state.in_degree(dst) != 1 or state.out_degree(dst) != 0:
        return f"'{dst.data}' is also read or written by its node"
    for n in state.data_nodes():
        if n.data == dst.data and n is not dst:
            return f"'{dst.data}' has another node in the state"
        if n.data == src.data and state.in_degree(n) > 0:
            return f"'{src.data}' is written in the state"
    if state.entry_node(src) is not None or state.entry_node(dst) is not None:
        return "the copy is inside a scope"
    return None


def _reader_pieces(state: dace.SDFGState, name: str, copied: boxes.Box) -> list[ReaderPiece]:
    """The top-level Maps reading `name` one point per iteration within `copied`, in the
    state's node order."""
    out: list[ReaderPiece] = []
    seen: set[int] = set()
    for node in state.nodes():
        if not isinstance(node, dn.AccessNode) or node.data != name:
            continue
        for e in state.out_edges(node):
            entry = e.dst
            if (
                not isinstance(entry, dn.MapEntry)
                or id(entry) in seen
                or state.entry_node(entry) is not None
            ):
                continue
            if not (e.dst_conn or "").startswith("IN_"):
                continue
            piece = _piece(state, entry, "OUT_" + e.dst_conn[3:], len(copied))
            if piece is not None and boxes.contains(copied, piece.box):
                seen.add(id(entry))
                out.append(piece)
    return out


def _piece(
    state: dace.SDFGState, entry: dn.MapEntry, conn: str, rank: int
) -> Optional[ReaderPiece]:
    """The reader on `conn` of `entry`, if one of its inner edges reads one point `S[p + c]`
    per iteration: each dimension of `S` indexed by its own parameter plus a constant, or by
    a constant alone (gt4py writes the level of a one-level Map as a number); every
    parameter that indexes nothing has a single value."""
    m = entry.map
    params = list(m.params)
    if any(s != 1 for _, _, s in m.range.ndrange()):
        return None
    ranges = {p: (to_sympy(b), to_sympy(e)) for p, (b, e, _) in zip(params, m.range.ndrange())}
    for inner in state.out_edges_by_connector(entry, conn):
        subset = inner.data.subset
        if inner.data.wcr is not None or subset is None or len(subset) != rank:
            continue
        if any(b != e for b, e, _ in subset.ndrange()):
            continue
        try:
            terms = [split_index(b, params) for b, _, _ in subset.ndrange()]
        except (UnsupportedIndex, TypeError, ValueError):
            continue
        used = [t.param for t in terms if t.param is not None]
        if len(set(used)) != len(used):
            continue
        if not all(prove_zero(ranges[p][1] - ranges[p][0]) for p in params if p not in used):
            continue  # several iterations would read (and write) one point
        point = tuple(t.expr() for t in terms)
        box = tuple(
            (
                sympy.expand(ranges[t.param][0] + t.offset),
                sympy.expand(ranges[t.param][1] + t.offset),
            )
            if t.param is not None
            else (t.offset, t.offset)
            for t in terms
        )
        return ReaderPiece(entry, conn, point, box)
    return None
