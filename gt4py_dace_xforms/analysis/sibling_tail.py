"""A Map output computed from another output of the same Map: its *tail*.

gt4py's multi-output Maps often write `X = g(Y, r)` next to `Y` itself, at the same
point: the corrector's `gtir_tmp_206` is `exner_explicit_term + reference_exner`, with
`exner_explicit_term` (`gtir_tmp_67`, kept for the scan) written by the same Map. Inlining
`X` into its reader copies `X`'s whole slice (31 operations and a neighbor gather), which
the cost model rightly declines; reading `Y` back and applying the tail (one addition)
does not recompute anything. `sibling_tail_plan` finds the tail; the mutation
(`transformations/sibling_tail.py`) moves it into a Map of its own reading `Y`, so that
`X`'s readers can inline that Map like any pointwise producer (docs/sibling_tail.md).

Pure analysis. The plan holds where (all checked):

- the producer is a top-level Map with unit steps whose output `X` is written through one
  inner edge, one element per iteration, no WCR;
- another output `Y` of the Map is written through one inner edge at the same index, to
  a top-level AccessNode, from a node `v` that `X`'s value depends on (a tasklet with a
  typed connector, or the transient scalar gt4py's Map fusion leaves; the smallest tail
  is taken);
- the tail (the nodes `X` depends on that `Y` does not) are tasklets without side
  effects, whose inputs come from the Map's entry or from `v` through the very connector
  that writes `Y`, and whose outputs feed only the tail or `X`'s write;
- `Y`'s array has `v`'s dtype (reading `Y` back yields `v`'s value, bit for bit).
"""

from __future__ import annotations

import dataclasses
from typing import Optional, Union

import dace
from dace.sdfg import nodes as dn
from dace.sdfg.state import SDFGState

from gt4py_dace_xforms.analysis.producer import Decline, is_single_element, slice_nodes
from gt4py_dace_xforms.analysis.symbolic import to_sympy


@dataclasses.dataclass(frozen=True, eq=False)
class SiblingTail:
    """`X`'s tail in the Map `entry`: `tail` (its nodes), `x_edge` (the inner edge writing
    `X`), `y_edge` (the inner edge writing `Y`, from `value`), `y_node` (the AccessNode
    the Map writes `Y` into)."""

    state: SDFGState
    entry: dn.MapEntry
    x_name: str
    y_name: str
    x_edge: dace.sdfg.graph.MultiConnectorEdge
    y_edge: dace.sdfg.graph.MultiConnectorEdge
    value: dn.Node
    tail: tuple
    y_node: dn.AccessNode


def _inner_write(
    state: SDFGState, exit_: dn.MapExit, outer
) -> Optional[dace.sdfg.graph.MultiConnectorEdge]:
    if (
        outer.data.wcr is not None
        or outer.src_conn is None
        or not outer.src_conn.startswith("OUT_")
    ):
        return None
    inner = list(state.in_edges_by_connector(exit_, "IN_" + outer.src_conn[4:]))
    if len(inner) != 1 or inner[0].data.wcr is not None or inner[0].data.dynamic:
        return None
    sub = inner[0].data.get_dst_subset(inner[0], state)
    return inner[0] if sub is not None and is_single_element(sub) else None


def _index(edge, state) -> tuple:
    sub = edge.data.get_dst_subset(edge, state)
    return tuple(str(to_sympy(b)) for b, _, _ in sub.ndrange())


def _tail_problem(sdfg, state, entry, tail: set, value, y_edge, x_edge) -> Optional[str]:
    for n in tail:
        if not isinstance(n, dn.Tasklet):
            return f"the tail holds a {type(n).__name__}"
        if n.has_side_effects(sdfg):
            return f"tail node '{n.label}' has side effects"
        for e in state.in_edges(n):
            if e.src in tail or e.src is entry:
                continue
            if e.src is value and e.src_conn == y_edge.src_conn and e.data.wcr is None:
                continue
            return (
                f"the tail reads '{getattr(e.src, 'label', e.src)}', not only the sibling's value"
            )
        for e in state.out_edges(n):
            if e.dst not in tail and e is not x_edge:
                return f"tail node '{n.label}' also feeds '{getattr(e.dst, 'label', e.dst)}'"
    return None


def _value_type(sdfg: dace.SDFG, value, y_edge):
    """The type of the value `y_edge` writes from `value`: a transient scalar's dtype (gt4py's
    Map fusion leaves one) or a tasklet's out-connector type; None for anything else."""
    if isinstance(value, dn.AccessNode):
        vdesc = sdfg.arrays[value.data]
        return vdesc.dtype if isinstance(vdesc, dace.data.Scalar) and vdesc.transient else None
    return value.out_connectors.get(y_edge.src_conn) if isinstance(value, dn.Tasklet) else None


def sibling_tail_plan(
    sdfg: dace.SDFG, state: SDFGState, outer_write
) -> Union[SiblingTail, Decline]:
    """The tail of the output `outer_write` (a `MapExit -> AccessNode` edge of a top-level
    Map) over another output of the same Map, or why there is none. Never mutates.

    Args:
        sdfg: the SDFG.
        state: the Map's state.
        outer_write: the `MapExit -> AccessNode` edge of the output.

    Returns:
        the `SiblingTail`, or a `Decline` with the reason.
    """
    exit_ = outer_write.src
    if not isinstance(exit_, dn.MapExit) or not isinstance(outer_write.dst, dn.AccessNode):
        return Decline("not a Map's output")
    entry = state.entry_node(exit_)
    if state.scope_dict()[entry] is not None:
        return Decline("the Map is not at the top level")
    if any(to_sympy(s) != 1 for _, _, s in entry.map.range.ndrange()):
        return Decline("the Map has a step other than 1")
    if any(not c.startswith("IN_") for c in entry.in_connectors):
        return Decline("the Map has a dynamic range input")
    x_edge = _inner_write(state, exit_, outer_write)
    if x_edge is None or x_edge.src is entry:
        return Decline("the output is not written as one computed element per iteration")
    x_slice = set(slice_nodes(state, entry, x_edge.src))
    best: Optional[SiblingTail] = None
    reasons = []
    for other in state.out_edges(exit_):
        if (
            other is outer_write
            or other.data.data == outer_write.data.data
            or not isinstance(other.dst, dn.AccessNode)
        ):
            continue
        y_edge = _inner_write(state, exit_, other)
        if (
            y_edge is None
            or y_edge.src is entry
            or y_edge.src not in x_slice
            or y_edge.src is x_edge.src
        ):
            continue
        if _index(y_edge, state) != _index(x_edge, state):
            reasons.append(f"'{other.data.data}' is written at another index")
            continue
        value = y_edge.src
        ydesc = sdfg.arrays[other.dst.data]
        vtype = _value_type(sdfg, value, y_edge)
        if vtype is None or getattr(vtype, "type", None) != ydesc.dtype.type:
            reasons.append(f"'{other.dst.data}' does not hold the value's type")
            continue
        tail = x_slice - set(slice_nodes(state, entry, value))
        problem = _tail_problem(sdfg, state, entry, tail, value, y_edge, x_edge)
        if problem:
            reasons.append(problem)
            continue
        if best is None or len(tail) < len(best.tail):
            order = [n for n in state.nodes() if n in tail]
            best = SiblingTail(
                state,
                entry,
                outer_write.dst.data,
                other.dst.data,
                x_edge,
                y_edge,
                value,
                tuple(order),
                other.dst,
            )
    if best is None:
        return Decline(
            "; ".join(reasons) if reasons else "no other output of the Map is part of its value"
        )
    return best
