"""The decision interface of the pass, and the policy "inline whatever is sound"."""

from __future__ import annotations

import dataclasses
from typing import Optional

import dace

from gt4py_dace_xforms.analysis.candidate import InlineCandidate


@dataclasses.dataclass(frozen=True)
class Decision:
    """Whether to apply a sound candidate; `reason` says why, `figures` hold the numbers."""

    accept: bool
    reason: str
    figures: dict | None = None
    #: Concat mode: evaluate lazily even where eager evaluation is proven sound.
    force_lazy: bool = False


def too_many_copies(candidate: InlineCandidate, bound: int) -> str | None:
    """Why `candidate` needs more copies than `bound` (one per distinct read offset and
    one per indirect read), or None. The one place the `max_distinct_offsets` bound of
    the policies and of `InlineFuser` is checked.

    Args:
        candidate: the sound candidate; its `copies` is counted.
        bound: the most copies allowed (`max_distinct_offsets`).

    Returns:
        The reason to decline, or None where `candidate.copies <= bound`.
    """
    n = candidate.copies
    if n <= bound:
        return None
    return f"{n} distinct offsets exceed the bound max_distinct_offsets={bound}"


class InlinePolicy:
    """What the pass asks a policy. Subclasses implement `decide`; every other member has
    a default here. A policy never mutates the SDFG.

    Attributes:
        writeback_copies: write a write-back copy as a Map where that lets every reader of
            its buffer be inlined (`convert_writeback_copies`, docs/writeback.md).
        writeback_retarget: once a write-back buffer's only reader is its copy, let its
            writers write the output directly (`WriteBackRetarget`, docs/writeback.md).
        output_buffers: let a write-back buffer that other dataflow still reads become the
            output it is copied into (`OutputAsBuffer`, docs/writeback.md), before any
            inlining: nothing is recomputed, so it is preferred where both apply.
        column_reads: after inlining, pass a scan (a nested SDFG in a horizontal Map)
            only the column of a transient it reads (`NestedColumnRead`,
            docs/scans.md), so that gt4py's Map fusion can fuse the Map writing
            those columns with the scan: nothing is recomputed.
        sweep_pairs: after gt4py's top-level stage, fuse the Maps that write 2-D
            transients column by column into the Map that reads each column back (a
            forward and a backward sweep, `SweepPairFusion`, docs/scans.md): the
            transients become per-iteration column buffers, nothing is recomputed.
        copies_into_readers: after gt4py's top-level stage, let the Maps that read a copy's
            source at the copied points write its target in the same iteration
            (`CopyIntoReaders`, docs/copy_into_readers.md): one read of the source is
            saved, nothing is recomputed.
    """

    writeback_copies: bool = True
    writeback_retarget: bool = False
    output_buffers: bool = False
    #: (Optional: `CostModel` takes None for "by target".)
    column_reads: Optional[bool] = False
    sweep_pairs: Optional[bool] = False
    copies_into_readers: bool = False

    def narrows_column_reads(self, sdfg: dace.SDFG) -> bool:
        """Whether the pass narrows scans' column reads (`column_reads`).

        Args:
            sdfg: the SDFG the pass runs on (unused here; `CostModel` reads its target).

        Returns:
            `column_reads`, and no decision set pinned.
        """
        return bool(self.column_reads) and self.pinned is None

    @property
    def pinned(self) -> Optional[tuple[str, ...]]:
        """The only intermediates this policy touches (a pinned decision set, `InlineOnly`),
        or None: any. Retargeting is limited to them too."""
        return None

    def decide(self, sdfg: dace.SDFG, candidate: InlineCandidate) -> Decision:
        """Whether to inline `candidate` (proven sound) on its own.

        Args:
            sdfg: the SDFG the candidate is in (not to be changed).
            candidate: the (intermediate, consumer Map) pair, proven sound.

        Returns:
            The decision.

        Raises:
            NotImplementedError: here; subclasses implement it.
        """
        raise NotImplementedError(f"{type(self).__name__} does not decide")

    def decide_group(
        self,
        sdfg: dace.SDFG,
        candidate: InlineCandidate,
        group: list,
        writeback_points: Optional[tuple] = None,
    ) -> Optional[Decision]:
        """The decision for `candidate` as one of `group`, every reader of its intermediate,
        all inlinable: inlining them all removes the intermediate. `writeback_points`: the
        extents of a write-back copy that is then retargeted. None (this default): judge
        each reader on its own with `decide`.

        Args:
            sdfg: the SDFG the candidates are in.
            candidate: the reader being decided.
            group: every reader's candidate of the same intermediate, `candidate` among them.
            writeback_points: the write-back copy's extents, or None.

        Returns:
            The decision, or None to decide `candidate` alone.
        """
        return None

    def decide_output_buffer(self, sdfg: dace.SDFG, plan) -> Decision:
        """Whether to replace `plan`'s buffer by its output (an `OutputBufferPlan`,
        `analysis.output_buffer`). Nothing is recomputed and every access stays an access,
        now of the output: the copy (one read and one write per copied element) and the
        buffer's allocation are saved, so where `output_buffers` is on it is taken.

        Args:
            sdfg: the SDFG holding the buffer.
            plan: the `OutputBufferPlan`.

        Returns:
            The decision, its figures the bytes of copy traffic saved and the target.
        """
        itemsize = sdfg.arrays[plan.name].dtype.bytes
        elements = plan.saved_elements()
        saved = 2 * itemsize * elements
        figures = {
            "output_buffer_saved_bytes": float(saved) if saved.is_number else str(saved),
            "output_buffer_target": plan.target,
        }
        if not self.output_buffers:
            return Decision(
                False, f"{type(self).__name__} does not use outputs as buffers", figures
            )
        pinned = self.pinned
        if pinned is not None and plan.name not in pinned:
            return Decision(False, f"{plan.name} is not among the intermediates to inline", figures)
        return Decision(
            True, f"the copy into '{plan.target}' is saved, nothing is recomputed", figures
        )

    def fuses_sweep_pairs(self, sdfg: dace.SDFG) -> bool:
        """Whether the pipeline looks for sweep pairs at all (`sweep_pairs`).

        Args:
            sdfg: the SDFG the hook runs on (unused here; `CostModel` reads its target).

        Returns:
            `sweep_pairs`, and no decision set pinned.
        """
        return bool(self.sweep_pairs) and self.pinned is None

    def decide_sweep_pair(self, sdfg: dace.SDFG, plan) -> Decision:
        """Whether to fuse `plan` (a `SweepPairPlan`, `analysis.sweep_pair`): its buffers
        become one column per iteration of the reader Map; nothing is recomputed. This
        default takes it where `sweep_pairs` is on (and the buffers are not pinned out).

        Args:
            sdfg: the SDFG holding the Maps.
            plan: the `SweepPairPlan`.

        Returns:
            The decision.
        """
        if not self.sweep_pairs:
            return Decision(False, f"{type(self).__name__} does not fuse sweep pairs")
        pinned = self.pinned
        if pinned is not None and not set(plan.names) <= set(pinned):
            return Decision(False, f"{', '.join(plan.names)} not among the intermediates to inline")
        return Decision(
            True, "the columns are written and read back in one iteration, nothing is recomputed"
        )

    def decide_copy_into_readers(self, sdfg: dace.SDFG, plan) -> Decision:
        """Whether the readers of `plan` (a `CopyReadersPlan`, `analysis.copy_readers`) write
        its copy's target. The copy's read of the source is saved (they load those points
        anyway), its write stays, nothing is recomputed: where `copies_into_readers` is on
        and no decision set is pinned, it is taken.

        Args:
            sdfg: the SDFG holding the copy.
            plan: the `CopyReadersPlan`.

        Returns:
            The decision, its figures the bytes of source reads saved and the readers' count.
        """
        itemsize = sdfg.arrays[plan.src.data].dtype.bytes
        saved = itemsize * plan.elements
        figures = {
            "copy_into_readers_saved_bytes": float(saved) if saved.is_number else str(saved),
            "copy_into_readers_readers": len(plan.pieces),
        }
        if not self.copies_into_readers:
            return Decision(
                False, f"{type(self).__name__} does not move copies into their readers", figures
            )
        if self.pinned is not None:
            return Decision(
                False, "a pinned decision set touches only the intermediates it names", figures
            )
        src, dst = plan.names
        return Decision(
            True,
            f"{dst} is written where {src} is loaded anyway: the copy's read of {src} is saved, "
            "nothing is recomputed",
            figures,
        )

    def decide_window(self, sdfg: dace.SDFG, plan) -> Decision:
        """Whether to sweep `plan`'s consumer in K (a `WindowPlan`, `analysis.window`):
        each level of the intermediate evaluated once, the levels read kept in registers,
        the intermediate removed. Asked before `decide`; this default never windows.

        Args:
            sdfg: the SDFG holding the consumer.
            plan: the `WindowPlan`.

        Returns:
            The decision (here: declined).
        """
        return Decision(False, f"{type(self).__name__} does not window")

    def decide_window_group(self, sdfg: dace.SDFG, plans: list) -> Decision:
        """Whether to sweep every reader of one intermediate in its own window (`plans`,
        one `WindowPlan` per reader; the last removes the intermediate). This default never
        windows.

        Args:
            sdfg: the SDFG holding the readers.
            plans: one `WindowPlan` per reader of the intermediate.

        Returns:
            One decision for all of them (here: declined).
        """
        return Decision(False, f"{type(self).__name__} does not window")

    @property
    def takes_windows(self) -> bool:
        """Whether `decide_window` / `decide_window_group` may accept at all (else the pass
        plans no windows): not this default's, which never windows."""
        return type(self).decide_window is not InlinePolicy.decide_window

    @property
    def judges_groups(self) -> bool:
        """Whether `decide_group` is this policy's own (else the pass need not form groups)."""
        return type(self).decide_group is not InlinePolicy.decide_group


@dataclasses.dataclass(frozen=True)
class InlineWhereSound(InlinePolicy):
    """Accept every sound candidate, within a bound on copies per consumer.

    Attributes:
        max_distinct_offsets: decline a consumer that needs more copies of the producer
            than this (one per distinct element read, one per indirect read).
        skip_pointwise: decline candidates whose only read is the element the producer
            writes in the same iteration (all shifts 0), when vertical Map fusion could
            take them: one producer Map in the consumer's state. Concat nodes and reads
            in a later state are never Map fusion's, so those are still inlined.
        allow_eager: in concat mode, evaluate all branches and select where that is
            proven memory safe (no control flow: better for vectorization and GPUs).
        writeback_retarget: once a write-back buffer's only reader is its copy, let its
            writers write the output directly (`WriteBackRetarget`, docs/writeback.md);
            where that holds, its copy is not written as a Map.
        output_buffers: as in `InlinePolicy` (on).
        column_reads: as in `InlinePolicy` (on).
        sweep_pairs: as in `InlinePolicy` (on).
        copies_into_readers: as in `InlinePolicy` (on).
    """

    max_distinct_offsets: int = 8
    skip_pointwise: bool = False
    allow_eager: bool = True
    writeback_retarget: bool = True
    output_buffers: bool = True
    column_reads: bool = True
    sweep_pairs: bool = True
    copies_into_readers: bool = True

    def decide(self, sdfg: dace.SDFG, candidate: InlineCandidate) -> Decision:
        """Accept within `max_distinct_offsets`, but a pointwise read vertical Map fusion
        could take where `skip_pointwise`.

        Args:
            sdfg: the SDFG the candidate is in.
            candidate: the sound candidate.

        Returns:
            The decision; `force_lazy` unless `allow_eager`.
        """
        n = len(candidate.groups)
        too_many = too_many_copies(candidate, self.max_distinct_offsets)
        if too_many:
            return Decision(False, too_many)
        fusable = candidate.concat is None and candidate.producer_state is candidate.state
        if (
            self.skip_pointwise
            and fusable
            and n == 1
            and all(s == "0" for s in candidate.groups[0].shift)
        ):
            return Decision(False, "pointwise read only: left to vertical Map fusion")
        return Decision(True, "sound", force_lazy=not self.allow_eager)


@dataclasses.dataclass(frozen=True)
class InlineOnly(InlinePolicy):
    """Accept the sound candidates of the named intermediates, decline every other.

    For experiments that pin a decision set (the oracle, `bench/oracle.py`, builds one
    variant per set): every reader of a named intermediate is inlined where sound, so the
    intermediate goes away when all its readers can be; nothing else is touched.

    Attributes:
        intermediates: names of the intermediate arrays whose reads are inlined.
        max_distinct_offsets: as in `InlineWhereSound`.
        allow_eager: as in `InlineWhereSound`.
        writeback_retarget: as in `InlineWhereSound`, for the named intermediates only.
        output_buffers: as in `InlineWhereSound`, for the named intermediates only.
    """

    intermediates: tuple[str, ...] = ()
    max_distinct_offsets: int = 8
    allow_eager: bool = True
    writeback_retarget: bool = True
    output_buffers: bool = True

    @property
    def pinned(self) -> Optional[tuple[str, ...]]:
        """`intermediates`: the only ones this policy touches."""
        return tuple(self.intermediates)

    def decide(self, sdfg: dace.SDFG, candidate: InlineCandidate) -> Decision:
        """Accept a candidate of a named intermediate within `max_distinct_offsets`.

        Args:
            sdfg: the SDFG the candidate is in.
            candidate: the sound candidate.

        Returns:
            The decision; `force_lazy` unless `allow_eager`.
        """
        name = candidate.intermediate.data
        if name not in self.intermediates:
            return Decision(False, f"{name} is not among the intermediates to inline")
        too_many = too_many_copies(candidate, self.max_distinct_offsets)
        if too_many:
            return Decision(False, too_many)
        return Decision(True, f"{name} is named", force_lazy=not self.allow_eager)
