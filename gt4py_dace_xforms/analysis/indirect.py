"""Reads of an intermediate at a computed index: the deref tasklets of neighbor tables.

gt4py lowers `t(E2C[1])` inside a consumer Map to a tasklet that receives the whole
intermediate and one neighbor index, and indexes the array itself:

    __tlet_index_Cell = gt_conn_E2C[i_Edge, 1]           (a single-element read)
    __tlet_val = __tlet_field[(__tlet_index_Cell - 0), ((- vertical_start) + i_K)]

The element read is known only at run time, so coverage cannot be proven per read as for
`param + c` indices. It is proven once for all: the producer writes every element of the
intermediate (`covers_whole_array`). A read in bounds then hits an element the producer
computes, at the producer iteration `element - write offset`, which lies inside the
producer's range; a read out of bounds is out of bounds in the untransformed program too.

Everything here is read-only and returns frozen results or a `Decline`.
"""

from __future__ import annotations

import ast
import dataclasses
from typing import Optional, Union

import dace
import sympy
from dace.sdfg import nodes as dn
from dace.sdfg.state import SDFGState

from gt4py_dace_xforms.analysis.producer import Decline, ProducerSlice, is_single_element
from gt4py_dace_xforms.analysis.symbolic import prove_nonnegative_given, prove_zero, to_sympy


@dataclasses.dataclass(frozen=True, eq=False)
class IndirectRead:
    """One deref tasklet reading one element of the intermediate at a computed index.

    Attributes:
        edge: the consumer-scope edge carrying the intermediate into the tasklet.
        tasklet: the deref tasklet; the rewrite replaces it by a producer copy.
        element: per dimension, the element read as a sympy expression over the
            tasklet's index connectors (as symbols) and the symbols in scope.
        index_conns: the tasklet's in-connectors the index is computed from.
        out_conn: the tasklet's only output connector (the value read).
    """

    edge: dace.sdfg.graph.MultiConnectorEdge
    tasklet: dn.Tasklet
    element: tuple[sympy.Expr, ...]
    index_conns: tuple[str, ...]
    out_conn: str
    #: the Maps nested in the consumer that the read passes, outermost first (a
    #: neighbor reduction's Map over the local dimension); the copy goes inside them.
    inner_maps: tuple[dn.MapEntry, ...] = ()

    @property
    def key(self) -> tuple[str, ...]:
        """The index as the report shows it (one "shift" entry per read)."""
        return tuple(f"[{e}]" for e in self.element)


def _deref_indices(tasklet: dn.Tasklet, field: str, out_conn: str) -> Union[list, Decline]:
    """The index expressions of a tasklet whose code is exactly `out_conn = field[...]`
    (one per indexed dimension), or a Decline where its code is anything else."""
    try:
        body = ast.parse(tasklet.code.as_string).body
    except SyntaxError:
        return Decline("indirect read: the tasklet's code does not parse")
    if (
        len(body) != 1
        or not isinstance(body[0], ast.Assign)
        or len(body[0].targets) != 1
        or not isinstance(body[0].targets[0], ast.Name)
        or body[0].targets[0].id != out_conn
        or not isinstance(body[0].value, ast.Subscript)
        or not isinstance(body[0].value.value, ast.Name)
        or body[0].value.value.id != field
    ):
        return Decline("indirect read: the tasklet does more than `out = field[index]`")
    sub = body[0].value.slice
    indices = list(sub.elts) if isinstance(sub, ast.Tuple) else [sub]
    return indices


def match_indirect_read(state: SDFGState, edge, ndim: int) -> Union[IndirectRead, Decline]:
    """`edge` (inside the consumer, carrying a range of the intermediate) as an
    `IndirectRead`, or why it is none.

    The destination must be a Python tasklet whose code is exactly
    `out = field[i_0, ..., i_{ndim-1}]`, where `field` is the connector of `edge`, and
    whose other inputs are single-element reads used only in the index expressions.

    Args:
        state: the consumer's state.
        edge: the edge into the tasklet.
        ndim: the intermediate's rank.

    Returns:
        the `IndirectRead`, or a `Decline` with the reason.
    """
    tasklet = edge.dst
    if not isinstance(tasklet, dn.Tasklet) or tasklet.language.name != "Python":
        return Decline("consumer reads more than one element of the intermediate at once")
    field = edge.dst_conn
    if len(tasklet.out_connectors) != 1:
        return Decline("indirect read: the deref tasklet has several outputs")
    (out_conn,) = tasklet.out_connectors
    indices = _deref_indices(tasklet, field, out_conn)
    if isinstance(indices, Decline):
        return indices
    sub_read = edge.data.get_src_subset(edge, state)
    if sub_read is None or len(sub_read) != ndim:
        return Decline("indirect read: the field memlet does not name the intermediate's elements")
    # DaCe hands a tasklet the range with its single-element dimensions squeezed out:
    # `t[0:N, k]` arrives one-dimensional and is indexed `field[idx]`.
    ranged = [
        d
        for d, (b, e, _) in enumerate(sub_read.ndrange())
        if not prove_zero(to_sympy(e) - to_sympy(b))
    ]
    if len(indices) != len(ranged):
        return Decline("indirect read: index and intermediate have different dimensionality")
    others = {e.dst_conn: e for e in state.in_edges(tasklet) if e is not edge}
    if field in others:
        return Decline("indirect read: the field connector is fed twice")
    used: set[str] = set()
    for idx in indices:
        names = {n.id for n in ast.walk(idx) if isinstance(n, ast.Name)}
        if field in names or any(
            isinstance(n, (ast.Subscript, ast.Call, ast.Attribute)) for n in ast.walk(idx)
        ):
            return Decline("indirect read: an index reads data itself")
        used |= names & set(others)
    if set(others) != used:
        return Decline("indirect read: the tasklet has inputs besides the field and its index")
    for conn, e in others.items():
        if e.data.wcr is not None or e.data.dynamic or e.data.is_empty():
            return Decline(
                f"indirect read: index input '{conn}' is not a plain single-element read"
            )
        if not is_single_element(e.data.get_src_subset(e, state)):
            return Decline(f"indirect read: index input '{conn}' is not a single element")
    try:
        offsets = dict(zip(ranged, (to_sympy(ast.unparse(idx)) for idx in indices)))
        element = tuple(
            sympy.expand(to_sympy(b) + offsets.get(d, 0))
            for d, (b, _, _) in enumerate(sub_read.ndrange())
        )
    except Exception:  # noqa: BLE001  # an index sympy cannot read is not ours to rewrite
        return Decline("indirect read: an index expression is not symbolic")
    return IndirectRead(edge, tasklet, element, tuple(sorted(used)), out_conn)


def reads_through_inner_maps(
    state: SDFGState, edge, ndim: int
) -> Union[list[IndirectRead], Decline]:
    """The indirect reads behind `edge`, an edge from the consumer into a Map nested in
    it: every edge leaving that Map's connector must end in a deref tasklet (possibly
    through further nested Maps).

    Args:
        state: the consumer's state.
        edge: the edge into the nested Map.
        ndim: the intermediate's rank.

    Returns:
        the indirect reads, or a `Decline` with the reason.
    """
    found: list[IndirectRead] = []
    work: list[tuple[dace.sdfg.graph.MultiConnectorEdge, tuple[dn.MapEntry, ...]]] = [(edge, ())]
    while work:
        e, chain = work.pop()
        if not isinstance(e.dst, dn.MapEntry):
            if is_single_element(e.data.get_src_subset(e, state)):
                return Decline(
                    "consumer reads the intermediate inside a nested Map (element reads there are not inlined)"
                )
            read = match_indirect_read(state, e, ndim)
            if isinstance(read, Decline):
                return read
            found.append(dataclasses.replace(read, inner_maps=chain))
            continue
        if e.dst_conn is None or not e.dst_conn.startswith("IN_"):
            return Decline(
                "consumer reads the intermediate inside a nested Map through a dynamic connector"
            )
        inner = list(state.out_edges_by_connector(e.dst, "OUT_" + e.dst_conn[3:]))
        if not inner:
            return Decline("consumer reads the intermediate inside a nested Map (range read)")
        work.extend((ie, (*chain, e.dst)) for ie in inner)
    return found


def covers_whole_array(
    prod: ProducerSlice, shape, facts=(), what: str = "indirect read"
) -> Optional[str]:
    """None if the producer provably writes every element of an array of `shape` at
    iteration `element - write offset` (each dimension written as `param + c`);
    otherwise why not (prefixed with `what`).

    Args:
        prod: the producer's slice.
        shape: the array's shape.
        facts: expressions known to be >= 0 (what the SDFG's symbols are known to satisfy).
        what: the reason's prefix.

    Returns:
        None where proven, else the reason.
    """
    if len(prod.write_terms) != len(shape):
        return f"{what}: producer write and intermediate have different dimensionality"
    for dim, (w, n) in enumerate(zip(prod.write_terms, shape)):
        if w.param is None:
            return f"{what}: the producer writes a fixed index in dimension {dim}"
        first, last = (to_sympy(x) for x in prod.range_of(w.param))
        # first + c <= 0 and last + c >= n - 1: every index 0..n-1 is written.
        for expr in (-(first + w.offset), last + w.offset - (to_sympy(n) - 1)):
            if not prove_nonnegative_given(expr, facts):
                return f"{what}: the producer cannot be proven to write all of dimension {dim} (size {n})"
    return None
