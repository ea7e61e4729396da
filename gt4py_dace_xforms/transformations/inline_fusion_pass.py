"""`gt_inline_intermediates()`: apply `InlineFuser` wherever it is sound and the policy agrees."""

from __future__ import annotations

import dataclasses
from typing import Optional

import dace

from gt4py_dace_xforms.analysis.candidate import analyse_candidate, find_candidates  # noqa: F401  (re-exported)
from gt4py_dace_xforms.analysis.producer import Decline
from gt4py_dace_xforms.policy import CostModel, Decision, InlinePolicy
from gt4py_dace_xforms.policy.decide import decide_candidate
from gt4py_dace_xforms.report import InlineRecord, InlineReport
from gt4py_dace_xforms.transformations import rewrite
from gt4py_dace_xforms.transformations.column_reads import gt_narrow_column_reads
from gt4py_dace_xforms.transformations.inplace_update import gt_update_in_place
from gt4py_dace_xforms.transformations.merge_fragments import gt_merge_split_fragments
from gt4py_dace_xforms.transformations.output_buffer import gt_use_outputs_as_buffers
from gt4py_dace_xforms.transformations.retarget import gt_retarget_writebacks
from gt4py_dace_xforms.transformations.sibling_tail import gt_split_sibling_tails
from gt4py_dace_xforms.transformations.vertical_window import gt_apply_vertical_windows
from gt4py_dace_xforms.transformations.writeback import convert_writeback_copies


def mode_of(candidate) -> str:
    """The record mode of an applied candidate: "selected", "single", "eager" or "lazy".

    Args:
        candidate: an `InlineCandidate`.

    Returns:
        The mode its `InlineRecord` gets.
    """
    if candidate.selected is not None:
        return "selected"
    if candidate.concat is None:
        return "single"
    return "eager" if candidate.eager else "lazy"


def gt_inline_intermediates(
    sdfg: dace.SDFG,
    *,
    policy: Optional[InlinePolicy] = None,
    validate: bool = True,
) -> InlineReport:
    """Inline shifted reads of intermediates into their consumers, to a fixed point.

    Every candidate is analysed (`analyse_candidate`); sound ones go to `policy`; accepted
    ones are rewritten exactly as `InlineFuser.apply()` does. Before that the rewrites that
    recompute nothing run where the policy takes them (`gt_update_in_place`,
    `gt_use_outputs_as_buffers`, `gt_apply_vertical_windows`, write-back copies as Maps,
    `gt_merge_split_fragments`, `gt_split_sibling_tails`); after it `gt_retarget_writebacks` and
    `gt_narrow_column_reads`.

    Order: candidates are taken upstream first (`find_candidates`), so a producer is
    inlined into its consumer before that consumer is judged as a producer itself; the
    downstream decision then sees the full recomputation cost, and no earlier choice
    can make a chain un-inlinable. Readers of one intermediate are judged as a group.
    Each round applies every accepted candidate whose nodes are still in place (each is
    re-analysed on the current graph first), then enumerates again, since a rewrite can
    enable another (chains), until a round changes nothing.

    Args:
        sdfg: the SDFG, changed in place.
        policy: the `InlinePolicy` deciding each sound candidate. None: `CostModel("cpu")`;
            `InlineWhereSound()` inlines everything sound.
        validate: validate the SDFG at the end.

    Returns:
        The report: the last decision for every candidate, applied ones in order, and what
        the other rewrites changed.
    """
    chosen = policy or CostModel("cpu")
    report = InlineReport()
    # A concat node that is its (dead) source updated pointwise first: its source may
    # then be the output's buffer.
    report.extend(gt_update_in_place(sdfg, policy=chosen, validate=False))
    # Buffers that can become their output next: nothing is recomputed, where inlining
    # their readers would recompute what the output then holds.
    report.extend(gt_use_outputs_as_buffers(sdfg, policy=chosen, validate=False))
    # Windows next, where the policy takes them: a consumer swept in K evaluates each
    # level once, where inlining its reads would evaluate it once per offset.
    report.extend(gt_apply_vertical_windows(sdfg, policy=chosen, validate=False))
    # Intermediates whose readers the policy accepted as a group: the gain needs every
    # one of them inlined, so the rest are not second-guessed one by one.
    committed: set[str] = set()
    # Write-back copies become Map readers where that lets the whole group go; the
    # group was accepted on the trial, so its members are not judged one by one.
    committed.update(convert_writeback_copies(sdfg, chosen))
    # An intermediate written by the pieces of one split Map: one Map over their union,
    # where its readers are then inlined (an indirect read of several writers is not).
    report.extend(gt_merge_split_fragments(sdfg, policy=chosen, validate=False))
    # An intermediate computed from another output of its Map: its readers inline that
    # tail alone (a split only where the trial says the readers' group is then taken).
    report.extend(gt_split_sibling_tails(sdfg, policy=chosen, validate=False))
    # Analyses of the graph as it is: the loop and the policy's group judgement (every
    # reader of an intermediate, `sibling_candidates`) ask for the same ones. Emptied by
    # each rewrite.
    memo: dict[tuple[int, int, int], object] = {}

    def analyse(sdfg_: dace.SDFG, state, node, consumer):
        key = (id(state), id(node), id(consumer))
        if key not in memo:
            memo[key] = analyse_candidate(sdfg_, state, node, consumer)
        return memo[key]

    while True:
        # Declines are re-derived each round; the final round's are the ones reported.
        last_decline: dict[tuple, InlineRecord] = {}
        progress = False
        for state, node, consumer in list(find_candidates(sdfg)):
            if node not in state or consumer not in state:
                continue  # removed by a rewrite earlier in this round
            key = (state.label, node.data, consumer.map.label)
            result = analyse(sdfg, state, node, consumer)
            if isinstance(result, Decline):
                last_decline[key] = InlineRecord(
                    state.label, node.data, consumer.map.label, (), False, result.reason
                )
                continue
            if node.data in committed:
                decision = Decision(True, "member of an accepted group of readers")
            else:
                decision = decide_candidate(sdfg, chosen, result, analyse)
            shifts = tuple(result.shifts)
            if not decision.accept:
                last_decline[key] = InlineRecord(
                    state.label,
                    node.data,
                    consumer.map.label,
                    shifts,
                    False,
                    decision.reason,
                    figures=decision.figures,
                )
                continue
            if decision.figures and "group_size" in decision.figures:
                committed.add(node.data)
            if decision.force_lazy and result.eager:
                result = dataclasses.replace(result, eager=False)
            rewrite.inline_candidate(sdfg, result)
            memo.clear()
            report.add(
                InlineRecord(
                    state.label,
                    node.data,
                    consumer.map.label,
                    shifts,
                    True,
                    decision.reason,
                    removed_intermediate=result.removes_intermediate,
                    figures=decision.figures,
                    mode=mode_of(result),
                )
            )
            progress = True
        if not progress:
            break
    for rec in last_decline.values():
        report.add(rec)
    if chosen.writeback_retarget:
        # Transients now read only by their write-back copy: the writers write the output
        # (of a pinned decision set, only its own intermediates).
        pinned = chosen.pinned
        report.extend(gt_retarget_writebacks(sdfg, names=pinned, validate=False))
    if chosen.narrows_column_reads(sdfg):
        # Last, once windows have made column producers: a scan that gets only the column
        # of its iteration can be fused with the Map writing it (gt4py's next round).
        report.extend(gt_narrow_column_reads(sdfg, validate=False))
    if validate:
        sdfg.validate()
    return report
