"""Analysis of an intermediate written in the branches of one `if`/`else` (selected writers).

A program-level `if` on a scalar argument (`tmp = a if flag else b` in a field operator)
is lowered by gt4py to a `ConditionalBlock`: every branch writes the whole intermediate
in its own state, by a Map, a copy or a concat, and the readers sit in later states.
Exactly one branch runs, so an element read later is the value of the branch whose
condition held: the consumer can re-evaluate that branch's writer at the element, under
the same condition. `analyse_selected_writers()` describes the branches and checks the
shape; it never mutates the SDFG. The consumer side (coverage of the reads, nothing
changing in between) is checked per branch by `analysis.candidate`.
"""

from __future__ import annotations

import dataclasses
from typing import Optional, Union, cast

import dace
from dace.properties import CodeBlock
from dace.sdfg import nodes as dn
from dace.sdfg.state import ConditionalBlock, SDFGState

from gt4py_dace_xforms.analysis.concat import ConcatAnalysis, analyse_concat
from gt4py_dace_xforms.analysis.producer import Decline


@dataclasses.dataclass(frozen=True, eq=False)
class SelectedBranch:
    """One branch of the `ConditionalBlock` and the writer of the intermediate in it.

    Attributes:
        condition: the branch's condition; `None` for the `else` branch.
        state: the state in the branch that writes the intermediate.
        node: the AccessNode written there.
        writers: its writers, described as concat branches (one for a Map or a copy);
            `split_dims` is set once the consumer's reads are known.
    """

    condition: Optional[CodeBlock]
    state: SDFGState
    node: dn.AccessNode
    writers: ConcatAnalysis


@dataclasses.dataclass(frozen=True, eq=False)
class SelectedWriters:
    """The writers of one array as the branches of one `if`/`else` (`analyse_selected_writers`):
    the block and one branch per writer."""

    block: ConditionalBlock
    branches: tuple[SelectedBranch, ...]

    @property
    def condition_symbols(self) -> frozenset[str]:
        """Free symbols of the branch conditions (the copies evaluate them again)."""
        return frozenset(
            s
            for b in self.branches
            if b.condition is not None
            for s in b.condition.get_free_symbols()
        )


def _branch_of(state: SDFGState) -> Optional[tuple[ConditionalBlock, int]]:
    """The `ConditionalBlock` whose branch region directly holds `state`, and the branch."""
    region = state.parent_graph
    block = getattr(region, "parent_graph", None)
    if not isinstance(block, ConditionalBlock):
        return None
    for n, (_, r) in enumerate(block.branches):
        if r is region:
            return block, n
    return None


def analyse_selected_writers(
    sdfg: dace.SDFG, data: str, writers, users
) -> Union[SelectedWriters, Decline]:
    """Describe the writers of `data` (the `(state, AccessNode)` pairs writing it) as the
    branches of one `if`/`else`, or decline.

    Conditions: every writer lies directly in a branch of the same `ConditionalBlock`,
    one per branch, every branch has one, and the block has an `else` (so some branch
    always writes); nothing in the block reads `data`; each condition reads symbols only
    (data in a condition could change before the consumer); each branch's writers are
    a Map, a copy or a concat `analysis.concat` accepts.

    Args:
        sdfg: the SDFG.
        data: the written data.
        writers: the `(state, AccessNode)` pairs writing it.
        users: data name -> the `(state, AccessNode)` pairs that access it (`data_users`).

    Returns:
        the `SelectedWriters`, or a `Decline` with the reason.
    """
    where = [_branch_of(st) for st, _ in writers]
    if any(p is None for p in where):
        return Decline(
            "intermediate is written by several AccessNodes, not all in the branches of one if/else"
        )
    placed = cast(list[tuple[ConditionalBlock, int]], where)  # none is None
    block = placed[0][0]
    if any(b is not block for b, _ in placed):
        return Decline("intermediate is written in the branches of several if/else blocks")
    taken = sorted(n for _, n in placed)
    if taken != list(range(len(block.branches))):
        return Decline("not every branch of the if/else writes the intermediate exactly once")
    if block.branches[-1][0] is not None:
        return Decline("the if/else that writes the intermediate has no else branch")
    inside = {id(s) for s in block.all_states()}
    for st, node in users.get(data, ()):
        if id(st) in inside and st.out_degree(node) > 0:
            return Decline("the intermediate is read inside the if/else that writes it")
    for cond, _ in block.branches:
        if cond is not None:
            if set(cond.get_free_symbols()) & set(sdfg.arrays):
                return Decline(f"if/else condition '{cond.as_string}' reads data")
    branches = []
    for (st, node), (_, n) in sorted(zip(writers, placed), key=lambda w: w[1][1]):
        found = analyse_concat(sdfg, st, node, users)
        if isinstance(found, Decline):
            return Decline(f"if/else branch {n}: {found.reason}")
        branches.append(SelectedBranch(block.branches[n][0], st, node, found))
    return SelectedWriters(block, tuple(branches))
