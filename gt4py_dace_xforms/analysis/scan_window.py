"""A scan's window: copies of one producer that a scan's loop evaluates at consecutive
levels, `f(k + d)` for d = a..b, in one state of its body (a scan reading a computed column
at several levels: `damped(x_ic(K + 1), x_ic)`; docs/scans.md).

Each iteration evaluated every level it read, so each level was evaluated b - a + 1 times.
Only the level the sweep reaches first is new: the others were evaluated by an earlier
iteration, so they can be carried from it in scalars (GridTools' k-caches). The plan names
the copy that stays (the lead: `k + b` in a forward loop, `k + a` in a backward one) and
the ones whose values are carried; `transformations/scan_window.py` moves the latter before
the loop, bound to its first level, and shifts the window after their reads.

Pure analysis: `scan_window_plan` returns a frozen plan or a `Decline`. Conditions:

- the copies are nested SDFG nodes in one state whose parent is a `LoopRegion` with a loop
  variable `v`, an init assignment and a stride of +1 or -1, whose condition provably holds
  at the init (the carried levels are evaluated before the loop, for its first level), and
  no interstate edge inside the loop assigns `v`;
- their symbol mappings have the same names, and copy j's is copy 0's with `v` replaced by
  `v + d_j` for an integer `d_j` (so each evaluates the same function one level apart; the
  caller passes copies of one template); the d_j are distinct and consecutive. Symbols of
  the scan's nested SDFG are compared through the values its node maps them to (gt4py
  passes a column once per level read, each connector with its own origin symbols, which
  the node maps to the same range);
- each copy's inputs come from AccessNodes of data that nothing in the nested SDFG writes
  (so a value computed at an earlier iteration is the one this iteration would compute);
  each copy's output is one scalar AccessNode that nothing else writes.
"""

from __future__ import annotations

import dataclasses
from typing import Sequence, Union, cast

import dace
import sympy
from dace.sdfg import nodes as dn
from dace.sdfg.state import LoopRegion
from dace.transformation.passes.analysis import loop_analysis

from gt4py_dace_xforms.analysis.producer import Decline
from gt4py_dace_xforms.analysis.symbolic import to_sympy


@dataclasses.dataclass(frozen=True)
class WindowCopy:
    """One copy: its node, the scalar AccessNode it writes, its level relative to copy 0."""

    node: dn.NestedSDFG
    out: dn.AccessNode
    delta: int


@dataclasses.dataclass(frozen=True)
class ScanWindowPlan:
    """The lead copy (evaluated every iteration) and the carried ones; `source[j]` is the
    copy whose value (this iteration) carried copy j holds in the next one."""

    loop: LoopRegion
    state: dace.SDFGState
    variable: str
    init: sympy.Expr
    stride: int
    lead: WindowCopy
    carried: tuple[WindowCopy, ...]

    def source(self, c: WindowCopy) -> WindowCopy:
        """The copy whose value `c` takes one iteration later: the one `stride` levels further
        along.

        Args:
            c: a carried copy of the window.

        Returns:
            the copy it takes its value from.
        """
        want = c.delta + self.stride
        return next(x for x in (self.lead, *self.carried) if x.delta == want)


def scan_window_plan(
    inner: dace.SDFG, state: dace.SDFGState, copies: Sequence[dn.NestedSDFG]
) -> Union[ScanWindowPlan, Decline]:
    """The window of `copies` (nested SDFG nodes of one template in `state` of `inner`), or
    why there is none (see the module docstring).

    Args:
        inner: the scan's nested SDFG.
        state: the state of `copies`.
        copies: the copies' nested SDFG nodes.

    Returns:
        the `ScanWindowPlan`, or a `Decline` with the reason.
    """
    if len(copies) < 2:
        return Decline("scan window: fewer than two copies")
    loop = state.parent_graph
    problem = _loop_problem(loop)
    if problem:
        return Decline(f"scan window: {problem}")
    var = loop.loop_variable
    init, stride = loop_analysis.get_init_assignment(loop), loop_analysis.get_loop_stride(loop)
    v = dace.symbolic.symbol(var)
    outer = _outer(inner, var)
    first = {k: _resolve(x, outer) for k, x in copies[0].symbol_mapping.items()}
    if not any(v in x.free_symbols for x in first.values()):
        return Decline(f"scan window: the copies do not depend on '{var}'")
    found: list[WindowCopy] = []
    for node in copies:
        mapping = {k: _resolve(x, outer) for k, x in node.symbol_mapping.items()}
        if set(mapping) != set(first):
            return Decline("scan window: the copies map different symbols")
        delta = _delta(first, mapping, v)
        if delta is None:
            return Decline(
                f"scan window: copy {node.label} is not copy 0 at a constant level offset"
            )
        out = _output(state, node)
        if out is None:
            return Decline(f"scan window: copy {node.label} does not write one scalar of its own")
        found.append(WindowCopy(node, out, delta))
    deltas = sorted(c.delta for c in found)
    if deltas != list(range(deltas[0], deltas[0] + len(deltas))):
        return Decline(f"scan window: levels {deltas} are not distinct and consecutive")
    written = {n.data for st in inner.all_states() for n in st.data_nodes() if st.in_degree(n) > 0}
    for c in found:
        for e in state.in_edges(c.node):
            if not isinstance(e.src, dn.AccessNode) or e.src.data in written:
                return Decline(
                    f"scan window: input '{e.data.data}' of {c.node.label} is written in the scan"
                )
        if (
            sum(
                1
                for st in inner.all_states()
                for n in st.data_nodes()
                if n.data == c.out.data and st.in_degree(n) > 0
            )
            != 1
        ):
            return Decline(f"scan window: '{c.out.data}' is written elsewhere")
    stride = int(to_sympy(stride))
    lead = max(found, key=lambda c: c.delta * stride)
    carried = tuple(sorted((c for c in found if c is not lead), key=lambda c: c.delta * stride))
    return ScanWindowPlan(loop, state, var, to_sympy(init), stride, lead, carried)


def _loop_problem(loop) -> str | None:
    """Why `loop` (a state's parent) cannot carry a window, or None."""
    if not isinstance(loop, LoopRegion) or not loop.loop_variable:
        return "the copies' state is not directly in a loop"
    var = loop.loop_variable
    init, stride = loop_analysis.get_init_assignment(loop), loop_analysis.get_loop_stride(loop)
    if init is None or stride is None or to_sympy(stride) not in (1, -1):
        return f"loop '{loop.label}' has no init assignment or a stride other than +-1"
    try:
        runs = dace.symbolic.pystr_to_symbolic(loop.loop_condition.as_string).subs(
            dace.symbolic.symbol(var), init
        )
    except Exception:  # noqa: BLE001  # a condition sympy cannot read: no proof
        runs = None
    if runs is not sympy.true:
        return (
            f"loop '{loop.label}' cannot be proven to run its first level (the carried levels are evaluated "
            "before it)"
        )
    for e in loop.all_interstate_edges(recursive=True):
        if var in e.data.assignments:
            return f"an interstate edge in the loop assigns '{var}'"
    return None


def _outer(inner: dace.SDFG, var: str) -> dict:
    """The parent node's mapping of `inner`'s symbols, where it does not involve `var`."""
    node = inner.parent_nsdfg_node
    if node is None:
        return {}
    out = {}
    for name, x in node.symbol_mapping.items():
        if name != var and var not in {str(f) for f in to_sympy(x).free_symbols}:
            out[dace.symbolic.symbol(name)] = to_sympy(x)
    return out


def _resolve(x, outer: dict):
    e = to_sympy(x)
    return sympy.expand(e.xreplace({f: outer[f] for f in e.free_symbols if f in outer}))


def _delta(first: dict, mapping: dict, v) -> int | None:
    """The integer d with mapping == first after v -> v + d, or None."""
    delta = None
    for name, x0 in first.items():
        a, b = x0, mapping[name]
        diff = sympy.expand(b - a)
        if diff == 0:
            continue
        if not diff.is_Integer or v not in a.free_symbols:
            return None
        d = int(diff)
        if delta is None:
            delta = d
        if sympy.expand(a.subs(v, v + delta) - b) != 0:
            return None
    return 0 if delta is None else delta


def _output(state: dace.SDFGState, node: dn.NestedSDFG):
    outs = state.out_edges(node)
    if len(outs) != 1 or not isinstance(outs[0].dst, dn.AccessNode):
        return None
    out = outs[0].dst
    if state.in_degree(out) != 1 or not isinstance(out.desc(state.sdfg), dace.data.Scalar):
        return None
    return out


def windowed_copies(cand) -> int:
    """The copies `cand` (an `InlineCandidate`) evaluates per point once the nested reads a
    scan's loop makes at consecutive levels of one state are windowed: each such set counts
    once (the levels differ by consecutive integers in the loop variable's dimension of
    the element read, in a loop of stride +-1); every other read group counts as itself.

    Args:
        cand: the inline candidate.

    Returns:
        the copy count.
    """
    count = len(cand.groups) + len(cand.indirect)
    buckets: dict[tuple[int, int], list] = {}
    for read in cand.nested:
        for g in read.groups:
            loop = g.state.parent_graph
            outer = (
                _outer(read.node.sdfg, loop.loop_variable) if isinstance(loop, LoopRegion) else {}
            )
            element = tuple(
                _resolve(to_sympy(i) + to_sympy(o), outer) for i, o in zip(g.index, read.offset)
            )
            buckets.setdefault((id(read.node), id(g.state)), []).append((g.state, element))
    for members in buckets.values():
        count += 1 if _consecutive_levels(members) else len(members)
    return count


def _consecutive_levels(members: list) -> bool:
    if len(members) < 2:
        return False
    loop = members[0][0].parent_graph
    if _loop_problem(loop):
        return False
    v = dace.symbolic.symbol(loop.loop_variable)
    base = members[0][1]
    deltas, dim = [], None
    for _, element in members:
        diff = [sympy.expand(a - b) for a, b in zip(element, base)]
        if not all(d.is_Integer for d in diff):
            return False
        moved = [d for d, x in enumerate(diff) if x != 0]
        if len(moved) > 1 or (moved and dim is not None and moved[0] != dim):
            return False
        if moved:
            dim = moved[0]
        deltas.append(int(diff[cast(int, dim)]) if moved else 0)  # moved: dim is set
    if dim is None or v not in base[dim].free_symbols:
        return False
    deltas.sort()
    return deltas == list(range(deltas[0], deltas[0] + len(deltas)))
