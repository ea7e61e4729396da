"""`explain()`: which temporaries of a gt4py program the stock dace backend keeps, and
whether the library removes each one, and why not.

The program is lowered twice the way gt4py's dace backend does it, without compiling
(`integration.capture`; argument types from its signature): once stock, once with the
library's hooks (the backends' path: GTIR annotations, the target's cost model). The
temporaries are the two-dimensional transients of the top-level SDFG at the end of
gt4py's top-level stage (`TopLevelDataFlowPost`) and in the final SDFG; each one the
stock build keeps is joined, by name, with the library's decisions about it (an
analysis decline, or the cost model's figures).
"""

from __future__ import annotations

import copy
import dataclasses
import importlib
import os
import re
from typing import Any, Mapping, Optional, Union

import dace
from gt4py.next import errors as gtx_errors
from gt4py.next.program_processors.runners.dace.transformations.auto_optimize import (
    GT4PyAutoOptHook,
)

from gt4py_dace_xforms.integration.capture import OPTIMIZED, capture_stages, lower_to_gtir
from gt4py_dace_xforms.integration.hooks import default_policy, fuse_states, optimization_hooks
from gt4py_dace_xforms.policy import InlinePolicy
from gt4py_dace_xforms.report import NO_COPY_MODES, InlineRecord, InlineReport
from gt4py_dace_xforms.tools import programs
from gt4py_dace_xforms.tools.compare import two_d_transients
from gt4py_dace_xforms.transformations.inline_fusion_pass import gt_inline_intermediates


_STEP = (GT4PyAutoOptHook.TopLevelDataFlowStep, 1)


class ProgramError(ValueError):
    """gt4py rejects the program itself (a DSL error): the user's input, not a failure here."""


_POST = (GT4PyAutoOptHook.TopLevelDataFlowPost, 1)


@dataclasses.dataclass
class Temporary:
    """One two-dimensional transient the stock build keeps (or one only the library's has)."""

    name: str
    stock: bool  # kept by the stock build (at Post or in the final SDFG)
    library: bool  # kept by the library's build
    records: list[InlineRecord]  # the library's final decision per consumer
    retargeted: bool = False  # its writers now write its write-back target (docs/writeback.md)

    @property
    def status(self) -> str:
        """ "kept", "removed" or "library only": what the library's build does with the temporary."""
        if not self.stock:
            return "library only"
        return "kept" if self.library else "removed"

    @property
    def why(self) -> str:
        """What the library decided about it, in one line."""
        if not self.stock:
            return "not in the stock build (gt4py's passes took another course after an inline)"
        applied = sorted(
            {r.consumer for r in self.records if r.applied and r.mode not in NO_COPY_MODES}
        )
        tails = [r.reason for r in self.records if r.applied and r.mode == "sibling_tail"]
        in_place = sorted({r.consumer for r in self.records if r.applied and r.mode == "in_place"})
        swept = sorted({r.consumer for r in self.records if r.applied and r.mode == "sweep_pair"})
        windowed = sorted({r.consumer for r in self.records if r.applied and r.mode == "window"})
        outputs = sorted(
            {r.consumer for r in self.records if r.applied and r.mode == "output_buffer"}
        )
        reasons: dict[str, list[str]] = {}
        for r in self.records:
            if not r.applied:
                reasons.setdefault(r.reason, []).append(r.consumer)
        parts = [f"inlined into {', '.join(applied)}"] if applied else []
        parts += [tails[-1]] if tails else []
        parts += (
            [f"windowed in {', '.join(windowed)} (each level evaluated once, in a K sweep)"]
            if windowed
            else []
        )
        parts += (
            [
                f"replaced by the output {', '.join(outputs)} it was copied into (output as buffer, nothing "
                "recomputed)"
            ]
            if outputs
            else []
        )
        parts += (
            [
                f"a column buffer of {', '.join(swept)} (sweep pair: written and read back in one iteration, "
                "nothing recomputed)"
            ]
            if swept
            else []
        )
        parts += (
            [
                f"folded into {', '.join(in_place)}, updated in place (its copies saved, nothing "
                "recomputed)"
            ]
            if in_place
            else []
        )
        if self.retargeted:
            parts.append("its writers write the output it was copied into (retargeted)")
        parts += [
            f"declined for {', '.join(sorted(set(c)))}: {reason}" for reason, c in reasons.items()
        ]
        if not self.library:
            if (applied or windowed or outputs or swept or in_place) and not reasons:
                return "; ".join(p for p in parts if not p.startswith("declined"))
            return "; ".join(parts) if parts else "gone after gt4py's passes in the library's build"
        if not self.records:
            return "no candidate: no top-level Map reads it where the library's pass runs"
        return "; ".join(parts)


def final_decisions(report: InlineReport) -> list[InlineRecord]:
    """The last record per (intermediate, consumer) over all calls of the pass (gt4py calls
    it once per round of its top-level stage; later calls repeat earlier declines).

    Args:
        report: the inline pass's report.

    Returns:
        the records.
    """
    last: dict[tuple[str, str], InlineRecord] = {}
    for r in report.records:
        if r.applied or not last.get((r.intermediate, r.consumer), r).applied:
            last[(r.intermediate, r.consumer)] = r
    return list(last.values())


@dataclasses.dataclass
class Explanation:
    """What `explain` found for one program: every 2-D temporary stock and the library keep, with
    the reasons, the report and the SDFGs before and after."""

    program: str
    target: str
    offsets: list[str]
    temporaries: list[Temporary]
    report: InlineReport
    counts: dict[str, int]  # "post_stock", "post_library", "final_stock", "final_library"
    stock_error: Optional[str] = None
    before: Optional[dace.SDFG] = None  # where the library's pass first runs
    after: Optional[dace.SDFG] = None  # the same, after the pass
    static: dict[str, Any] = dataclasses.field(
        default_factory=dict
    )  # static arguments lowered with
    layout: str = ""  # the named layout (tools/layouts.py) they come from, if one

    def text(self) -> str:
        """The explanation as text: the temporaries, kept or removed and why, and the counts.

        Returns:
            the text.
        """
        c = self.counts
        grid = f"offsets {', '.join(self.offsets)}" if self.offsets else "no neighbor offsets"
        lines = [f"{self.program} ({self.target}, {grid}), lowered without compiling"]
        if self.static:
            where = f", layout {self.layout}" if self.layout else ""
            lines.append(
                f"static arguments (as icon4py's setup_program compiles them{where}): "
                + ", ".join(f"{k}={v}" for k, v in self.static.items())
            )
        if self.stock_error:
            lines.append(f"stock backend FAILS: {self.stock_error}")
            lines.append(
                f"library: {c['post_library']} two-dimensional temporaries after gt4py's top-level stage, "
                f"{c['final_library']} in the final SDFG"
            )
        else:
            lines.append(
                f"two-dimensional temporaries after gt4py's top-level stage: stock {c['post_stock']}, "
                f"library {c['post_library']}; in the final SDFG: stock {c['final_stock']}, "
                f"library {c['final_library']}"
            )
        lines.append("")
        rows = [(t.name, t.status, t.why) for t in self.temporaries]
        if rows:
            head = ("temporary", "library", "why")
            widths = [max(len(r[i]) for r in [*rows, head]) for i in range(2)]
            fmt = "  ".join(f"{{:<{w}}}" for w in widths) + "  {}"
            lines += [fmt.format(*head), fmt.format(*("-" * w for w in widths), "---")]
            lines += [fmt.format(*r) for r in rows]
        elif not self.stock_error:
            lines.append("the stock backend keeps no two-dimensional temporary: nothing to remove")
        if self.report.races:
            lines += [
                "",
                "gt4py's SDFG accesses these arrays in an undefined order; the library declines every "
                "rewrite in those states or on those arrays (docs/races.md):",
            ]
            lines += [f"  {r}" for r in self.report.races]
        if self.report.failures:
            lines += ["", "the library's pass FAILED and was undone (docs/failsafe.md):"]
            lines += [f"  {f}" for f in self.report.failures]
        if self.report.records:
            final = InlineReport(final_decisions(self.report))
            lines += [
                "",
                "the library's decisions (last one per intermediate and consumer):",
                final.table(),
            ]
            figures = final.cost_lines()
            if figures:
                lines += [f"cost model ({self.target}):", *figures]
        return "\n".join(lines)


def resolve_grid(spec: Optional[str]) -> Any:
    """`--offset-provider`: "simple" (icon4py's simple test grid) or `MODULE:NAME` naming
    a grid (with `.connectivities`), a mapping, or a function returning one.

    Args:
        spec: "simple", `MODULE:NAME` or None.

    Returns:
        the grid, or None.

    Raises:
        ValueError: a spec that names no grid.
    """
    if spec is None:
        return None
    if spec == "simple":
        try:
            from icon4py.model.common.grid import simple
        except ImportError as err:
            raise ValueError(
                f"--offset-provider simple: cannot import icon4py's simple grid ({err})"
            ) from None
        return simple.simple_grid()
    module, sep, name = spec.partition(":")
    if not sep or not module or not name:
        raise ValueError(f"offset provider {spec!r}: expected 'simple' or MODULE:NAME")
    try:
        obj = getattr(importlib.import_module(module), name)
    except ImportError as err:
        raise ValueError(f"{module}: cannot import ({err})") from None
    except AttributeError:
        raise ValueError(f"{spec}: module has no attribute {name!r}") from None
    if callable(obj) and not hasattr(obj, "connectivities"):
        obj = obj()
    if not (hasattr(obj, "connectivities") or isinstance(obj, Mapping)):
        raise ValueError(f"{spec}: neither a grid (with .connectivities) nor a mapping of offsets")
    return obj


def offset_provider(program: Any, grid: Any) -> dict[str, Any]:
    """Tables for the offsets `program` uses, from `grid`; a ValueError saying what to pass
    when it needs one and `grid` is None.

    Args:
        program: the `gtx.program`.
        grid: the grid (None: none).

    Returns:
        offset name -> connectivity.

    Raises:
        ValueError: where the program needs tables and `grid` is None.
    """
    needed = programs.used_offsets(program)
    if needed and grid is None:
        raise ValueError(
            f"the program uses neighbor offsets {needed}: give a grid "
            "(--offset-provider simple for icon4py's test grid, or MODULE:NAME)"
        )
    return programs.offset_provider_for(program, grid) if needed else {}


def _natural(name: str) -> tuple:
    """gtir_tmp_9 before gtir_tmp_10."""
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name))


def _records_of(name: str, by_name: dict) -> list:
    """The decisions about `name`; for a piece gt4py split off an array after the
    library's pass (`X_split_0`, its `SplitAccessNode`), those about `X`."""
    own = by_name.get(name)
    if own:
        return own
    m = re.fullmatch(r"(.+)_split_\d+", name)
    return by_name.get(m.group(1), []) if m else []


def explain(
    program: Union[str, Any],
    *,
    target: str = "cpu",
    grid: Any = None,
    policy: Optional[InlinePolicy] = None,
    static_args: Optional[Mapping[str, Any]] = None,
) -> Explanation:
    """Lower `program` (a `gtx.program` or "MODULE:NAME") stock and with the library, for
    `target` ("cpu" or "gpu"), and explain every two-dimensional temporary.

    `grid`: neighbor tables for programs that shift by horizontal offsets (a grid with
    `.connectivities` or a mapping); required exactly when the program uses some.
    `policy`: the library's policy (default: the target's `CostModel`).
    `static_args`: scalar parameters lowered as constants (name -> value), as icon4py's
    `setup_program` compiles them (`tools.static_values.program_static_values` gives the
    model's); None: the symbolic build.
    ValueError (one line) for a bad program name, a missing grid or connectivity;
    `ProgramError` (a ValueError) if gt4py's frontend rejects the program.

    Args:
        program: a `gtx.program` or "MODULE:NAME".
        target: "cpu" or "gpu".
        grid: the grid for its offsets.
        policy: the inline policy (None: the target's cost model).
        static_args: scalar parameters compiled as constants.

    Returns:
        the `Explanation`.

    Raises:
        ValueError: an unknown target.
        ProgramError: where gt4py rejects the program.
    """
    if target not in ("cpu", "gpu"):
        raise ValueError(f"target must be 'cpu' or 'gpu', not {target!r}")
    gpu = target == "gpu"
    if isinstance(program, str):
        name = program
        program = programs.load_program(program)
    else:
        name = getattr(program.definition_stage.definition, "__name__", "program")
    provider = offset_provider(program, grid)
    policy = policy or default_policy(gpu)
    try:
        lower_to_gtir(
            program, None, provider, static_args=static_args
        )  # gt4py's frontend: type errors
    except gtx_errors.DSLError as err:
        lines = str(err).strip().splitlines()
        raise ProgramError(
            f"gt4py rejects the program: {lines[0] if lines else type(err).__name__}"
        ) from None

    stock_error = None
    try:
        stock = capture_stages(
            program,
            [_POST, OPTIMIZED],
            offset_provider=provider,
            gpu=gpu,
            annotate=False,
            static_args=static_args,
        )
    except Exception as err:  # noqa: BLE001  # gt4py's own failure is part of the answer
        stock, stock_error = (
            {},
            f"{type(err).__name__}: {str(err).strip().splitlines()[0] if str(err).strip() else ''}",
        )
    reports: list[InlineReport] = []
    hooks = optimization_hooks(policy, gpu=gpu, reports=reports)
    library = capture_stages(
        program,
        [_STEP, _POST, OPTIMIZED],
        offset_provider=provider,
        gpu=gpu,
        optimization_hooks=hooks,
        static_args=static_args,
    )
    report = InlineReport()
    for r in reports:
        report.extend(r)

    def kept(taken) -> set[str]:
        return (
            set(two_d_transients(taken[_POST])) | set(two_d_transients(taken[OPTIMIZED]))
            if taken
            else set()
        )

    stock_kept, lib_kept = kept(stock), kept(library)
    by_name: dict[str, list[InlineRecord]] = {}
    for rec in final_decisions(report):
        by_name.setdefault(rec.intermediate, []).append(rec)
    retargeted = set(report.writebacks_retargeted)
    temporaries = [
        Temporary(
            tname,
            tname in stock_kept,
            tname in lib_kept,
            _records_of(tname, by_name),
            tname in retargeted,
        )
        for tname in sorted(stock_kept | lib_kept, key=_natural)
    ]
    counts = {
        "post_stock": len(two_d_transients(stock[_POST])) if stock else 0,
        "final_stock": len(two_d_transients(stock[OPTIMIZED])) if stock else 0,
        "post_library": len(two_d_transients(library[_POST])),
        "final_library": len(two_d_transients(library[OPTIMIZED])),
    }
    before = library.get(_STEP)
    after = None
    if before is not None:
        after = copy.deepcopy(before)
        fuse_states(after)  # as the hook does first
        gt_inline_intermediates(after, policy=policy, validate=False)
    return Explanation(
        name,
        target,
        programs.used_offsets(program),
        temporaries,
        report,
        counts,
        stock_error,
        before,
        after,
        dict(static_args or {}),
    )


def write_sdfgs(expl: Explanation, prefix: str) -> list[str]:
    """`PREFIX.before.sdfg` (where the library's pass first runs in gt_auto_optimize: open
    it in the viewer and apply InlineFuser by hand) and `PREFIX.after.sdfg` (the same after
    the pass). Returns the paths written.

    Args:
        expl: the explanation.
        prefix: the files' path prefix.

    Returns:
        the paths written.
    """
    written = []
    for label, sdfg in (("before", expl.before), ("after", expl.after)):
        if sdfg is None:
            continue
        path = f"{prefix}.{label}.sdfg"
        sdfg.save(path)
        written.append(os.path.abspath(path))
    return written
