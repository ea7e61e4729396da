"""`InlineReport`: what the inlining pass decided for every candidate read, and why."""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import pickle
import time
import uuid
from typing import Any, Callable, Optional


#: Record modes of rewrites that make no producer copies (the rest inline one per shift).
NO_COPY_MODES = (
    "window",
    "output_buffer",
    "sweep_pair",
    "in_place",
    "sibling_tail",
    "copy_into_readers",
    "merged_fragments",
)


@dataclasses.dataclass(frozen=True)
class InlineRecord:
    """One decision about one (intermediate, consumer Map) pair."""

    state: str
    intermediate: str
    consumer: str
    shifts: tuple[tuple[str, ...], ...]
    applied: bool
    reason: str
    removed_intermediate: bool = False
    figures: Optional[dict] = None
    #: "single" (one producer), "lazy" or "eager" (concat mode), "selected" (written in
    #: the branches of an if/else), "window" (swept in K by `VerticalWindow`, no copies),
    #: "output_buffer" (replaced by the output it was copied into, `OutputAsBuffer`; the
    #: consumer is that output), "sweep_pair" (a column buffer of its reader Map,
    #: `SweepPairFusion`; no copies), "in_place" (folded into the array it is that array
    #: updated pointwise, `InPlaceUpdate`; the consumer is that array), "sibling_tail" (its
    #: last operations split off its Map to read another output of it, so that its readers
    #: inline only those, `gt_split_sibling_tails`; the consumer is the Map), "copy_into_readers"
    #: (a copy into this array written by the Maps reading its source, `CopyIntoReaders`; the
    #: consumer names those Maps), "merged_fragments" (its writers, the pieces of one split
    #: Map, merged into one, `gt_merge_split_fragments`; the consumer is the merged Map);
    #: empty if declined.
    mode: str = ""

    def to_json(self) -> dict:
        """The record as JSON-serialisable data.

        Returns:
            Its fields by name (`dataclasses.asdict`), `shifts` as lists of lists.
        """
        d = dataclasses.asdict(self)
        d["shifts"] = [list(s) for s in self.shifts]
        return d


@dataclasses.dataclass
class InlineReport:
    """What one run of a pass of the library did: every `gt_*` pass returns one.

    `records` holds one `InlineRecord` per decision, in the order taken; the other fields
    name what each rewrite changed (empty where that pass did not run). `extend` merges the
    report of another pass into this one, as `gt_inline_intermediates` and the hooks do.

    Attributes:
        records: one record per decision (applied or declined), in order.
        copy_chains_removed: arrays folded by the proven copy-chain removal
            (`gt_remove_copy_chains`).
        writebacks_retargeted: transients whose writers now write their write-back target
            (`gt_retarget_writebacks`).
        windowed: intermediates removed by a vertical window (`gt_apply_vertical_windows`).
        outputs_as_buffers: write-back buffers replaced by the output they were copied into
            (`gt_use_outputs_as_buffers`).
        updated_in_place: concat nodes folded into their source, updated in place
            (`gt_update_in_place`).
        column_reads: (array, nested SDFG) pairs whose memlet now passes one column
            (`gt_narrow_column_reads`), so that gt4py's Map fusion can fuse the column
            producer with the scan.
        sweep_pairs_fused: reader Maps that took in the writers of their column buffers
            (`gt_fuse_sweep_pairs`; the buffers are its records, mode "sweep_pair").
        copied_into_readers: targets of the copies now written by the Maps reading their
            source (`gt_copy_into_readers`).
        sibling_tails_split: intermediates whose writers' tails were split off
            (`gt_split_sibling_tails`).
        fragments_merged: intermediates whose split writers were merged into one Map
            (`gt_merge_split_fragments`).
        split_hazards_trimmed: transients whose writer Map was trimmed to the part read
            (`gt_trim_split_hazards`).
        failures: why the pass failed and was undone by the hook's fail-safe
            (`integration.failsafe`).
        races: unordered conflicting accesses in the SDFG the pass received
            (`analysis.races`); every rewrite touching those arrays was declined.
    """

    records: list[InlineRecord] = dataclasses.field(default_factory=list)
    copy_chains_removed: int = 0
    writebacks_retargeted: list[str] = dataclasses.field(default_factory=list)
    windowed: list[str] = dataclasses.field(default_factory=list)
    outputs_as_buffers: list[str] = dataclasses.field(default_factory=list)
    updated_in_place: list[str] = dataclasses.field(default_factory=list)
    column_reads: list[tuple[str, str]] = dataclasses.field(default_factory=list)
    sweep_pairs_fused: int = 0
    copied_into_readers: list[str] = dataclasses.field(default_factory=list)
    sibling_tails_split: list[str] = dataclasses.field(default_factory=list)
    fragments_merged: list[str] = dataclasses.field(default_factory=list)
    split_hazards_trimmed: list[str] = dataclasses.field(default_factory=list)
    failures: list[str] = dataclasses.field(default_factory=list)
    races: list[str] = dataclasses.field(default_factory=list)

    @property
    def applied(self) -> list[InlineRecord]:
        """The records of the rewrites that were applied, in order."""
        return [r for r in self.records if r.applied]

    @property
    def declined(self) -> list[InlineRecord]:
        """The records of the candidates that were declined, in order."""
        return [r for r in self.records if not r.applied]

    @property
    def inlined(self) -> list[InlineRecord]:
        """The applied records that inlined copies (not the vertical windows)."""
        return [r for r in self.applied if r.mode not in NO_COPY_MODES]

    @property
    def copies(self) -> int:
        """Number of inlined producer copies (one per distinct shift of each inlined record)."""
        return sum(len(r.shifts) for r in self.inlined)

    def add(self, record: InlineRecord) -> None:
        """Append one decision to `records`.

        Args:
            record: the decision.
        """
        self.records.append(record)

    def extend(self, other: "InlineReport") -> "InlineReport":
        """Append `other`'s records and changes to this report (races once each).

        Args:
            other: the report of a later pass run.

        Returns:
            This report, for chaining.
        """
        self.records.extend(other.records)
        self.copy_chains_removed += other.copy_chains_removed
        self.writebacks_retargeted.extend(other.writebacks_retargeted)
        self.failures.extend(other.failures)
        self.windowed.extend(other.windowed)
        self.outputs_as_buffers.extend(other.outputs_as_buffers)
        self.updated_in_place.extend(other.updated_in_place)
        self.column_reads.extend(other.column_reads)
        self.sweep_pairs_fused += other.sweep_pairs_fused
        self.copied_into_readers.extend(other.copied_into_readers)
        self.sibling_tails_split.extend(other.sibling_tails_split)
        self.fragments_merged.extend(other.fragments_merged)
        self.split_hazards_trimmed.extend(other.split_hazards_trimmed)
        self.races.extend(r for r in other.races if r not in self.races)
        return self

    def to_json(self) -> list[dict]:
        """The records as JSON-serialisable data (the other fields are not included).

        Returns:
            `InlineRecord.to_json` of each record, in order.
        """
        return [r.to_json() for r in self.records]

    def dumps(self) -> str:
        """The records as a JSON text.

        Returns:
            `to_json()` dumped with an indent of 2.
        """
        return json.dumps(self.to_json(), indent=2)

    def table(self) -> str:
        """A fixed-width table, one line per record.

        Returns:
            The table's lines joined by newlines: a header, a rule, a row per record
            (intermediate, consumer, shifts, decision), then a line per window, output as
            buffer, in-place update, column read, copy into readers, retargeted write-back,
            trimmed writer, race and failure.
        """
        head = ("intermediate", "consumer", "shifts", "decision")
        rows = [
            (
                r.intermediate,
                r.consumer,
                " ".join("(" + ",".join(s) + ")" for s in r.shifts) or "-",
                (
                    "applied"
                    + (f" {r.mode}" if r.mode else "")
                    + (", removed" if r.removed_intermediate else ", kept")
                )
                if r.applied
                else "declined: " + r.reason,
            )
            for r in self.records
        ]
        widths = [max(len(str(x)) for x in col) for col in zip(head, *rows)]
        widths[-1] = len(head[-1])
        fmt = "  ".join(f"{{:<{w}}}" for w in widths)
        lines = [fmt.format(*head), fmt.format(*("-" * w for w in widths))]
        lines += [fmt.format(*row) for row in rows]
        lines += [f"windowed (one evaluation per level, in a K sweep): {w}" for w in self.windowed]
        lines += [
            f"output as buffer (the copy saved, nothing recomputed): {b}"
            for b in self.outputs_as_buffers
        ]
        lines += [
            f"updated in place (its copies saved, nothing recomputed): {b}"
            for b in self.updated_in_place
        ]
        lines += [
            f"column read (the scan gets one column of it): {a} in {n}"
            for a, n in self.column_reads
        ]
        lines += [
            f"copy written by its readers (its read of the source saved): {c}"
            for c in self.copied_into_readers
        ]
        lines += [
            f"write-back retargeted (its writers write the output): {w}"
            for w in self.writebacks_retargeted
        ]
        lines += [
            f"writer trimmed to the part read (gt4py's MapSplitter): {t}"
            for t in self.split_hazards_trimmed
        ]
        lines += [f"unordered access, left as it is: {r}" for r in self.races]
        lines += [f"FAILED and undone: {f}" for f in self.failures]
        return "\n".join(lines)

    def cost_lines(self) -> list[str]:
        """One line per record with cost-model figures: the decision and what it weighed.

        Returns:
            The lines, in record order; records without `figures` have none.
        """
        lines = []
        for r in self.records:
            if not r.figures:
                continue
            f = r.figures
            if "output_buffer_saved_bytes" in f:
                saved = f["output_buffer_saved_bytes"]
                saved = f"{saved:.3g}" if isinstance(saved, float) else saved
                verdict = "output as buffer" if r.applied else "keep"
                lines.append(
                    f"  {r.intermediate} -> {r.consumer}: {verdict}; saves {saved} B of copy traffic, recomputes nothing"
                )
                continue
            if "sweep_pair_saved_bytes" in f:
                gpu = (
                    f"; on the GPU a local array per thread, {f['gpu_threads_per_sm']} threads per SM hold "
                    f"{f['gpu_column_bytes_per_sm'] / 1024:.0f} of the L1's {f['gpu_l1_bytes'] / 1024:.0f} KiB"
                    if "gpu_threads_per_sm" in f
                    else ""
                )
                lines.append(
                    f"  {r.intermediate} -> {r.consumer}: {'column buffer' if r.applied else 'keep'}; saves "
                    f"{f['sweep_pair_saved_bytes']:.3g} B, a column of {f['sweep_pair_column_bytes']:.3g} B "
                    f"per iteration{gpu}, recomputes nothing"
                )
                continue
            if "window_width" in f:
                lines.append(
                    f"  {r.intermediate} -> {r.consumer}: {'window' if r.applied else 'no window'}; width "
                    f"{f['window_width']}, saves {f['window_saved_bytes']:.3g} B, re-evaluates "
                    f"{f['window_fill_points']:.3g} fill points ({f['window_extra_ops']:.3g} extra ops; "
                    f"inlined: {f['inline_copies']} copies)"
                )
                continue
            if "saved_bytes" not in f:
                # (A record of a kind this table has no line for: its figures as they are, not a crash.)
                lines.append(
                    f"  {r.intermediate} -> {r.consumer}: {'applied' if r.applied else 'keep'}; "
                    + ", ".join(
                        f"{k} {v:.3g}" if isinstance(v, float) else f"{k} {v}"
                        for k, v in sorted(f.items())
                    )
                )
                continue
            lines.append(
                f"  {r.intermediate} -> {r.consumer}: {'inline' if r.applied else 'keep'}; "
                f"saves {f['saved_bytes']:.3g} B, extra loads {f['extra_load_bytes']:.3g} B, "
                f"extra work {f['extra_work_bytes']:.3g} B ({f['copies']} copies x {f['ops_per_copy']:.0f} ops)"
                + (
                    f"; with all {f['group_size']} readers: saves {f['group_saved_bytes']:.3g} B, "
                    f"extra work {f['group_extra_work_bytes']:.3g} B"
                    if "group_size" in f
                    else ""
                )
                + (f"; assumed {', '.join(f['assumed'])}" if f.get("assumed") else "")
            )
        return lines

    def __str__(self) -> str:
        return self.table()


def write_new_file(folder: str, suffix: str, write: Callable[[pathlib.Path], Any]) -> pathlib.Path:
    """A new file in `folder` (made if missing) written by `write(path)`, for several
    processes at once: named by time, process and a random part, so names sort in the
    order written; written under a temporary name and renamed, so that readers never see
    a partial file.

    Args:
        folder: the folder (made, with its parents, if missing).
        suffix: the file name's ending, dot included (".report").
        write: writes the file at the path it is given.

    Returns:
        The new file's path.
    """
    where = pathlib.Path(folder)
    where.mkdir(parents=True, exist_ok=True)
    name = f"{time.time_ns():020d}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    tmp = where / f".{name}.tmp"
    write(tmp)
    return tmp.rename(where / f"{name}{suffix}")


@dataclasses.dataclass(frozen=True)
class ReportFolder:
    """A place for reports that pickles: hooks running in gt4py's build worker processes
    append each report as a file of its own in `path`, and the process that made the folder
    reads them back in the order they were written (`read`). Use it where a list would stay
    behind in the worker (`integration.hooks.LibraryHook.reports`)."""

    path: str

    def append(self, report: "InlineReport") -> None:
        """Write `report` (pickled) as a new file in `path`.

        Args:
            report: the report.
        """
        write_new_file(self.path, ".report", lambda path: path.write_bytes(pickle.dumps(report)))

    def read(self) -> list["InlineReport"]:
        """The reports appended so far, by any process.

        Returns:
            The reports in the order they were written; empty if `path` does not exist.
        """
        folder = pathlib.Path(self.path)
        if not folder.is_dir():
            return []
        return [pickle.loads(p.read_bytes()) for p in sorted(folder.glob("*.report"))]

    def __len__(self) -> int:
        return len(self.read())
