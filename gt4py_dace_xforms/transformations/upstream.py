"""Upstream first, for matches applied one at a time (the DaCe viewer, `apply_transformations`).

DaCe's pattern matcher decides the order of the matches it lists (per state, per
expression, in the subgraph matcher's order), not this library. Applying a downstream
match first copies its producer into the consumer; the copy reads the producer's inputs
through whole-array Memlets, so an intermediate among those inputs that could have been
inlined into the producer no longer can (seed `t + t(K+1) + t(K+2)` at gt4py's
`TopLevelDataFlowPre`: 2 transients left instead of the pass's 1). `gt_inline_intermediates`
avoids this by taking intermediates in topological order; a single match cannot choose
the order, so it declines while such an upstream match is pending, and is listed again
once that one is applied.
"""

from __future__ import annotations

from typing import Optional

import dace
from dace.sdfg import nodes as dn

from gt4py_dace_xforms.analysis.candidate import InlineCandidate, analyse_candidate


def pending_upstream(sdfg: dace.SDFG, cand: InlineCandidate) -> Optional[str]:
    """The name of an intermediate that one of `cand`'s producer Maps reads and that could
    be inlined into that Map now, or None. Never mutates the SDFG.

    Args:
        sdfg: the SDFG holding the candidate.
        cand: the candidate whose producer Maps are looked at.

    Returns:
        The intermediate's name, or None.
    """
    slices = (
        [cand.producer]
        if cand.concat is None
        else [b.slice for b in cand.concat.branches if b.slice is not None]
    )
    state = cand.producer_state
    for prod in slices:
        if prod is None or prod.map_entry not in state.nodes():
            continue
        seen = set()
        for edge in state.in_edges(prod.map_entry):
            src = edge.src
            if not isinstance(src, dn.AccessNode) or src in seen:
                continue
            seen.add(src)
            if isinstance(analyse_candidate(sdfg, state, src, prod.map_entry), InlineCandidate):
                return src.data
    return None
