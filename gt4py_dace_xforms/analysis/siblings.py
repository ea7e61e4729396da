"""The readers of an intermediate, judged together: `sibling_candidates`. Pure."""

from __future__ import annotations

from typing import Callable, Optional

import dace
from dace.sdfg import nodes as dn

from gt4py_dace_xforms.analysis.candidate import InlineCandidate, analyse_candidate
from gt4py_dace_xforms.analysis.producer import Decline


def sibling_candidates(
    sdfg: dace.SDFG, cand: InlineCandidate, *, retarget=None, analyse: Callable = analyse_candidate
) -> Optional[list[InlineCandidate]]:
    """Every reader of `cand`'s intermediate as a sound candidate, or None if some reader
    cannot be inlined (or is no Map consumer). `retarget`: a `RetargetPlan` for the
    intermediate; its write-back copies (the writers write the output once the Maps
    are inlined) are no obstacle. `analyse`: `analyse_candidate`, or a caller's memo of it
    on the same, unchanged graph.

    Args:
        sdfg: the SDFG.
        cand: the inline candidate.
        retarget: a `RetargetPlan` for the intermediate (None: none).
        analyse: `analyse_candidate`, or a function like it.

    Returns:
        the candidates, or None.
    """
    name = cand.intermediate.data
    group: list[InlineCandidate] = []
    copies = [c.edge for c in retarget.copies] if retarget is not None else []
    for st in sdfg.states():
        for node in st.data_nodes():
            if node.data != name:
                continue
            for e in st.out_edges(node):
                if not isinstance(e.dst, dn.MapEntry):
                    if any(e is c for c in copies):
                        continue
                    return None
                if any(g.consumer is e.dst for g in group):
                    continue
                other = cand if e.dst is cand.consumer else analyse(sdfg, st, node, e.dst)
                if isinstance(other, Decline):
                    return None
                group.append(other)
    return group if group else None
