"""In-place update: a concat node that is its source array with some points changed
pointwise becomes the source, updated in place.

gt4py lowers `x2 = concat_where(cond, f(x1), x1)` with `x1` a transient (the implicit
solvers' Rayleigh damping of `next_w`: `x1` is the back substitution's result, `f` damps
levels 1..end_index_of_damping_layer) to a second field-sized transient `T` (`x2`),
written by copies of `S` (`x1`) at the same indices where `cond` is false and by a Map
computing `f(S)` pointwise where it is true. Neither gt4py's copy-chain removal (the
copies do not cover `T`) nor inlining (`S` is a concat node too, or read by the Map)
removes it. Where nothing else reads `S`, `T` is `S` with those points overwritten: the
Map writes `S` at the points it reads, the copies go, and `T`'s readers read `S` after
the Map (`docs/inplace_update.md`).

Pure analysis: `inplace_update_plan` returns a frozen plan or a `Decline`; the mutation
is in `transformations/inplace_update.py`. Conditions (all checked):

- `S` and `T` are transient arrays (not Views) of the same dtype, shape, strides,
  storage and offsets, each with exactly one AccessNode in the SDFG (this state), not
  read on an interstate edge or a condition, without unordered accesses.
- Every edge into `T` is a copy from `S` that moves each point to the same index, or
  comes from a top-level Map (the updater) that reads `S` and writes `T` only through
  one element per iteration at the same index, `param + constant` in every dimension
  with every parameter used once (distinct iterations touch distinct points), without
  WCR or dynamic memlets, and whose `S` reads reach tasklets or AccessNodes only. There
  is at least one copy and one updater.
- The copies' and updaters' boxes are pairwise disjoint (`analysis.boxes`): no point of
  `T` is both copied and updated.
- `S` has no reader but those copies and updaters (another reader could be ordered
  after an update and see the new value).
"""

from __future__ import annotations

import dataclasses
from typing import Optional, Union

import dace
import sympy
from dace import data as dace_data
from dace.sdfg import nodes as dn
from dace.sdfg.state import SDFGState

from gt4py_dace_xforms.analysis import boxes
from gt4py_dace_xforms.analysis.producer import Decline, data_users, interstate_reads
from gt4py_dace_xforms.analysis.races import race_problem
from gt4py_dace_xforms.analysis.symbolic import to_sympy


@dataclasses.dataclass(frozen=True)
class InPlacePlan:
    """`T` (`name`) becomes `source` (`S`): `copies` (edges `S -> T`) go, `updaters`
    (top-level MapEntry nodes) write `S` where they wrote `T`."""

    state: SDFGState
    name: str
    source: str
    source_node: dn.AccessNode
    node: dn.AccessNode
    copies: tuple
    updaters: tuple[dn.MapEntry, ...]

    def saved_elements(self) -> sympy.Expr:
        """Elements the copies no longer move (each read once and written once).

        Returns:
            the element count, a sympy expression of the SDFG's symbols.
        """
        n = sympy.Integer(0)
        for e in self.copies:
            box = boxes.from_subset(e.data.get_dst_subset(e, self.state))
            size = sympy.Integer(1)
            for lo, hi in box:
                size *= sympy.expand(hi - lo + 1)
            n += size
        return sympy.expand(n)


def _same_layout(a, b) -> bool:
    return (
        a.dtype == b.dtype
        and a.storage == b.storage
        and len(a.shape) == len(b.shape)
        and all(sympy.simplify(to_sympy(x) - to_sympy(y)) == 0 for x, y in zip(a.shape, b.shape))
        and all(
            sympy.simplify(to_sympy(x) - to_sympy(y)) == 0 for x, y in zip(a.strides, b.strides)
        )
        and all(sympy.simplify(to_sympy(x) - to_sympy(y)) == 0 for x, y in zip(a.offset, b.offset))
        and a.start_offset == b.start_offset
    )


def _point_index(subset, params: list[str]) -> Union[tuple, str]:
    """`subset` as one point `param + constant` per dimension, each parameter once: the
    tuple of (parameter, constant); else why not."""
    if subset is None:
        return "an access has no explicit subset"
    out, used = [], set()
    for b, e, _ in subset.ndrange():
        b, e = to_sympy(b), to_sympy(e)
        if sympy.expand(e - b) != 0:
            return f"an access covers more than one element ({subset})"
        free = [str(s) for s in b.free_symbols if str(s) in params]
        if len(free) != 1 or free[0] in used:
            return f"index {b} is not one Map parameter plus a constant"
        const = sympy.expand(b - next(x for x in b.free_symbols if str(x) == free[0]))
        if any(str(s) in params for s in const.free_symbols):
            return f"index {b} is not one Map parameter plus a constant"
        used.add(free[0])
        out.append((free[0], const))
    if used != set(params):
        return "a Map parameter indexes no dimension (iterations would share a point)"
    return tuple(out)


def _updater_problem(
    state: SDFGState, entry: dn.MapEntry, src: dn.AccessNode, node: dn.AccessNode
) -> Optional[str]:
    """Why the Map of `entry` is not a pointwise update of `src` into `node`, or None."""
    params = list(entry.map.params)
    exit_ = state.exit_node(entry)
    if any(e.data.data == node.data for e in state.in_edges(entry)):
        return f"'{entry.map.label}' reads the concat node"
    if any(e.dst is src for e in state.out_edges(exit_)):
        return f"'{entry.map.label}' writes the source"
    reads = [e for e in state.in_edges(entry) if e.src is src]
    writes = [e for e in state.out_edges(exit_) if e.dst is node]
    if not reads:
        return f"'{entry.map.label}' does not read the source"
    points = set()
    for outer in reads:
        for leaf in state.memlet_tree(outer).leaves():
            e = leaf
            if not isinstance(e.dst, (dn.Tasklet, dn.AccessNode)):
                return f"'{entry.map.label}' reads the source through a {type(e.dst).__name__}"
            if e.data.dynamic:
                return f"'{entry.map.label}' reads the source through a dynamic memlet"
            idx = _point_index(e.data.get_src_subset(e, state), params)
            if isinstance(idx, str):
                return f"'{entry.map.label}': {idx}"
            points.add(idx)
    for outer in writes:
        if outer.data.wcr is not None:
            return f"'{entry.map.label}' writes the concat node with a WCR"
        for leaf in state.memlet_tree(outer).leaves():
            e = leaf
            if e.data.wcr is not None or e.data.dynamic:
                return f"'{entry.map.label}' writes the concat node with a WCR or a dynamic memlet"
            idx = _point_index(e.data.get_dst_subset(e, state), params)
            if isinstance(idx, str):
                return f"'{entry.map.label}': {idx}"
            points.add(idx)
    if len(points) != 1:
        return f"'{entry.map.label}' reads the source at another point than it writes"
    return None


def _pair_problem(
    sdfg: dace.SDFG, state, source: dn.AccessNode, node: dn.AccessNode
) -> Optional[str]:
    """Why `source` (`S`) and `node` (`T`) are not two transient arrays of one layout, each
    with one top-level AccessNode, read on no interstate edge; or None."""
    s_name, t_name = source.data, node.data
    sdesc, tdesc = sdfg.arrays.get(s_name), sdfg.arrays.get(t_name)
    if s_name == t_name or sdesc is None or tdesc is None:
        return "not two arrays"
    for name, desc in ((s_name, sdesc), (t_name, tdesc)):
        if type(desc) is not dace_data.Array or not desc.transient:
            return f"'{name}' is not a transient array"
    if not _same_layout(sdesc, tdesc):
        return f"'{t_name}' and '{s_name}' differ in dtype, shape, strides, storage or offset"
    users = data_users(sdfg)
    for name, n in ((s_name, source), (t_name, node)):
        if [x for _, x in users.get(name, ())] != [n]:
            return f"'{name}' has more than one AccessNode"
    if {s_name, t_name} & interstate_reads(sdfg):
        return f"'{t_name}' or '{s_name}' is read on an interstate edge or a condition"
    scope = state.scope_dict()
    if scope[source] is not None or scope[node] is not None:
        return "an AccessNode is inside a scope"
    return None


def inplace_update_plan(
    sdfg: dace.SDFG, state: SDFGState, source: dn.AccessNode, node: dn.AccessNode
) -> Union[InPlacePlan, Decline]:
    """The plan for folding the concat node `node` (`T`) into `source` (`S`), or a Decline
    saying why not (see the module docstring). Never mutates.

    Args:
        sdfg: the SDFG.
        state: the copy's state.
        source: `S`, the copy's source AccessNode.
        node: `T`, the concat node the copy writes.

    Returns:
        the `InPlacePlan`, or a `Decline` with the reason.
    """
    s_name, t_name = source.data, node.data
    problem = _pair_problem(sdfg, state, source, node)
    if problem:
        return Decline(problem)
    scope = state.scope_dict()

    copies, updaters, pieces = [], [], []
    for e in state.in_edges(node):
        if e.src is source:
            src, dst = e.data.get_src_subset(e, state), e.data.get_dst_subset(e, state)
            if e.data.wcr is not None or src is None or dst is None:
                return Decline(f"a copy into '{t_name}' has a WCR or no explicit subsets")
            if any(to_sympy(x) != 1 for *_, x in dst.ndrange()) or boxes.as_box(
                boxes.from_subset(src)
            ) != boxes.as_box(boxes.from_subset(dst)):
                return Decline(
                    f"the copy '{s_name}[{src}] -> {t_name}[{dst}]' moves points to other indices"
                )
            copies.append(e)
            pieces.append(boxes.from_subset(dst))
            continue
        if not isinstance(e.src, dn.MapExit) or scope[state.entry_node(e.src)] is not None:
            return Decline(
                f"'{t_name}' is written by '{getattr(e.src, 'label', e.src)}', not a copy of "
                f"'{s_name}' or a top-level Map"
            )
        entry = state.entry_node(e.src)
        if entry not in updaters:
            problem = _updater_problem(state, entry, source, node)
            if problem:
                return Decline(problem)
            updaters.append(entry)
        dst = e.data.get_dst_subset(e, state)
        if dst is None:
            return Decline(f"a write of '{t_name}' has no explicit subset")
        pieces.append(boxes.from_subset(dst))
    if not copies or not updaters:
        return Decline(
            f"'{t_name}' is not written by both copies of '{s_name}' and a Map updating it"
        )
    overlap = boxes.prove_disjoint(pieces, what="the copied and updated boxes")
    if overlap:
        return Decline(overlap)
    for e in state.out_edges(source):
        if e.dst is node or (isinstance(e.dst, dn.MapEntry) and e.dst in updaters):
            continue
        return Decline(f"'{s_name}' is also read by '{getattr(e.dst, 'label', e.dst)}'")
    race = race_problem(sdfg, (state,), (s_name, t_name))
    if race:
        return Decline(race.reason)
    return InPlacePlan(state, t_name, s_name, source, node, tuple(copies), tuple(updaters))


def inplace_candidates(sdfg: dace.SDFG) -> list[tuple[SDFGState, dn.AccessNode, dn.AccessNode]]:
    """(state, S, T) for every top-level AccessNode pair joined by a copy edge, `T` also
    written by a top-level Map: what `inplace_update_plan` is asked about.

    Args:
        sdfg: the SDFG.

    Returns:
        the `(state, S, T)` triples.
    """
    out = []
    for state in sdfg.states():
        for node in state.data_nodes():
            ins = state.in_edges(node)
            if not any(isinstance(e.src, dn.MapExit) for e in ins):
                continue
            seen = []
            for e in ins:
                if isinstance(e.src, dn.AccessNode) and e.src not in seen:
                    seen.append(e.src)
                    out.append((state, e.src, node))
    return out
