"""Vertical windows: when a consumer's shifted reads can share one evaluation per level.

A consumer Map over (horizontal..., K) that reads an intermediate `T` at `k + d` for the
offsets `d` in `[dmin, dmax]` re-evaluates the producer once per offset when inlined
(`InlineFuser`). Swept in K instead, one column per horizontal point, each level of `T`
is evaluated once, at `k + dmax`, and the last `dmax - dmin + 1` values are kept in a
window of registers (GridTools' k-caches do the same; docs/vertical_window.md).

`analyse_window(sdfg, cand)` starts from an `InlineCandidate` (the inliner's proof that
the producer can be evaluated at every element read: single Map, concat node, selected
writers) and adds what the sweep needs; each step returns its fact or a `Decline`:

- `_element_reads_only`: the reads are plain elements (no indirect or nested read), and
  the consumer is the intermediate's last reader (the decline names what else reads it,
  `other_readers`), unless it is one of a window group: `window_group` lists the readers
  when every one is a top-level Map of one state (gt4py splits a consumer at a
  decomposed rank's halo: one Map over the local cells, one over the halo), each swept
  in its own window, the last one removing the intermediate;
- `_swept_dimension`: the groups differ in exactly one dimension of `T`, whose index is
  `kp + c + d` with one consumer parameter `kp` and integer distances `d`, all of
  `0..n-1` present (the window then only holds levels some read needs, which the
  inliner's coverage proof covers), `2 <= n <= max_width`; every other dimension is the
  same in every group and free of `kp`;
- `_consumer_sweepable`: the consumer has another parameter to keep as a Map, steps of 1,
  no dynamic inputs, no WCR on its outputs, no nested Map in its body, and every output
  written at `kp + c` in one dimension (a column per horizontal point, as gt4py's scans
  write theirs).

Pure: never mutates.
"""

from __future__ import annotations

import dataclasses
from typing import Optional, Union

import dace
import sympy
from dace.sdfg import nodes as dn

from gt4py_dace_xforms.analysis.candidate import InlineCandidate, ReadGroup
from gt4py_dace_xforms.analysis.producer import Decline
from gt4py_dace_xforms.analysis.symbolic import UnsupportedIndex, free_names, split_index, to_sympy


@dataclasses.dataclass(frozen=True, eq=False)
class OutputColumn:
    """An output the consumer writes one column of per horizontal point: every write is
    `data[fixed..., kp + offset]` in dimension `dim`."""

    data: str
    dim: int
    offset: sympy.Expr
    index: tuple[sympy.Expr, ...]  # the write's index, every dimension


@dataclasses.dataclass(frozen=True, eq=False)
class WindowPlan:
    """How to sweep `cand.consumer` in K with a window of `width` values of the intermediate.

    Attributes:
        cand: the inliner's candidate (producer evaluation, groups, cleanup).
        kparam: the consumer parameter swept sequentially.
        kdim: the dimension of the intermediate it indexes.
        k_first, k_last: the consumer's range of `kparam` (inclusive).
        slots: per read group, its window slot (`d - dmin`).
        top: the group read at the largest distance: the element evaluated per level.
        width: `dmax - dmin + 1`.
        outputs: the columns the consumer writes.
    """

    cand: InlineCandidate
    kparam: str
    kdim: int
    k_first: sympy.Expr
    k_last: sympy.Expr
    slots: tuple[tuple[ReadGroup, int], ...]
    top: ReadGroup
    width: int
    outputs: tuple[OutputColumn, ...]

    def slot_of_edge(self, edge) -> int:
        """The window slot (level offset) the read group holding `edge` reads.

        Args:
            edge: a read edge of the plan.

        Returns:
            the slot.
        """
        return next(slot for g, slot in self.slots if any(e is edge for e in g.edges))

    @property
    def offsets(self) -> tuple[int, ...]:
        """The window's level offsets, in ascending order."""
        return tuple(sorted(slot for _, slot in self.slots))


def analyse_window(
    sdfg: dace.SDFG, cand: InlineCandidate, max_width: int = 8, sole_reader: bool = True
) -> Union[WindowPlan, Decline]:
    """The plan for sweeping `cand`'s consumer in K, or why not (see the module docstring).
    `sole_reader=False`: the consumer need not be the last reader (one of a window group,
    `window_group`, whose last member removes the intermediate).

    Args:
        sdfg: the SDFG.
        cand: the inline candidate.
        max_width: the most levels the window may hold.
        sole_reader: require the consumer to be the intermediate's last reader.

    Returns:
        the `WindowPlan`, or a `Decline` with the reason.
    """
    try:
        reason = _element_reads_only(cand, sole_reader)
        if reason:
            return Decline(reason)
        swept = _swept_dimension(cand, max_width)
        if isinstance(swept, str):
            return Decline(swept)
        kparam, kdim, slots = swept
        outputs = _consumer_sweepable(sdfg, cand, kparam)
        if isinstance(outputs, str):
            return Decline(outputs)
    except Exception as err:  # noqa: BLE001  # a matcher must decline, never abort compilation
        return Decline(f"window: analysis failed: {type(err).__name__}: {err}")
    cmap = cand.consumer.map
    b, e, _ = cmap.range.ndrange()[cmap.params.index(kparam)]
    top = max(slots, key=lambda gs: gs[1])[0]
    return WindowPlan(
        cand,
        kparam,
        kdim,
        to_sympy(b),
        to_sympy(e),
        tuple(slots),
        top,
        max(s for _, s in slots) + 1,
        tuple(outputs),
    )


def _element_reads_only(cand: InlineCandidate, sole_reader: bool = True) -> Optional[str]:
    if cand.indirect or cand.nested:
        return "window: the consumer reads the intermediate at a computed index or inside a nested SDFG"
    if sole_reader and not cand.removes_intermediate:
        return f"window: other readers keep the intermediate: {', '.join(other_readers(cand))}"
    if len(cand.groups) < 2:
        return "window: one element read per iteration, nothing to share between levels"
    return None


def other_readers(cand: InlineCandidate) -> list[str]:
    """What else reads `cand`'s intermediate, by kind (a sweep shared by all readers would
    have to run them all: the census counts which kinds keep windows out).

    Args:
        cand: the inline candidate.

    Returns:
        the kinds of the other readers.
    """
    sdfg, name = cand.state.sdfg, cand.intermediate.data
    kinds = set()
    for st in sdfg.states():
        for node in st.data_nodes():
            if node.data != name:
                continue
            for e in st.out_edges(node):
                if e.dst is cand.consumer:
                    continue
                if isinstance(e.dst, dn.AccessNode):
                    out = sdfg.arrays[e.dst.data]
                    kinds.add(
                        "a copy into a transient"
                        if out.transient
                        else "a copy into a program output"
                    )
                elif isinstance(e.dst, dn.MapEntry):
                    kinds.add(
                        "a Map in the same state" if st is cand.state else "a Map in another state"
                    )
                else:
                    kinds.add(f"a {type(e.dst).__name__}")
    return sorted(kinds) or ["readers in other states"]


def _swept_dimension(cand: InlineCandidate, max_width: int):
    """(kparam, kdim, [(group, slot)]) or why not."""
    cparams = list(cand.consumer.map.params)
    indices = [tuple(sympy.expand(x) for x in g.index) for g in cand.groups]
    ndim = len(indices[0])
    differing = [d for d in range(ndim) if len({str(ix[d]) for ix in indices}) > 1]
    if len(differing) != 1:
        return f"window: the reads differ in dimensions {differing}, not in one"
    kdim = differing[0]
    try:
        terms = [split_index(ix[kdim], cparams) for ix in indices]
    except UnsupportedIndex as err:
        return f"window: {err}"
    params = {t.param for t in terms}
    if len(params) != 1 or None in params:
        return "window: the reads' swept index does not use one consumer parameter"
    kparam = params.pop()
    distances = []
    for t in terms:
        d = sympy.expand(t.offset - terms[0].offset)
        if not d.is_Integer:
            return f"window: the distance '{d}' between two reads is not a constant"
        distances.append(int(d))
    low = min(distances)
    slots = [d - low for d in distances]
    width = max(slots) + 1
    if sorted(slots) != list(range(width)):
        return f"window: the offsets {sorted(slots)} leave a gap (levels no read needs)"
    if width > max_width:
        return f"window: {width} levels exceed the window's bound max_width={max_width}"
    for d in range(ndim):
        if d != kdim and kparam in free_names(indices[0][d]):
            return f"window: dimension {d} of the reads also uses '{kparam}'"
    return kparam, kdim, list(zip(cand.groups, slots))


def _consumer_sweepable(sdfg: dace.SDFG, cand: InlineCandidate, kparam: str):
    """The consumer's output columns, or why it cannot be swept."""
    state, entry = cand.state, cand.consumer
    cmap = entry.map
    if len(cmap.params) < 2:
        return "window: the consumer has no dimension to keep parallel besides the swept one"
    if any(s != 1 for _, _, s in cmap.range.ndrange()):
        return "window: the consumer Map has a step other than 1"
    if any(not c.startswith("IN_") for c in entry.in_connectors):
        return "window: the consumer Map has dynamic inputs"
    exit_ = state.exit_node(entry)
    scope = state.scope_dict()
    if any(isinstance(n, dn.EntryNode) and scope[n] is entry for n in state.nodes()):
        return "window: the consumer's body holds a nested Map"
    outputs: dict[str, OutputColumn] = {}
    for e in state.in_edges(exit_):
        if e.data.is_empty():
            continue
        if e.data.wcr is not None:
            return "window: the consumer writes with a WCR"
        sub = e.data.get_dst_subset(e, state) or e.data.subset
        try:
            terms = [split_index(b, cmap.params) for b, _, _ in sub.ndrange()]
        except UnsupportedIndex as err:
            return f"window: an output index is unsupported: {err}"
        if any(b != en for b, en, _ in sub.ndrange()):
            return f"window: the consumer writes more than one element of '{e.data.data}' per iteration"
        dims = [d for d, t in enumerate(terms) if t.param == kparam]
        if len(dims) != 1:
            return f"window: '{e.data.data}' is not written at '{kparam} + c' in one dimension"
        col = OutputColumn(
            e.data.data,
            dims[0],
            sympy.expand(terms[dims[0]].offset),
            tuple(sympy.expand(t.expr()) for t in terms),
        )
        seen = outputs.setdefault(col.data, col)
        if seen.dim != col.dim or any(
            sympy.expand(a - b) != 0 for a, b in zip(seen.index, col.index)
        ):
            return f"window: '{col.data}' is written at two different levels per iteration"
    if not outputs:
        return "window: the consumer writes nothing"
    return list(outputs.values())


def window_group(sdfg: dace.SDFG, name: str) -> Union[tuple[dace.SDFGState, list], str]:
    """The state and the top-level consumer Maps (each once, in the state's order) of every
    read of `name`, where all reads of it are by such Maps of one state (then a window in
    each reader removes it); else why not. Pure.

    Args:
        sdfg: the SDFG.
        name: the intermediate's name.

    Returns:
        `(state, readers)`, or the reason.
    """
    state, consumers = None, []
    for st in sdfg.states():
        scope = None
        for node in st.data_nodes():
            if node.data != name:
                continue
            for e in st.out_edges(node):
                scope = scope or st.scope_dict()
                if not isinstance(e.dst, dn.MapEntry) or scope[e.dst] is not None:
                    return f"window group: '{name}' is read by a {type(e.dst).__name__} that is no top-level Map"
                if state is not None and st is not state:
                    return f"window group: '{name}' is read in several states"
                state = st
                if e.dst not in consumers:
                    consumers.append(e.dst)
    if state is None or len(consumers) < 2:
        return f"window group: '{name}' has fewer than two Map readers"
    return state, consumers
