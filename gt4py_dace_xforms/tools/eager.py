"""Per concat node of a program: is evaluating every branch eagerly proven sound, and if not, why.

`eager_rows()` looks at the SDFG where the library's hook runs (the first
`TopLevelDataFlowStep`), finds every concat node (a transient written by several edges in
one state), runs `analyse_candidate` for each top-level Map reading it and reports, per
node, the verdict: eager proven for every reader, or the first reader whose read the
analysis declines, or the branch access that is not proven in bounds
(`analysis.concat.EagerVerdict`), with the annotated domain it was checked against and
what gt4py's domain inference knew for that branch. Nothing is mutated or compiled.
`gt4py-dace-xforms census --eager` prints the table (`table()`) for a list of programs.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import time
from typing import Any, Optional, cast

import dace
from dace.sdfg import nodes as dn

from gt4py_dace_xforms.analysis.candidate import analyse_candidate
from gt4py_dace_xforms.analysis.concat import EagerVerdict
from gt4py_dace_xforms.analysis.producer import Decline
from gt4py_dace_xforms.transformations.inline_fusion_pass import find_candidates


#: Verdict classes, in the order the totals list them.
EAGER = "eager proven"
NO_READER = "no top-level Map reads it"
ANALYSIS = "the read is declined by the analysis (not inlined at all)"
NO_ANNOTATION = "no concat annotation from GTIR (not a concat_where: e.g. a Map gt4py split)"
OTHER_SHAPE = (
    "the concat annotation was recorded for another shape (gt4py rewrote the node's shape)"
)
NOT_SIMPLE = "a branch is not tasklets on single elements"
UNANNOTATED = "field has no GTIR annotation in that dimension"
NEIGHBOR = "field is read through a neighbor table in that dimension (extent unknown)"
TRANSIENT = "transient input: its extent is not proven"
OUTSIDE = "program reads less of the field than the branch does outside its region"


@dataclasses.dataclass
class ConcatRow:
    """One concat node of one program (strings, so that it prints and serializes as is)."""

    program: str
    node: str
    readers: int
    verdict: str  #: one of the classes above
    reason: str = ""  #: the analysis' own words
    access: str = ""  #: branch, data[dim] = index
    needed: str = (
        ""  #: lowest..highest index over the reads (array indices), and the side not proven
    )
    annotated: str = (
        ""  #: the field's annotation in that dimension: covers (program indices), origin
    )
    inferred: str = ""  #: what domain inference says the branch reads there (program indices)
    selected: str = ""  #: where the branch is selected (array indices of the concat node)
    witness: str = ""  #: arguments satisfying every fact the proof had, under which the access is out of bounds


def concat_nodes(sdfg: dace.SDFG) -> list[tuple[dace.SDFGState, dn.AccessNode]]:
    """Every top-level transient AccessNode written by several edges in its state.

    Args:
        sdfg: the SDFG.

    Returns:
        `(state, AccessNode)` per concat node.
    """
    found = []
    for state in sdfg.states():
        scope = state.scope_dict()
        for node in state.data_nodes():
            desc = sdfg.arrays.get(node.data)
            if (
                scope[node] is None
                and desc is not None
                and desc.transient
                and state.in_degree(node) > 1
            ):
                found.append((state, node))
    return found


def _classify(sdfg: dace.SDFG, v: EagerVerdict) -> str:
    if v.sound:
        return EAGER
    reason = cast(str, v.reason)  # not sound: there is a reason
    if v.data is None:
        if "another shape" in reason:
            return OTHER_SHAPE
        return NO_ANNOTATION if "annotation" in reason else NOT_SIMPLE
    if v.bounds is None:
        return NOT_SIMPLE
    if sdfg.arrays[v.data].transient:
        return TRANSIENT
    if v.field is None:
        return UNANNOTATED
    if not v.field.get("covers"):
        return NEIGHBOR
    return OUTSIDE


def _row_from_verdict(sdfg, program: str, node: str, readers: int, v: EagerVerdict) -> ConcatRow:
    row = ConcatRow(program, node, readers, _classify(sdfg, v), v.reason or "")
    if v.data is not None:
        row.access = f"branch {v.branch}: {v.data}[dim {v.dim}] = {v.index}"
    if v.bounds is not None:
        row.needed = (
            f"{v.bounds[0]} .. {v.bounds[1]} of extent {v.extent} ({v.side} end not proven)"
        )
    if v.field is not None:
        covers = v.field.get("covers")
        row.annotated = (
            f"{v.field.get('name')}: [{covers[0]}, {covers[1]}) - {v.field['origin']}"
            if covers
            else f"{v.field.get('name')}: none"
        )
    if v.inferred:
        row.inferred = f"[{v.inferred[0]}, {v.inferred[1]})"
    if v.selected:
        row.selected = f"[{v.selected[0]}, {v.selected[1]})"
    found = v.witness()
    if found:
        row.witness = ", ".join(f"{k}={x}" for k, x in found.items() if k in str(v.margin))
    return row


def eager_rows(sdfg: dace.SDFG, program: str = "") -> list[ConcatRow]:
    """One row per concat node of `sdfg` (see the module docstring). Never mutates.

    Args:
        sdfg: the SDFG at the first `TopLevelDataFlowStep`.
        program: the program's name, for the rows.

    Returns:
        the rows.
    """
    readers: dict[str, list] = collections.defaultdict(list)
    for state, node, consumer in find_candidates(sdfg):
        readers[node.data].append((state, node, consumer))
    rows = []
    for _, node in concat_nodes(sdfg):
        reads = readers.get(node.data, [])
        if not reads:
            rows.append(ConcatRow(program, node.data, 0, NO_READER))
            continue
        worst: Optional[ConcatRow] = None
        for state, inter, consumer in reads:
            result = analyse_candidate(sdfg, state, inter, consumer)
            if isinstance(result, Decline):
                row = ConcatRow(program, node.data, len(reads), ANALYSIS, result.reason)
            elif result.eager_verdict is None:  # one writer in the reader's view: not concat mode
                row = ConcatRow(
                    program, node.data, len(reads), ANALYSIS, "not analysed as a concat node"
                )
            else:
                row = _row_from_verdict(sdfg, program, node.data, len(reads), result.eager_verdict)
            if worst is None or (worst.verdict == EAGER and row.verdict != EAGER):
                worst = row
        rows.append(cast(ConcatRow, worst))  # `reads` is not empty: the loop set it
    return rows


@dataclasses.dataclass
class ProgramEager:
    """One program's concat nodes with their eager verdicts (`eager_program`), or the error that
    stopped it."""

    program: str
    rows: list[ConcatRow] = dataclasses.field(default_factory=list)
    seconds: float = 0.0
    error: Optional[str] = None


def eager_program(ref, *, grid: Any = None) -> ProgramEager:
    """Lower `ref` (a `programs.ProgramRef`) to the first `TopLevelDataFlowStep` and take
    its rows (never raises: a failure is recorded in `error`).

    Args:
        ref: the program.
        grid: the grid (a `tools.grid.Grid`; None: a generated one).

    Returns:
        the `ProgramEager`.
    """
    from gt4py_dace_xforms.integration.capture import capture_stages
    from gt4py_dace_xforms.tools.census import _STEP
    from gt4py_dace_xforms.tools.programs import offset_provider_for

    result = ProgramEager(ref.spec)
    start = time.perf_counter()
    try:
        program = ref.load()
        step = capture_stages(program, [_STEP], offset_provider=offset_provider_for(program, grid))[
            _STEP
        ]
        result.rows = eager_rows(step, ref.spec.rpartition(":")[2])
    except Exception as err:  # noqa: BLE001  # one broken program must not end the report
        result.error = (
            f"{type(err).__name__}: {str(err).strip().splitlines()[0] if str(err).strip() else ''}"
        )
    result.seconds = time.perf_counter() - start
    return result


_ORDER = (
    EAGER,
    NO_READER,
    ANALYSIS,
    NO_ANNOTATION,
    OTHER_SHAPE,
    NOT_SIMPLE,
    UNANNOTATED,
    NEIGHBOR,
    TRANSIENT,
    OUTSIDE,
)


def totals(results: list[ProgramEager]) -> dict[str, int]:
    """How many concat nodes got each verdict, in the table's order (verdicts no node got left
    out).

    Args:
        results: the programs.

    Returns:
        verdict -> count.
    """
    counts = collections.Counter(r.verdict for p in results for r in p.rows)
    return {k: counts[k] for k in _ORDER if counts[k]}


def table(results: list[ProgramEager]) -> str:
    """A markdown table, one row per concat node, then the totals by verdict.

    Args:
        results: the programs.

    Returns:
        the table's text.
    """
    cols = (
        "program",
        "node",
        "readers",
        "verdict",
        "access not proven",
        "needed",
        "annotated covers - origin",
        "inferred for the branch",
        "branch selected",
        "out of bounds for",
    )
    lines = ["| " + " | ".join(cols) + " |", "|" + " --- |" * len(cols)]
    for p in results:
        if p.error:
            lines.append(
                f"| {p.program.rpartition(':')[2]} | error: {p.error} |" + " |" * (len(cols) - 2)
            )
        for r in p.rows:
            verdict = r.verdict if r.verdict != ANALYSIS else f"{r.verdict}: {r.reason}"
            cells = (
                r.program,
                r.node,
                str(r.readers),
                verdict,
                r.access,
                r.needed,
                r.annotated,
                r.inferred,
                r.selected,
                r.witness,
            )
            lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    n = sum(len(p.rows) for p in results)
    lines += [
        "",
        f"concat nodes: {n} in {sum(1 for p in results if not p.error)} programs"
        f" ({sum(1 for p in results if p.error)} could not be lowered)",
    ]
    lines += [f"  {count:4d}  {verdict}" for verdict, count in totals(results).items()]
    shown = sum(1 for p in results for r in p.rows if r.witness)
    lines += [
        f"  of the declined, {shown} with arguments (last column) under which eager reads out of bounds"
    ]
    return "\n".join(lines)


def to_json(results: list[ProgramEager]) -> str:
    """The programs' rows and totals as JSON.

    Args:
        results: the programs.

    Returns:
        the JSON text.
    """
    return json.dumps(
        {"programs": [dataclasses.asdict(p) for p in results], "total": totals(results)}, indent=2
    )
