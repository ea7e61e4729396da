"""`VerticalWindow`: remove an intermediate read at several K offsets by sweeping its consumer in K."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Collection, Optional, Union

import dace
from dace import properties, transformation
from dace.sdfg import nodes as dn

from gt4py_dace_xforms.analysis.candidate import analyse_candidate, find_candidates
from gt4py_dace_xforms.analysis.producer import Decline
from gt4py_dace_xforms.analysis.window import WindowPlan, analyse_window, window_group
from gt4py_dace_xforms.report import InlineRecord, InlineReport
from gt4py_dace_xforms.transformations.inline_fuser import (
    candidate_of_match,
    shifted_read_expressions,
)
from gt4py_dace_xforms.transformations.window_rewrite import window_candidate


if TYPE_CHECKING:
    from gt4py_dace_xforms.policy import InlinePolicy


@properties.make_properties
@transformation.explicit_cf_compatible
class VerticalWindow(transformation.SingleStateTransformation):
    """Evaluate each level of an intermediate once, in a K sweep of its consumer, and keep
    the levels the consumer reads in a window of registers (GridTools' k-caches).

    Pattern: as `InlineFuser`'s, top-level `MapExit -> (T) -> MapEntry` and
    `(T) -> MapEntry` (`T` written by copies or in an earlier state).

    ```python
    for i, k in range(N, K):  # producer
        T[i, k] = a[i, k] * 2 + b[i, k]
    for i, k in range(N, K - 1):  # consumer
        o[i, k] = T[i, k + 1] - T[i, k]
    # becomes
    for i in range(N):  # parallel
        w[1] = a[i, 0] * 2 + b[i, 0]
        w[0] = w[1]  # fill the window
        for k in range(K - 1):  # sequential
            w[1] = a[i, k + 1] * 2 + b[i, k + 1]  # one evaluation per level
            o[i, k] = w[1] - w[0]
            w[0] = w[1]
    ```

    Where `InlineFuser` evaluates the producer once per offset read (here twice per
    level), this evaluates it once per level; `T` goes away in both. The price is
    parallelism: the K loop is sequential, one column per horizontal point.

    Conditions: everything `InlineFuser` proves (`analyse_candidate`: the producer can be
    evaluated at every element read, a single Map, a concat node or an if/else's writers),
    and `analysis.window.analyse_window`: plain element reads by the intermediate's only
    reader, differing in one dimension at `kp + d` for contiguous integer `d`, at most
    `max_width` of them; the consumer keeps another parameter, has steps of 1, no dynamic
    inputs, no WCR, no nested Map, and writes each output at `kp + c` (one column per
    horizontal point).

    Several readers (gt4py splits a consumer at a decomposed rank's halo or a limited-area
    grid's boundary zone): `shared=True` sweeps this reader though others read `T` too
    (`T` stays until its last reader is swept); `gt_apply_vertical_windows` takes a whole group
    at once (`analysis.window.window_group`), priced by the policy's
    `decide_window_group`.

    Restrictions: no K tiling yet (the sweep runs the whole column).
    `can_be_applied()` never mutates and never raises.
    """

    producer_exit = transformation.PatternNode(dn.MapExit)
    intermediate = transformation.PatternNode(dn.AccessNode)
    consumer_entry = transformation.PatternNode(dn.MapEntry)

    max_width = properties.Property(
        dtype=int,
        default=8,
        desc="Decline if the window would hold more levels than this (registers).",
    )

    shared = properties.Property(
        dtype=bool,
        default=False,
        desc="Also sweep a reader that is not the intermediate's last (each reader its own window).",
    )

    @classmethod
    def expressions(cls) -> Any:
        """DaCe's pattern: `InlineFuser`'s (`shifted_read_expressions`).

        Returns:
            The two paths: producer MapExit -> intermediate -> consumer MapEntry, and
            intermediate -> consumer MapEntry.
        """
        return shifted_read_expressions(cls)

    def analyse(self, state: dace.SDFGState, sdfg: dace.SDFG) -> Union[WindowPlan, Decline]:
        """The plan for this match, or why it does not apply.

        Args:
            state: the state the pattern matched in.
            sdfg: the SDFG holding `state`.

        Returns:
            The `WindowPlan` (`analysis.window`), or a `Decline` (also where the analysis
            raised).
        """
        try:
            cand = candidate_of_match(self, state, sdfg)
            if isinstance(cand, Decline):
                return cand
            return analyse_window(sdfg, cand, self.max_width, sole_reader=not self.shared)
        except Exception as err:  # noqa: BLE001  # a matcher must decline, never abort compilation
            return Decline(f"analysis failed: {type(err).__name__}: {err}")

    def can_be_applied(
        self, graph, expr_index: int, sdfg: dace.SDFG, permissive: bool = False
    ) -> bool:
        """Whether `analyse` finds a window.

        Args:
            graph: the state the pattern matched in.
            expr_index: which of `expressions()` matched (unused).
            sdfg: the SDFG holding `graph`.
            permissive: DaCe's permissive flag (unused).

        Returns:
            True where there is a `WindowPlan`.
        """
        return isinstance(self.analyse(graph, sdfg), WindowPlan)

    def apply(self, graph: dace.SDFGState, sdfg: dace.SDFG) -> dn.NestedSDFG:
        """Plan the match and sweep the consumer (`window_candidate`).

        Args:
            graph: the state the pattern matched in.
            sdfg: the SDFG, changed in place.

        Returns:
            The nested SDFG that now holds the consumer's sweep.

        Raises:
            ValueError: the match declines.
        """
        plan = self.analyse(graph, sdfg)
        if isinstance(plan, Decline):
            raise ValueError(f"VerticalWindow cannot be applied: {plan.reason}")
        return window_candidate(sdfg, plan)


def gt_apply_vertical_windows(
    sdfg: dace.SDFG,
    *,
    names: Optional[Collection[str]] = None,
    policy: Optional["InlinePolicy"] = None,
    max_width: int = 8,
    validate: bool = True,
) -> InlineReport:
    """Apply `VerticalWindow` wherever it applies in the top-level states, to a fixed point.

    An intermediate read by several top-level Maps of one state (`window_group`) is swept
    in each of them, or in none, as the policy's `decide_window_group` says.

    Args:
        sdfg: the SDFG, changed in place.
        names: only these intermediates (None: every one).
        policy: an `InlinePolicy` whose `decide_window` chooses per candidate (the cost
            model: docs/cost_model.md). None: every window that applies.
        max_width: the widest window (levels kept in registers) planned.
        validate: validate the SDFG at the end.

    Returns:
        The report: one record per window taken (mode "window"), and in `windowed` the
        intermediates removed, in order.
    """
    report = InlineReport()
    if policy is not None and not policy.takes_windows:
        return report  # nothing to plan: the policy would refuse every window (windows off)
    only = names
    done: list[str] = []
    refused: set = set()
    groups_tried: set[str] = set()
    progress = True
    while progress:
        progress = False
        for state, node, consumer in list(find_candidates(sdfg)):
            if node not in state.nodes() or consumer not in state.nodes():
                continue
            if (only is not None and node.data not in only) or (
                node.data,
                consumer.map.label,
            ) in refused:
                continue
            cand = analyse_candidate(sdfg, state, node, consumer)
            if isinstance(cand, Decline):
                continue
            plan = analyse_window(sdfg, cand, max_width)
            if isinstance(plan, Decline):
                if not cand.removes_intermediate and node.data not in groups_tried:
                    groups_tried.add(node.data)
                    taken = _window_group(sdfg, node.data, max_width, policy, report)
                    if taken:
                        done.append(node.data)
                        progress = True
                        break
                continue
            decision = policy.decide_window(sdfg, plan) if policy is not None else None
            if decision is not None and not decision.accept:
                refused.add((node.data, consumer.map.label))
                continue
            _take(sdfg, plan, decision, report)
            done.append(node.data)
            progress = True
            break  # the graph changed: enumerate again
    report.windowed = done
    if validate:
        sdfg.validate()
    return report


def _group_plans(
    sdfg: dace.SDFG, state: dace.SDFGState, name: str, consumers: list, max_width: int
) -> Union[list[WindowPlan], Decline]:
    """A window plan per consumer (none need be the last reader), analysed on the graph as
    it is now; the first decline otherwise."""
    plans = []
    for consumer in consumers:
        node = next(
            e.src
            for e in state.in_edges(consumer)
            if isinstance(e.src, dn.AccessNode) and e.src.data == name
        )
        cand = analyse_candidate(sdfg, state, node, consumer)
        plan = (
            cand
            if isinstance(cand, Decline)
            else analyse_window(sdfg, cand, max_width, sole_reader=False)
        )
        if isinstance(plan, Decline):
            return plan
        plans.append(plan)
    return plans


def _window_group(sdfg: dace.SDFG, name: str, max_width: int, policy, report) -> bool:
    """Sweep every reader of `name` in its own window where the group is sound and the
    policy takes it (`decide_window_group`); the last window removes `name`."""
    found = window_group(sdfg, name)
    if isinstance(found, str):
        return False
    state, consumers = found
    plans = _group_plans(sdfg, state, name, consumers, max_width)
    if isinstance(plans, Decline):
        return False
    decision = policy.decide_window_group(sdfg, plans) if policy is not None else None
    if decision is not None and not decision.accept:
        return False
    for consumer in consumers:
        # Each rewrite replaces nodes: analyse the next reader on the graph as it is now.
        plan = _group_plans(sdfg, state, name, [consumer], max_width)
        if isinstance(plan, Decline):
            return True  # the windows taken so far are sound on their own; `name` stays
        _take(sdfg, plan[0], decision, report)
    return True


def _take(sdfg: dace.SDFG, plan: WindowPlan, decision, report) -> None:
    """Sweep `plan`'s consumer; `report` (if any) gets its record (`decision`: the policy's,
    None where every window that applies is taken)."""
    cand = plan.cand
    if report is not None:
        report.add(
            InlineRecord(
                cand.state.label,
                cand.intermediate.data,
                cand.consumer.map.label,
                tuple(g.shift for g in cand.groups),
                True,
                decision.reason if decision else "windowed (every window that applies)",
                removed_intermediate=cand.removes_intermediate,
                figures=decision.figures if decision else None,
                mode="window",
            )
        )
    window_candidate(sdfg, plan)
