"""`decide_candidate`: how the pass puts a sound candidate to its policy."""

from __future__ import annotations

from typing import Callable, Optional

import dace
from dace.sdfg import nodes as dn

from gt4py_dace_xforms.analysis.candidate import InlineCandidate, analyse_candidate
from gt4py_dace_xforms.analysis.producer import Decline
from gt4py_dace_xforms.analysis.retarget import RetargetPlan, retarget_plan
from gt4py_dace_xforms.analysis.siblings import sibling_candidates
from gt4py_dace_xforms.policy.default import Decision, InlinePolicy


def decide_candidate(
    sdfg: dace.SDFG,
    policy: InlinePolicy,
    cand: InlineCandidate,
    analyse: Callable = analyse_candidate,
) -> Decision:
    """The policy's decision; for a reader that leaves the intermediate in place, judged
    together with the other readers when all of them can be inlined too (then the
    intermediate goes away once the last one is, which a one-by-one view cannot see).
    A write-back copy whose writers can write the output instead (`retarget_plan`) does
    not keep the intermediate: the group is priced with the copied points still
    computed (`writeback_points`).

    Args:
        sdfg: the SDFG the candidate is in.
        policy: the policy deciding.
        cand: the sound candidate.
        analyse: how the other readers are analysed (`analyse_candidate`, or the pass's
            memo of it for the unchanged graph).

    Returns:
        `policy.decide_group`'s decision where the group is formed and the policy judges
        it, else `policy.decide`'s.
    """
    if cand.removes_intermediate or not policy.judges_groups:
        return policy.decide(sdfg, cand)
    plan: Optional[RetargetPlan] = None
    if policy.writeback_retarget:
        found = retarget_plan(sdfg, cand.intermediate.data, allow_map_readers=True)
        plan = None if isinstance(found, Decline) else found
    group = sibling_candidates(sdfg, cand, retarget=plan, analyse=analyse)
    if group is None:
        return policy.decide(sdfg, cand)
    decision = policy.decide_group(
        sdfg, cand, group, writeback_points=None if plan is None else plan.copied_extents
    )
    return policy.decide(sdfg, cand) if decision is None else decision


def readers_accepted(sdfg: dace.SDFG, name: str, policy: InlinePolicy) -> Optional[str]:
    """Why `policy` would not inline every reader of `name` (all of them Maps), or None: the
    trial question of the rewrites that pay only with the inline they enable (sibling
    tails, merged split fragments).

    Args:
        sdfg: the SDFG.
        name: the intermediate.
        policy: the policy deciding.

    Returns:
        The reason, or None where the readers are inlined.
    """
    # One reader as a candidate; `sibling_candidates` and the group decision see the rest.
    first = next(
        (
            (st, n, e.dst)
            for st in sdfg.states()
            for n in st.data_nodes()
            if n.data == name
            for e in st.out_edges(n)
        ),
        None,
    )
    if first is None:
        return f"'{name}' has no reader"
    if not isinstance(first[2], dn.MapEntry):
        return f"'{name}' has a reader that is no Map"
    cand = analyse_candidate(sdfg, *first)
    if isinstance(cand, Decline):
        return cand.reason
    if sibling_candidates(sdfg, cand) is None:
        return f"not every reader of '{name}' can be inlined"
    decision = decide_candidate(sdfg, policy, cand)
    return None if decision.accept else decision.reason
