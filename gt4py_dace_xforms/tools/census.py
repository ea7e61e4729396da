"""The census: how much of a set of gt4py programs the inliner reaches.

For each program, lowered as gt4py's DaCe backend does (no compilation), `census_program()`
takes the SDFG at the first `TopLevelDataFlowStep` of `gt_auto_optimize` (where the
library's hook runs) and counts every candidate (intermediate, consumer Map) read
(`find_candidates`), how many the analysis proves sound, why the others are declined, and
how many "inline everything sound" and the cost model apply there. It then runs
`gt_auto_optimize` three times (stock, the library's default backend, everything sound)
and counts the two-dimensional transients each leaves in the top-level SDFG at the end of
the top-level stage (`TopLevelDataFlowPost`, after gt4py's `concat_where` replacement)
and at the end (what is compiled).
"""

from __future__ import annotations

import collections
import copy
import dataclasses
import json
import multiprocessing
import re
import time
from concurrent import futures
from typing import Any, Callable, Iterable, Optional, TypeVar, Union

from gt4py.next.program_processors.runners.dace.transformations.auto_optimize import (
    GT4PyAutoOptHook,
)

from gt4py_dace_xforms.analysis.candidate import analyse_candidate
from gt4py_dace_xforms.analysis.producer import Decline
from gt4py_dace_xforms.analysis.races import unordered_accesses
from gt4py_dace_xforms.analysis.window import analyse_window
from gt4py_dace_xforms.integration.capture import OPTIMIZED, Capture, capture_stages
from gt4py_dace_xforms.integration.hooks import optimization_hooks
from gt4py_dace_xforms.policy import CostModel, InlinePolicy, InlineWhereSound
from gt4py_dace_xforms.tools.compare import two_d_transients
from gt4py_dace_xforms.tools.programs import ProgramRef, offset_provider_for
from gt4py_dace_xforms.transformations.inline_fusion_pass import (
    find_candidates,
    gt_inline_intermediates,
)


_STEP = (GT4PyAutoOptHook.TopLevelDataFlowStep, 1)
_POST = (GT4PyAutoOptHook.TopLevelDataFlowPost, 1)
T = TypeVar("T")


@dataclasses.dataclass
class ProgramCensus:
    """The census of one program (`error` set if it could not be lowered)."""

    program: str
    candidates: int = 0
    sound: int = 0
    applied_sound: int = 0
    applied_model: int = 0
    #: write-back buffers whose writers now write the output (docs/writeback.md), at the first Step
    retargeted_sound: int = 0
    retargeted_model: int = 0
    #: write-back buffers replaced by their output (docs/writeback.md), at the first Step
    outbuf_sound: int = 0
    outbuf_model: int = 0
    #: intermediates the cost model sweeps in K (vertical windows) at the first Step
    windowed_model: int = 0
    #: intermediates the cost model evaluates in a scan's loop as a scan-input set
    #: (docs/scans.md) at the first Step
    scan_inputs_model: int = 0
    transients_stock: int = 0
    transients_model: int = 0
    transients_sound: int = 0
    final_stock: int = 0
    final_model: int = 0
    final_sound: int = 0
    #: analysis decline reason (names and numbers abstracted) -> count
    declines: dict[str, int] = dataclasses.field(default_factory=dict)
    #: declines left after the cost-model pass at the first Step (analysis or policy),
    #: reason (abstracted) -> count
    model_declines: dict[str, int] = dataclasses.field(default_factory=dict)
    #: why no window takes a sound candidate the cost model leaves at the first Step,
    #: reason (abstracted) -> count
    window_declines: dict[str, int] = dataclasses.field(default_factory=dict)
    #: arrays gt4py's SDFG accesses in an undefined order at the first Step (`analysis.races`),
    #: as "array@state"; the library declines every rewrite there
    racy: list[str] = dataclasses.field(default_factory=list)
    #: the 2-D transients at `TopLevelDataFlowPost`: stock's, and the default backend's
    kept_stock: list[str] = dataclasses.field(default_factory=list)
    kept_model: list[str] = dataclasses.field(default_factory=list)
    #: static arguments the program was lowered with (name -> value; empty: symbolic build)
    static: dict[str, Any] = dataclasses.field(default_factory=dict)
    #: the named layout the static arguments and neighbor tables come from (`tools.layouts`;
    #: empty: `tools.static_values`' global one-rank values and random tables)
    layout: str = ""
    seconds: float = 0.0
    error: Optional[str] = None

    @property
    def short_name(self) -> str:
        """The program's name without its module path."""
        return self.program.rpartition(":")[2]


def reason_class(reason: str) -> str:
    """A decline reason with its data names, symbols and numbers abstracted, so that
    equal causes count together.

    Args:
        reason: the decline reason.

    Returns:
        the abstracted reason.
    """
    text = re.sub(r"'[^']*'", "X", reason)
    text = re.sub(r"\[[^\]]*\]", "[..]", text)
    text = re.sub(r"\([^()]*\)$", "", text).strip()
    text = re.sub(r"\b\d+(\.\d+)?(e[+-]?\d+)?\b", "N", text)
    return text.split(": ", 1)[0] if text.startswith("analysis failed") else text


def _count_transients(
    program, provider, hooks, final: bool, static_args=None
) -> tuple[list[str], int]:
    """2-D transients at `TopLevelDataFlowPost` (names) and (`final`, else -1) how many in
    the final SDFG."""
    taken = capture_stages(
        program,
        [_POST] + ([OPTIMIZED] if final else []),
        offset_provider=provider,
        optimization_hooks=hooks,
        static_args=static_args,
    )
    return two_d_transients(taken[_POST]), len(two_d_transients(taken[OPTIMIZED])) if final else -1


def census_program(
    ref: ProgramRef,
    *,
    grid: Any = None,
    policy: Optional[InlinePolicy] = None,
    transients: bool = True,
    final: bool = False,
    static: bool = False,
    layout: Optional[str] = None,
) -> ProgramCensus:
    """The census of one program (never raises: a failure is recorded in `error`).

    `transients`: run the top-level stage stock, with the cost model and with everything
    sound, and count 2-D transients at its end; `final`: run those to the end of
    `gt_auto_optimize` and count there too (about twice the time). `static`: lower with
    the integer and boolean parameters as static arguments, as icon4py's model run
    compiles them (`tools.static_values`: a global grid on one node, 80 levels; without
    `grid`, neighbor tables of that grid's sizes), or (`layout`, a `tools.layouts` name)
    with that layout's bounds and its generated grid's tables.

    Args:
        ref: the program.
        grid: the grid for its offsets (None: a generated one).
        policy: the inline policy (None: the CPU cost model).
        transients: also count 2-D transients stock, with the policy and with everything sound.
        final: also count them at the end of `gt_auto_optimize`.
        static: lower with static arguments, as a model run compiles them.
        layout: the layout of the static arguments (None: global one-rank values).

    Returns:
        the `ProgramCensus`.
    """
    result = ProgramCensus(ref.spec, layout=(layout or "") if static else "")
    start = time.perf_counter()
    try:
        program = ref.load()
        if static:
            from gt4py_dace_xforms.tools.static_values import (
                program_static_values,
                static_offset_provider,
            )

            result.static = program_static_values(program, layout=layout)
            provider = (
                static_offset_provider(program, layout=layout)
                if grid is None
                else offset_provider_for(program, grid)
            )
        else:
            provider = offset_provider_for(program, grid)
        static_args = result.static or None
        extra: list[Capture] = ([_POST, OPTIMIZED] if final else [_POST]) if transients else []
        taken = capture_stages(
            program, [_STEP, *extra], offset_provider=provider, static_args=static_args
        )
        step = taken[_STEP]
        result.racy = [f"{r.data}@{r.state}" for r in unordered_accesses(step)]
        declines: collections.Counter = collections.Counter()
        for state, node, consumer in find_candidates(step):
            result.candidates += 1
            verdict = analyse_candidate(step, state, node, consumer)
            if isinstance(verdict, Decline):
                declines[reason_class(verdict.reason)] += 1
            else:
                result.sound += 1
        result.declines = dict(declines.most_common())
        sound_report = gt_inline_intermediates(
            copy.deepcopy(step), policy=InlineWhereSound(), validate=False
        )
        result.applied_sound = len(sound_report.applied)
        result.retargeted_sound = len(sound_report.writebacks_retargeted)
        result.outbuf_sound = len(sound_report.outputs_as_buffers)
        model_report = gt_inline_intermediates(
            copy.deepcopy(step), policy=policy or CostModel("cpu"), validate=False
        )
        result.applied_model = len(model_report.applied)
        result.retargeted_model = len(model_report.writebacks_retargeted)
        result.outbuf_model = len(model_report.outputs_as_buffers)
        result.model_declines = dict(
            collections.Counter(reason_class(r.reason) for r in model_report.declined).most_common()
        )
        result.windowed_model = len(model_report.windowed)
        result.scan_inputs_model = sum(
            1 for r in model_report.applied if r.reason.startswith("scan inputs")
        )
        result.window_declines = _window_declines(step, model_report)
        if transients:
            result.kept_stock = two_d_transients(taken[_POST])
            result.transients_stock = len(result.kept_stock)
            result.final_stock = len(two_d_transients(taken[OPTIMIZED])) if final else -1
            result.kept_model, result.final_model = _count_transients(
                program, provider, optimization_hooks(policy), final, static_args
            )
            result.transients_model = len(result.kept_model)
            sound, result.final_sound = _count_transients(
                program, provider, optimization_hooks(InlineWhereSound()), final, static_args
            )
            result.transients_sound = len(sound)
    except Exception as err:  # noqa: BLE001  # one broken program must not end the census
        result.error = (
            f"{type(err).__name__}: {str(err).strip().splitlines()[0] if str(err).strip() else ''}"
        )
    result.seconds = time.perf_counter() - start
    return result


def _window_declines(step, model_report) -> dict[str, int]:
    """Why no window takes each sound candidate whose intermediate the model left in place."""
    kept = {r.intermediate for r in model_report.declined} - {
        r.intermediate for r in model_report.applied
    }
    reasons: collections.Counter = collections.Counter()
    for state, node, consumer in find_candidates(step):
        if node.data not in kept:
            continue
        cand = analyse_candidate(step, state, node, consumer)
        if isinstance(cand, Decline):
            continue
        plan = analyse_window(step, cand)
        reasons[
            reason_class(plan.reason)
            if isinstance(plan, Decline)
            else "a window applies (the model declined it)"
        ] += 1
    return dict(reasons.most_common())


def _census_one(args) -> ProgramCensus:
    ref, transients, final, static, layout = args
    return census_program(ref, transients=transients, final=final, static=static, layout=layout)


def map_programs(
    fn: Callable[[Any], T],
    work: list,
    *,
    jobs: int = 1,
    progress: Optional[Callable[[T], None]] = None,
) -> list[T]:
    """`fn` on every item of `work`, in `jobs` forked processes (results in input order;
    `progress` sees each result as it comes). Shared by the census and its comparison run.

    Args:
        fn: the function, of one item.
        work: the items.
        jobs: processes in parallel.
        progress: called with each result as it arrives.

    Returns:
        the results, in the order of `work`.
    """
    results: list[T] = []
    if jobs <= 1:
        for w in work:
            results.append(fn(w))
            if progress:
                progress(results[-1])
        return results
    with futures.ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("fork")) as pool:
        pending = {pool.submit(fn, w): i for i, w in enumerate(work)}
        done: dict[int, T] = {}
        for fut in futures.as_completed(pending):
            done[pending[fut]] = fut.result()
            if progress:
                progress(done[pending[fut]])
    return [done[i] for i in range(len(work))]


def run_census(
    refs: Iterable[ProgramRef],
    *,
    jobs: int = 1,
    transients: bool = True,
    final: bool = False,
    static: bool = False,
    layout: Optional[str] = None,
    progress: Optional[Callable[[ProgramCensus], None]] = None,
) -> list[ProgramCensus]:
    """`census_program` for every program, in `jobs` processes (results in input order).

    Args:
        refs: the programs.
        jobs: processes in parallel.
        transients: as `census_program`.
        final: as `census_program`.
        static: as `census_program`.
        layout: as `census_program`.
        progress: called with each result as it arrives.

    Returns:
        the censuses, in the order of `refs`.
    """
    work = [(r, transients, final, static, layout) for r in refs]
    return map_programs(_census_one, work, jobs=jobs, progress=progress)


def totals(results: list[ProgramCensus]) -> ProgramCensus:
    """The column sums, and the decline histograms merged, over programs without error.

    Args:
        results: the censuses.

    Returns:
        a `ProgramCensus` holding the sums.
    """
    total = ProgramCensus("TOTAL")
    declines: collections.Counter = collections.Counter()
    model: collections.Counter = collections.Counter()
    windows: collections.Counter = collections.Counter()
    for r in results:
        if r.error:
            continue
        for f in (
            "candidates",
            "sound",
            "applied_sound",
            "applied_model",
            "retargeted_sound",
            "retargeted_model",
            "outbuf_sound",
            "outbuf_model",
            "windowed_model",
            "scan_inputs_model",
            "transients_stock",
            "transients_model",
            "transients_sound",
            "final_stock",
            "final_model",
            "final_sound",
            "seconds",
        ):
            setattr(total, f, getattr(total, f) + getattr(r, f))
        declines.update(r.declines)
        model.update(r.model_declines)
        windows.update(r.window_declines)
        total.racy.extend(f"{r.short_name}:{x}" for x in r.racy)
    if any(r.final_stock < 0 for r in results if not r.error):
        total.final_stock = total.final_model = total.final_sound = -1
    total.declines = dict(declines.most_common())
    total.model_declines = dict(model.most_common())
    total.window_declines = dict(windows.most_common())
    return total


def table(results: list[ProgramCensus]) -> str:
    """The per-program table, the totals, and the decline histograms.

    Args:
        results: the censuses.

    Returns:
        the table's text.
    """
    head = (
        "program",
        "cand",
        "sound",
        "appl sound",
        "appl model",
        "win",
        "scan",
        "retarget model/sound",
        "outbuf model/sound",
        "2-D tr Post stock/model/sound",
        "2-D tr final stock/model/sound",
        "racy",
        "s",
    )
    rows: list[tuple[Union[str, int], ...]] = []
    for r in [*results, totals(results)]:
        if r.error:
            rows.append(
                (
                    r.short_name,
                    "error: " + r.error,
                    *[""] * 10,
                    f"{r.seconds:.0f}",
                )
            )
            continue
        rows.append(
            (
                r.short_name,
                r.candidates,
                r.sound,
                r.applied_sound,
                r.applied_model,
                r.windowed_model,
                r.scan_inputs_model,
                f"{r.retargeted_model}/{r.retargeted_sound}",
                f"{r.outbuf_model}/{r.outbuf_sound}",
                f"{r.transients_stock}/{r.transients_model}/{r.transients_sound}",
                f"{r.final_stock}/{r.final_model}/{r.final_sound}" if r.final_stock >= 0 else "-",
                len(r.racy),
                f"{r.seconds:.0f}",
            )
        )
    widths = [
        max(len(str(x)) for x in col)
        for col in zip(head, *[row for row in rows if not str(row[1]).startswith("error")])
    ]
    fmt = "  ".join(f"{{:<{w}}}" if i == 0 else f"{{:>{w}}}" for i, w in enumerate(widths))
    lines = [fmt.format(*head), fmt.format(*("-" * w for w in widths))]
    for row in rows:
        lines.append(
            f"{row[0]:<{widths[0]}}  {row[1]}"
            if str(row[1]).startswith("error")
            else fmt.format(*row)
        )
    total = totals(results)
    lines += [
        "",
        f"arrays gt4py accesses in an undefined order, left as they are ({len(total.racy)}; docs/races.md):",
    ]
    lines += [f"  {x}" for x in total.racy] or ["  none"]
    lines += ["", f"analysis declines ({sum(total.declines.values())}):"]
    lines += [f"  {n:4d}  {reason}" for reason, n in total.declines.items()]
    lines += [
        "",
        f"declines left by the cost-model pass at the first Step ({sum(total.model_declines.values())}):",
    ]
    lines += [f"  {n:4d}  {reason}" for reason, n in total.model_declines.items()]
    lines += [
        "",
        f"why no vertical window takes the sound candidates the cost model leaves "
        f"({sum(total.window_declines.values())}; docs/vertical_window.md):",
    ]
    lines += [f"  {n:4d}  {reason}" for reason, n in total.window_declines.items()]
    lines += ["", "2-D transients at Post, per program: stock's; the default backend's"]
    for r in results:
        if not r.error and (r.kept_stock or r.kept_model):
            lines.append(
                f"  {r.short_name}: stock {', '.join(r.kept_stock) or '-'}; "
                f"library {', '.join(r.kept_model) or '-'}"
            )
    statics = [r for r in results if r.static]
    if statics:
        lines += ["", static_heading(statics[0].layout)]
        lines += [
            f"  {r.short_name}: " + ", ".join(f"{k}={v}" for k, v in r.static.items())
            for r in statics
        ]
    return "\n".join(lines)


def static_heading(layout: str) -> str:
    """The heading line of a static run's arguments: which layout they are for.

    Args:
        layout: the layout's name.

    Returns:
        the line.
    """
    if not layout:
        return (
            "static arguments (tools/static_values.py: a global grid on one node, 80 levels; "
            "icon4py's configuration defaults):"
        )
    return (
        f"static arguments (layout {layout}: tools/layouts.py, a generated R2B4-size grid; 80 levels; "
        "icon4py's configuration defaults):"
    )


def to_json(results: list[ProgramCensus]) -> str:
    """The censuses and their totals as JSON (`census --json`).

    Args:
        results: the censuses.

    Returns:
        the JSON text.
    """
    rows = [dataclasses.asdict(r) for r in results]
    return json.dumps({"programs": rows, "total": dataclasses.asdict(totals(results))}, indent=2)
