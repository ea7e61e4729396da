"""Unordered conflicting accesses: the races an input SDFG already has.

Within a state, DaCe orders two accesses to the same data only through a path between
their AccessNodes. gt4py 1.2.3 can emit a state where an array is written through one
AccessNode and written or read through another with no path between them: a program that
writes `t_out`, reads it shifted, then overwrites it (docs/races.md) lowers to two writes
of `t_out` in one state, so the order of the writes, and of the read in between, is
whatever order the code generator picks. The stock backend's result is then undefined
(here: wrong against numpy), and a rewrite that moves those accesses may pick another
order and another wrong result.

`unordered_accesses()` finds them: two top-level AccessNodes of one array in one state,
at least one written, with no path between them, and a written region of one that may
overlap the accessed region of the other (overlap is assumed where the subsets cannot be
told apart). `race_problem()` is what the rewrites ask: they decline where they would
touch such an array, or change a state that has one at all (any change there can change
the order in which the code generator emits the unordered accesses: inlining an
unrelated read into a Map of that state did, in issue 32's program). Pure: never mutates.
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import Iterable, Optional

import dace
import networkx as nx
from dace import subsets as dace_sbs
from dace.sdfg import nodes as dn


@dataclasses.dataclass(frozen=True)
class UnorderedAccess:
    """Two AccessNodes of `data` in `state` with no path between them; `kind` is
    "write/write" or "write/read"."""

    state: str
    data: str
    kind: str
    block: object = dataclasses.field(default=None, compare=False, repr=False)  # the SDFGState

    @property
    def reason(self) -> str:
        """The decline reason a rewrite that meets this access gives."""
        return (
            f"'{self.data}' has an unordered {self.kind} in state '{self.state}' "
            f"(gt4py's SDFG leaves their order undefined, a rewrite there could change it; docs/races.md)"
        )


def _regions(state, node: dn.AccessNode, desc) -> tuple[list, list]:
    """(written, read) subsets of `node`; the whole array where a memlet names none."""
    whole = dace_sbs.Range.from_array(desc)
    written, read = [], []
    for e in state.in_edges(node):
        if not e.data.is_empty():
            written.append(e.data.get_dst_subset(e, state) or whole)
    for e in state.out_edges(node):
        if not e.data.is_empty():
            read.append(e.data.get_src_subset(e, state) or whole)
    return written, read


def _may_overlap(a: Iterable, b: Iterable) -> bool:
    for x, y in itertools.product(a, b):
        try:
            if dace_sbs.intersects(x, y) is not False:
                return True
        except Exception:  # noqa: BLE001  # subsets the prover cannot compare: assume overlap
            return True
    return False


def unordered_accesses(sdfg: dace.SDFG) -> list[UnorderedAccess]:
    """Every unordered conflicting access to an array of `sdfg`, in the states of its own
    control-flow tree (not inside nested SDFGs), one entry per (state, array), in state and
    name order.

    Args:
        sdfg: the SDFG.

    Returns:
        the accesses.
    """
    found: list[UnorderedAccess] = []
    for state in sdfg.states():
        by_data: dict[str, list[dn.AccessNode]] = {}
        for node in state.data_nodes():
            by_data.setdefault(node.data, []).append(node)
        scope = None
        for data in sorted(by_data):
            nodes, desc = by_data[data], sdfg.arrays.get(data)
            if len(nodes) < 2 or desc is None or isinstance(desc, dace.data.Scalar):
                continue
            if not any(state.in_degree(n) > 0 for n in nodes):
                continue  # reads only
            scope = scope or state.scope_dict()
            kind = _unordered_pair(state, [n for n in nodes if scope[n] is None], desc)
            if kind:
                found.append(UnorderedAccess(state.label, data, kind, state))
    return found


def _unordered_pair(state, nodes, desc) -> Optional[str]:
    regions = {n: _regions(state, n, desc) for n in nodes}
    reach = {n: nx.descendants(state.nx, n) for n in nodes}
    for u, v in itertools.combinations(nodes, 2):
        if v in reach[u] or u in reach[v]:
            continue
        (wu, ru), (wv, rv) = regions[u], regions[v]
        if _may_overlap(wu, wv):
            return "write/write"
        if _may_overlap(wu, rv) or _may_overlap(wv, ru):
            return "write/read"
    return None


def race_problem(
    sdfg: dace.SDFG, states: Iterable = (), names: Iterable[str] = ()
) -> Optional[UnorderedAccess]:
    """The first unordered conflicting access that a rewrite changing `states` and
    accessing the arrays `names` would meet: one in any of `states`, or to any of
    `names` anywhere; None if there is none.

    Args:
        sdfg: the SDFG.
        states: the states the rewrite changes.
        names: the arrays the rewrite accesses.

    Returns:
        the first such access, or None.
    """
    states, names = list(states), set(names)
    for race in unordered_accesses(sdfg):
        if race.data in names or any(race.block is s for s in states):
            return race
    return None
