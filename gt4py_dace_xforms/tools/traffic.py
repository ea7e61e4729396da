"""Where a dycore substep's memory traffic through 2-D transients goes (issue 48, item 3).

For every call of the substep (`tools.substep`) on a layout, the program is lowered static
(the call site's bounds and switches, `SubstepCall.static_values`, as icon4py's
`setup_program` compiles them; no C++ is generated or compiled) twice, as the model builds
it: stock (icon4py's `model_options.get_options` and `model_backends.make_custom_dace_backend`:
its per-program options such as the implicit solvers' scan unrolling and
RemoveAccessNodeCopies hook, unit horizontal stride, zero origin where it asks for it) and
with the library (`integration.icon4py.descriptor_for`: the same options, the library's
hooks, the target's cost model).

**Stage.** Bytes are measured on the SDFG `gt_auto_optimize` returns (the end of the
optimizer: what is compiled and runs), not at `TopLevelDataFlowPost` (where `census`
counts). Each row also says whether the array exists at Post, so the two can be compared.

**Bytes of one array in one call** (`array_traffic`), over the top-level SDFG's states
(nested SDFGs are not entered: a 2-D transient between Maps lives at the top level):

* written: per AccessNode of the array, the sum over its incoming edges of the memlet's
  volume (the elements the edge writes) times the item size; where the volume is dynamic
  or not a number, the written subset's size instead (noted);
* read: per reader, once: the outgoing edges of the array's AccessNodes are grouped by the
  node they lead to (a Map entry, a nested SDFG, a tasklet, another AccessNode: a copy) in
  each state, and each group counts the number of elements of the bounding box of the
  subsets it reads, times the item size. A Map that reads the array at several offsets
  (`t[k]`, `t[k+1]`) counts the box of all of them once, not once per offset: the
  neighbouring offsets are in cache when the next one is read (the memlet's volume, which
  counts every access, is kept in the JSON as `read_accesses`);
* an AccessNode inside a Map scope (rare at the end of the optimizer) counts its memlets
  times the iterations of the enclosing Maps; a state inside a loop or a branch is counted
  once (noted).

A call's bytes are written + read; the substep's are that times the calls the chosen
substep ("later" by default, or "first") makes (`SubstepCall.calls`).

**Library status.** Stock's arrays are matched with the library's final SDFG by name (gt4py
names its transients deterministically for one program): `kept` (the library's build has
it), `removed` (it has not, and a rewrite of the library names it: `InlineReport`'s records
and lists), `removed (no decision of its own)` (gone while the library's build has no
array stock lacks: gt4py's passes took it after another rewrite, or the copy-chain removal
folded it), or `unmatched` (gone while the library's build has arrays stock has not: it may
be one of them under another name; not guessed). Arrays only the library's build has are
listed with their bytes (`library_only`), and count in its measured total.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import time
import warnings
from typing import Any, Callable, Iterable, Optional

import dace
from dace import subsets as dace_subsets, symbolic
from dace.sdfg import nodes as dace_nodes
from gt4py.next.program_processors.runners.dace.transformations.auto_optimize import (
    GT4PyAutoOptHook,
)

from gt4py_dace_xforms.report import InlineRecord, InlineReport


_POST = GT4PyAutoOptHook.TopLevelDataFlowPost
_STEP = GT4PyAutoOptHook.TopLevelDataFlowStep


# --- bytes of one array ---------------------------------------------------------------------------


@dataclasses.dataclass
class ArrayTraffic:
    """The bytes one call moves through one array (`array_traffic`)."""

    name: str
    shape: tuple
    itemsize: int
    written_bytes: int = 0
    read_bytes: int = 0
    writers: int = 0  # incoming edges of its AccessNodes
    readers: int = 0  # distinct nodes reading it (per state)
    read_accesses: int = 0  # the read memlets' volumes, in elements (every access counted)
    in_scope: bool = (
        False  # every AccessNode of it lies inside a Map scope (a per-iteration scratch array)
    )
    notes: list[str] = dataclasses.field(default_factory=list)

    @property
    def total_bytes(self) -> int:
        """Bytes written plus bytes read, per call."""
        return self.written_bytes + self.read_bytes


def _number(expr: Any, symbols: Optional[dict] = None) -> Optional[int]:
    """`expr` (a dace/sympy expression) as an int with `symbols` (name -> value), or None
    if it has free symbols."""
    try:
        value = symbolic.evaluate(expr, symbols or {}) if not isinstance(expr, (int,)) else expr
        return int(value)
    except Exception:  # noqa: BLE001  # a symbol left: not a number
        try:
            return int(expr)
        except Exception:  # noqa: BLE001
            return None


def _scope_iterations(
    state: dace.SDFGState, node: dace_nodes.Node, symbols: Optional[dict] = None
) -> Optional[int]:
    """Product of the iterations of the Maps enclosing `node` (1 at the top level)."""
    total = 1
    scope = state.entry_node(node)
    while scope is not None:
        n = (
            _number(scope.map.range.num_elements(), symbols)
            if isinstance(scope, dace_nodes.MapEntry)
            else None
        )
        if n is None:
            return None
        total *= n
        scope = state.entry_node(scope)
    return total


def _subset_on(memlet: dace.Memlet, name: str, src_side: bool) -> Optional[dace_subsets.Subset]:
    """The subset of `name` a memlet covers (its `subset` if it names `name`, else the other side)."""
    if memlet.data == name:
        return memlet.subset
    return memlet.other_subset if memlet.other_subset is not None else memlet.subset


def array_traffic(sdfg: dace.SDFG, name: str, symbols: Optional[dict] = None) -> ArrayTraffic:
    """The bytes one call of `sdfg` writes to and reads from the array `name`, by the
    rules of the module docstring.

    Args:
        sdfg: the program.
        name: one of its arrays (a transient or an argument).
        symbols: values of symbols left in the subsets (None: none; an argument read
            through a neighbor table has its extent's symbol there).

    Returns:
        Its written and read bytes per call.
    """

    desc = sdfg.arrays[name]
    shape = tuple(
        _number(s, symbols) if _number(s, symbols) is not None else str(s) for s in desc.shape
    )
    out = ArrayTraffic(name, shape, desc.dtype.bytes)
    scoped = []
    for state in sdfg.all_states():
        nodes = [n for n in state.data_nodes() if n.data == name]
        if not nodes:
            continue
        parent = state.parent_graph
        if not isinstance(parent, dace.SDFG):
            out.notes.append(f"in {type(parent).__name__} {parent.label!r}: counted once")
        readers: dict[Any, list] = {}
        for an in nodes:
            iters = _scope_iterations(state, an, symbols)
            scoped.append(state.entry_node(an) is not None)
            if iters is None:
                out.notes.append(f"{state.label}: Map scope of unknown size, not counted")
                continue
            if iters != 1:
                out.notes.append(f"{state.label}: inside a Map scope, x{iters} iterations")
            for e in state.in_edges(an):
                if e.data.is_empty():
                    continue
                out.writers += 1
                sub = _subset_on(e.data, name, False)
                vol = None if e.data.dynamic else _number(e.data.volume, symbols)
                n = (
                    vol
                    if vol is not None
                    else (_number(sub.num_elements(), symbols) if sub is not None else None)
                )
                if vol is None:
                    out.notes.append(
                        f"{state.label}: write of dynamic or symbolic volume, counted as its subset"
                    )
                if n is None:
                    out.notes.append(f"{state.label}: write of unknown size, not counted")
                    continue
                out.written_bytes += n * iters * out.itemsize
            for e in state.out_edges(an):
                if e.data.is_empty():
                    continue
                readers.setdefault(e.dst, []).append((e, iters))
        for dst, edges in readers.items():
            box = None
            for e, _ in edges:
                sub = _subset_on(e.data, name, True)
                box = sub if box is None else dace_subsets.union(box, sub)
                acc = _number(e.data.volume, symbols)
                out.read_accesses += (acc or 0) * edges[0][1]
            n = _number(box.num_elements(), symbols) if box is not None else None
            if n is None:
                out.notes.append(f"{state.label}: read of unknown size by {dst}, not counted")
                continue
            out.readers += 1
            out.read_bytes += n * edges[0][1] * out.itemsize
    out.in_scope = bool(scoped) and all(scoped)
    out.notes = sorted(set(out.notes))
    return out


def two_d_transients(sdfg: dace.SDFG) -> list[str]:
    """Transient arrays with two dimensions in the top-level SDFG (as `census` counts them).

    Args:
        sdfg: the SDFG.

    Returns:
        the names, sorted.
    """
    return sorted(n for n, d in sdfg.arrays.items() if d.transient and len(d.shape) == 2)


def kind_of(shape: tuple, in_scope: bool = False) -> str:
    """ "map-local" (only accessed inside a Map's scope: a per-iteration scratch array),
    "field" (both extents > 1: horizontal x K), else "level" (one level), "column" (one
    horizontal point) or "point"; "symbolic" if an extent is not a number.

    Args:
        shape: the array's shape.
        in_scope: only accessed inside a Map's scope.

    Returns:
        the kind.
    """
    if in_scope:
        return "map-local"
    if any(not isinstance(s, int) for s in shape):
        return "symbolic"
    h, k = shape
    if h > 1 and k > 1:
        return "field"
    return "point" if h == 1 and k == 1 else "level" if k == 1 else "column"


# --- what the library did to it --------------------------------------------------------------------


def final_records(report: InlineReport) -> list[InlineRecord]:
    """The last record per (intermediate, consumer) over the pass's calls (an applied
    record is never replaced by a later decline: `explain.final_decisions`).

    Args:
        report: the inline pass's report.

    Returns:
        the records.
    """
    from gt4py_dace_xforms.tools.explain import final_decisions

    return final_decisions(report)


def removed_by(name: str, report: InlineReport, records: list[InlineRecord]) -> str:
    """The library's rewrite(s) that name `name` as removed or rewritten, in words ("" if none).

    Args:
        name: the transient's name.
        report: the library's report.
        records: the inline records (`final_records`).

    Returns:
        the words.
    """
    mine = [r for r in records if r.intermediate == name and r.applied]
    parts = []
    windows = sorted({r.consumer for r in mine if r.mode == "window"})
    if windows:
        parts.append(
            ("window group" if len(windows) > 1 else "window") + f" ({', '.join(windows)})"
        )
    outs = sorted({r.consumer for r in mine if r.mode == "output_buffer"})
    if outs or name in report.outputs_as_buffers:
        parts.append(f"output as buffer ({', '.join(outs) or 'its output'})")
    by_mode: dict[str, set] = {}
    for r in mine:
        if r.mode not in ("window", "output_buffer"):
            by_mode.setdefault(r.mode or "single", set()).add(r.consumer)
    labels = {
        "single": "inline",
        "lazy": "inline, concat mode lazy",
        "eager": "inline, concat mode eager",
        "selected": "inline, selected writers",
        "sweep_pair": "sweep pair (a column buffer)",
        "in_place": "updated in place",
        "sibling_tail": "its tail split off its Map",
        "merged_fragments": "its split writers merged into one Map",
    }
    for mode, consumers in sorted(by_mode.items()):
        parts.append(f"{labels.get(mode, 'inline, ' + mode)} ({', '.join(sorted(consumers))})")
    if name in report.writebacks_retargeted:
        parts.append("retarget (its writers write the output)")
    cols = sorted({n for a, n in report.column_reads if a == name})
    if cols:
        parts.append(f"column read ({', '.join(cols)}; then fused by gt4py)")
    if name in report.windowed and not windows:
        parts.append("window")
    return "; ".join(parts)


def kept_because(name: str, records: list[InlineRecord], report: InlineReport) -> str:
    """Why the library's build still has `name`: its declines (analysis or cost model),
    or that no rewrite saw it.

    Args:
        name: the transient's name.
        records: the inline records (`final_records`).
        report: the library's report.

    Returns:
        the reason, in words.
    """
    mine = [r for r in records if r.intermediate == name]
    if any(name in race for race in report.races):
        return "gt4py's SDFG accesses it in an undefined order: left alone (docs/races.md)"
    declined: dict[str, list[str]] = {}
    for r in mine:
        if not r.applied:
            declined.setdefault(r.reason, []).append(r.consumer)
    applied = removed_by(name, report, records)
    parts = [f"rewritten in part: {applied}"] if applied else []
    parts += [
        f"declined for {', '.join(sorted(set(c)))}: {reason}" for reason, c in declined.items()
    ]
    if not parts:
        return "no candidate: no top-level Map reads it where the library's pass runs (or it is created later)"
    return "; ".join(parts)


# --- one program -------------------------------------------------------------------------------------


@dataclasses.dataclass
class Row:
    """One 2-D transient of stock's build of one program."""

    program: str
    name: str
    shape: tuple
    kind: str
    itemsize: int
    written_bytes: int
    read_bytes: int
    readers: int
    writers: int
    read_accesses: int
    calls_first: int
    calls_later: int
    calls: int  # in the chosen substep
    at_post: bool  # the array exists at TopLevelDataFlowPost too (census' stage)
    status: str  # kept / removed / removed (no decision of its own) / unmatched
    by: str  # removed: the rewrite; kept: why
    notes: list[str] = dataclasses.field(default_factory=list)

    @property
    def per_call_bytes(self) -> int:
        """Bytes written plus bytes read by one call."""
        return self.written_bytes + self.read_bytes

    @property
    def substep_bytes(self) -> int:
        """Bytes per substep: per call, times the calls."""
        return self.per_call_bytes * self.calls

    @property
    def removed(self) -> bool:
        """Whether the library's build no longer has the transient."""
        return self.status.startswith("removed")


@dataclasses.dataclass
class ProgramTraffic:
    """One substep call's 2-D transients, stock's and the library's, with the program's
    compulsory traffic and its arguments' bytes (`compare_builds`), or the error that stopped it."""

    program: str
    calls_first: int
    calls_later: int
    calls: int
    rows: list[Row] = dataclasses.field(default_factory=list)
    #: 2-D transients only the library's final SDFG has: name -> bytes per call
    library_only: dict[str, int] = dataclasses.field(default_factory=dict)
    #: bytes per call over every 2-D transient of the library's final SDFG (measured there)
    library_bytes: int = 0
    #: the 2-D transients of stock's and the library's final SDFGs, and at Post
    stock_final: list[str] = dataclasses.field(default_factory=list)
    library_final: list[str] = dataclasses.field(default_factory=list)
    stock_post: list[str] = dataclasses.field(default_factory=list)
    library_post: list[str] = dataclasses.field(default_factory=list)
    copy_chains_removed: int = 0
    failures: list[str] = dataclasses.field(default_factory=list)
    static: dict[str, Any] = dataclasses.field(default_factory=dict)
    seconds: float = 0.0
    error: Optional[str] = None
    #: the compulsory traffic of one call (`analysis.compulsory`, on stock's final SDFG):
    #: its `as_dict()`, without the per-array figures
    limit: dict[str, Any] = dataclasses.field(default_factory=dict)
    #: bytes per call through the arguments (every non-transient array, `array_traffic`'s
    #: rules: each reader once), in stock's and in the library's final SDFG
    stock_args_bytes: int = 0
    library_args_bytes: int = 0

    @property
    def stock_bytes(self) -> int:
        """Stock's 2-D transient bytes per substep."""
        return sum(r.substep_bytes for r in self.rows)

    @property
    def removed_bytes(self) -> int:
        """The bytes per substep of the transients the library removes."""
        return sum(r.substep_bytes for r in self.rows if r.removed)

    @property
    def library_substep_bytes(self) -> int:
        """The library's 2-D transient bytes per substep."""
        return self.library_bytes * self.calls

    @property
    def limit_substep_bytes(self) -> int:
        """The compulsory bytes of the substep's calls: every argument read once, every
        output written once, per call."""
        return self.limit.get("bytes", 0) * self.calls

    @property
    def stock_total_bytes(self) -> int:
        """Stock's substep bytes through its arguments and its 2-D transients."""
        return self.stock_args_bytes * self.calls + self.stock_bytes

    @property
    def library_total_bytes(self) -> int:
        """The library's substep bytes through its arguments and its 2-D transients."""
        return self.library_args_bytes * self.calls + self.library_substep_bytes


def _unwrap_translator(backend: Any) -> Any:
    """The `DaCeTranslator` of a dace toolchain (under gt4py's translation cache, if any)."""
    step = backend.executor.translation
    for _ in range(5):
        if hasattr(step, "generate_sdfg"):
            return step
        step = getattr(step, "step", None)
    raise TypeError(f"no DaCe translator in backend {backend!r}")


def _with_capture(descriptor: dict, sink: list) -> dict:
    """`descriptor` with a hook appending a copy of the SDFG at `TopLevelDataFlowPost`
    (a stage neither icon4py nor the library uses) to `sink`."""
    d = dict(descriptor)
    args = dict(d.get("optimization_args") or {})
    hooks = dict(args.get("optimization_hooks") or {})
    inner = hooks.get(_POST)

    def capture(sdfg: dace.SDFG) -> None:
        sink.append(copy.deepcopy(sdfg))
        if inner is not None:
            inner(sdfg)

    hooks[_POST] = capture
    args["optimization_hooks"] = hooks
    d["optimization_args"] = args
    return d


def stock_translator(program_name: str, gpu: bool, post: list) -> Any:
    """The translator icon4py's model builds for `program_name` with its own factory.

    Args:
        program_name: the icon4py program's name.
        gpu: build for the GPU.
        post: the SDFG at the end of `gt_auto_optimize` is appended here.

    Returns:
        the translation step.
    """
    from icon4py.model.common import model_backends, model_options

    device = model_backends.GPU if gpu else model_backends.CPU
    desc = model_options.get_options(
        program_name, backend_factory=model_backends.make_custom_dace_backend, device=device
    )
    desc = _with_capture(desc, post)
    factory = desc.pop("backend_factory")
    with warnings.catch_warnings():
        warnings.simplefilter(
            "ignore", DeprecationWarning
        )  # gt4py's make_dace_backend, as icon4py calls it
        return _unwrap_translator(factory(**desc))


def library_translator(program_name: str, gpu: bool, post: list, reports: list, policy: Any) -> Any:
    """The translator `integration.icon4py.make_custom_dace_backend` builds from
    `descriptor_for(program_name)` (icon4py's per-program options, the library's hooks,
    `policy`), with the library's reports appended to `reports`.

    Args:
        program_name: the icon4py program's name.
        gpu: build for the GPU.
        post: the SDFG at the end of `gt_auto_optimize` is appended here.
        reports: the library's reports are appended here.
        policy: the inline policy (None: the default).

    Returns:
        the translation step.
    """
    from icon4py.model.common import model_backends

    from gt4py_dace_xforms.integration import compat
    from gt4py_dace_xforms.integration.backends import annotating_translator
    from gt4py_dace_xforms.integration.hooks import optimization_hooks
    from gt4py_dace_xforms.integration.icon4py import descriptor_for

    device = model_backends.GPU if gpu else model_backends.CPU
    desc = _with_capture(descriptor_for(program_name, device), post)
    args = dict(desc.get("optimization_args") or {})
    args["optimization_hooks"] = optimization_hooks(
        policy,
        gpu=gpu,
        user_hooks=args.get("optimization_hooks"),
        reports=reports,
        transient_memory_mode=args.get("transient_memory_mode"),
    )
    return annotating_translator(
        compat.DaCeConfig(
            gpu=gpu, auto_optimize=True, unstructured_horizontal_has_unit_stride=True
        ),
        auto_optimize_args=args,
        async_sdfg_call=desc.get("async_sdfg_call", True),
        use_metrics=desc.get("use_metrics", True),
        disable_field_origin_on_program_arguments=desc.get("use_zero_origin", False),
        use_max_domain_range_on_unstructured_shift=desc.get(
            "use_max_domain_range_on_unstructured_shift"
        ),
    )


def lower(translator: Any, program: Any, provider: dict, static: dict) -> dace.SDFG:
    """`program` through gt4py's frontend with `static` arguments, then `translator`:
    the SDFG at the end of `gt_auto_optimize` (no code generated).

    Args:
        translator: the translation step.
        program: the `gtx.program`.
        provider: the offset provider.
        static: the static arguments.

    Returns:
        the final SDFG.
    """
    from gt4py_dace_xforms.integration.capture import lower_to_gtir

    compilable = lower_to_gtir(program, None, provider, static_args=static)
    return translator.generate_sdfg(
        compilable.data, compilable.args.offset_provider, compilable.args.column_axis
    )


def sdfg_traffic(sdfg: dace.SDFG) -> dict[str, ArrayTraffic]:
    """`array_traffic` of every 2-D transient of the top-level SDFG.

    Args:
        sdfg: the SDFG.

    Returns:
        name -> traffic.
    """
    return {n: array_traffic(sdfg, n) for n in two_d_transients(sdfg)}


def argument_traffic(sdfg: dace.SDFG, sizes: Optional[dict] = None) -> int:
    """Bytes per call through the arguments of `sdfg` (every non-transient array), by
    `array_traffic`'s rules (written bytes, and each reader's box once); gt4py's
    argument-range symbols valued as `analysis.compulsory.size_symbols` does (`sizes`:
    the grid's extent per dimension name).

    Args:
        sdfg: the SDFG.
        sizes: the grid's extent per dimension name, for gt4py's argument-range symbols.

    Returns:
        the bytes.
    """
    from gt4py_dace_xforms.analysis.compulsory import size_symbols

    symbols = size_symbols(sdfg, sizes or {})
    return sum(
        array_traffic(sdfg, n, symbols).total_bytes
        for n, d in sdfg.arrays.items()
        if not d.transient and isinstance(d, dace.data.Array)
    )


def program_limit(sdfg: dace.SDFG, sizes: Optional[dict] = None) -> dict[str, Any]:
    """The compulsory traffic of one call of `sdfg` (`analysis.compulsory`) as a dict:
    `bytes` (the limit), `read_bytes`, `written_bytes`, `fill_bytes` and `notes`.

    Args:
        sdfg: stock's final SDFG.
        sizes: the grid's extent per dimension name.

    Returns:
        the dict.
    """
    from gt4py_dace_xforms.analysis.compulsory import compulsory_traffic

    c = compulsory_traffic(sdfg, sizes=sizes or {})
    figures = {k: v for k, v in c.as_dict().items() if k != "arrays"}
    return {**figures, "arguments": len(c.arrays), "notes": c.notes}


def compare_builds(
    program: str,
    stock: dace.SDFG,
    library: dace.SDFG,
    report: InlineReport,
    *,
    calls_first: int = 1,
    calls_later: int = 1,
    calls: int = 1,
    stock_post: Iterable[str] = (),
    library_post: Iterable[str] = (),
    sizes: Optional[dict] = None,
) -> ProgramTraffic:
    """The rows of one program from its two final SDFGs and the library's report, with
    the program's compulsory traffic (`program_limit`, on stock's SDFG) and both builds'
    bytes through the arguments (`argument_traffic`); `sizes`: the grid's extent per
    dimension name (`Cell`, ..., `K`), for gt4py's argument-range symbols.

    Args:
        program: the program's name.
        stock: stock's final SDFG.
        library: the library's final SDFG.
        report: the library's report.
        calls_first: calls in the first substep.
        calls_later: calls in a later substep.
        calls: calls in the substep counted.
        stock_post: names stock keeps after its later stages.
        library_post: names the library's build keeps after them.
        sizes: the grid's extent per dimension name.

    Returns:
        the `ProgramTraffic`.
    """
    result = ProgramTraffic(
        program,
        calls_first,
        calls_later,
        calls,
        stock_post=sorted(stock_post),
        library_post=sorted(library_post),
    )
    stock_t, lib_t = sdfg_traffic(stock), sdfg_traffic(library)
    result.stock_final, result.library_final = sorted(stock_t), sorted(lib_t)
    result.library_only = {n: t.total_bytes for n, t in lib_t.items() if n not in stock_t}
    result.library_bytes = sum(t.total_bytes for t in lib_t.values())
    result.limit = program_limit(stock, sizes)
    result.stock_args_bytes = argument_traffic(stock, sizes)
    result.library_args_bytes = argument_traffic(library, sizes)
    result.copy_chains_removed = report.copy_chains_removed
    result.failures = list(report.failures)
    records = final_records(report)
    post = set(stock_post)
    for name, t in stock_t.items():
        if name in lib_t:
            status, by = "kept", kept_because(name, records, report)
        else:
            by = removed_by(name, report, records)
            if by:
                status = "removed"
            elif result.library_only:
                status = "unmatched"
                by = (
                    f"not in the library's build, no rewrite names it, and the library's build has arrays "
                    f"stock has not ({', '.join(sorted(result.library_only))}): possibly renamed, not guessed"
                )
            else:
                status = "removed (no decision of its own)"
                by = (
                    "gone in the library's build without a rewrite naming it: gt4py's passes after another "
                    "rewrite"
                    + (
                        f", or the copy-chain removal ({report.copy_chains_removed} array(s) folded "
                        "in this program)"
                        if report.copy_chains_removed
                        else ""
                    )
                )
        result.rows.append(
            Row(
                program,
                name,
                t.shape,
                kind_of(t.shape, t.in_scope),
                t.itemsize,
                t.written_bytes,
                t.read_bytes,
                t.readers,
                t.writers,
                t.read_accesses,
                calls_first,
                calls_later,
                calls,
                name in post,
                status,
                by,
                t.notes,
            )
        )
    return result


def code_check(
    call: Any, layout: Any, *, substep: str = "later", n_levels: int = 10, gpu: bool = False
) -> list[tuple[ArrayTraffic, CodeCount]]:
    """Stock's final SDFG of one call, lowered static on `layout` (keep it small: the
    check runs every loop nest in Python), each 2-D transient's memlet figures beside what
    DaCe's generated CPU code does with it (`codegen_count`; code generated, not compiled).

    Args:
        call: the `SubstepCall`.
        layout: the `Layout`.
        substep: "first" or "later".
        n_levels: model levels.
        gpu: build for the GPU.

    Returns:
        `(traffic, count)` per 2-D transient.
    """
    from gt4py_dace_xforms.tools.static_values import static_offset_provider

    program = call.ref.load()
    static = call.static_values(substep, layout, n_levels, program)
    sdfg = lower(
        stock_translator(call.name, gpu, []),
        program,
        static_offset_provider(program, layout=layout),
        static,
    )
    code = next(c.clean_code for c in sdfg.generate_code() if c.title == "Frame")
    return [(t, codegen_count(code, n)) for n, t in sdfg_traffic(sdfg).items()]


def program_traffic(
    call: Any,
    layout: Any,
    *,
    substep: str = "later",
    n_levels: int = 80,
    target: str = "cpu",
    policy: Any = None,
) -> ProgramTraffic:
    """The rows of one `SubstepCall` on `layout` (a `tools.layouts.Layout`); never raises
    (a failure is recorded in `error`).

    Args:
        call: the `SubstepCall`.
        layout: the `Layout`.
        substep: "first" or "later".
        n_levels: model levels.
        target: the cost model's target, "cpu" or "gpu".
        policy: the inline policy (None: the target's cost model).

    Returns:
        the `ProgramTraffic`.
    """
    from gt4py_dace_xforms.policy import CostModel
    from gt4py_dace_xforms.tools.static_values import static_offset_provider

    start = time.perf_counter()
    gpu = target == "gpu"
    result = ProgramTraffic(call.name, call.first, call.later, call.calls(substep))
    try:
        program = call.ref.load()
        static = call.static_values(substep, layout, n_levels, program)
        provider = static_offset_provider(program, layout=layout)
        stock_post: list = []
        stock = lower(stock_translator(call.name, gpu, stock_post), program, provider, static)
        lib_post: list = []
        reports: list[InlineReport] = []
        lib = lower(
            library_translator(
                call.name, gpu, lib_post, reports, policy or CostModel(target=target)
            ),
            program,
            provider,
            static,
        )
        report = InlineReport()
        for r in reports:
            report.extend(r)
        got = compare_builds(
            call.name,
            stock,
            lib,
            report,
            calls_first=call.first,
            calls_later=call.later,
            calls=call.calls(substep),
            stock_post=two_d_transients(stock_post[-1]) if stock_post else (),
            library_post=two_d_transients(lib_post[-1]) if lib_post else (),
            sizes={**layout.sizes, "K": n_levels},
        )
        got.static = static
        result = got
    except Exception as err:  # noqa: BLE001  # one program's failure must not end the list
        lines = str(err).strip().splitlines()
        result.error = f"{type(err).__name__}: {lines[0] if lines else ''}"
    result.seconds = time.perf_counter() - start
    return result


# --- the substep ---------------------------------------------------------------------------------------


@dataclasses.dataclass
class SubstepTraffic:
    """The 2-D transient traffic of one substep's calls (`substep_traffic`): the configuration
    and one `ProgramTraffic` per call."""

    layout: str
    n_cells: int
    n_levels: int
    substep: str
    target: str
    programs: list[ProgramTraffic]
    #: the allocator regime the CPU cost model priced (policy/allocator.py): the smallest
    #: per-call array, in bytes, that gets fresh pages on every call
    fresh_page_bytes: Optional[int] = None

    @property
    def rows(self) -> list[Row]:
        """Every row, largest substep bytes first (ties: program, name)."""
        rows = [r for p in self.programs for r in p.rows]
        return sorted(rows, key=lambda r: (-r.substep_bytes, r.program, r.name))

    def totals(self) -> dict[str, int]:
        """The substep's bytes over the programs that did not fail: stock's, removed, remaining,
        the library's, the compulsory limit, and both builds' totals.

        Returns:
            name -> bytes.
        """
        ok = [p for p in self.programs if not p.error]
        stock = sum(p.stock_bytes for p in ok)
        removed = sum(p.removed_bytes for p in ok)
        return {
            "stock": stock,
            "removed": removed,
            "remaining": stock - removed,
            "library_measured": sum(p.library_substep_bytes for p in ok),
            "library_only": sum(sum(p.library_only.values()) * p.calls for p in ok),
            "limit": sum(p.limit_substep_bytes for p in ok),
            "stock_total": sum(p.stock_total_bytes for p in ok),
            "library_total": sum(p.library_total_bytes for p in ok),
        }

    def text(self, top: Optional[int] = None) -> str:
        """The traffic list as text: the rows by bytes, the totals, notes and failures.

        Args:
            top: show only this many rows (None: all).

        Returns:
            the text.
        """
        head = (
            f"2-D transient traffic of one {self.substep} substep, layout {self.layout} ({self.n_cells} cells, "
            f"{self.n_levels} levels), static, {self.target} cost model; bytes at the end of gt_auto_optimize "
            "(docs/traffic.md)"
        )
        if self.fresh_page_bytes is not None:
            head += (
                f"; allocator regime: arrays of {self.fresh_page_bytes} B or more get fresh pages per call "
                "(policy/allocator.py)"
            )
        lines = [head, ""]
        rows = self.rows[:top] if top else self.rows
        table = [
            (
                "#",
                "program",
                "transient",
                "shape",
                "kind",
                "written",
                "read",
                "rdrs",
                "per call",
                "calls f/l",
                "substep",
                "library",
                "removed by / why kept",
            )
        ]
        for i, r in enumerate(rows, 1):
            table.append(
                (
                    str(i),
                    r.program,
                    r.name + ("" if r.at_post else " *"),
                    "x".join(map(str, r.shape)),
                    r.kind,
                    _mb(r.written_bytes),
                    _mb(r.read_bytes),
                    str(r.readers),
                    _mb(r.per_call_bytes),
                    f"{r.calls_first}/{r.calls_later}",
                    _mb(r.substep_bytes),
                    r.status,
                    r.by,
                )
            )
        lines += _format(table)
        lines += [
            "",
            "MB = 1e6 bytes; '*': not at TopLevelDataFlowPost (created later by gt4py's passes); "
            "reads count each reader once (docs/traffic.md)",
            "",
            "per program (substep bytes, MB):",
        ]
        ptable = [
            (
                "program",
                "calls",
                "2-D stock",
                "stock",
                "removed",
                "remaining",
                "library measured",
                "library only",
                "limit",
                "stock/limit",
                "library/limit",
                "s",
            )
        ]
        for p in self.programs:
            if p.error:
                ptable.append(
                    (
                        p.program,
                        str(p.calls),
                        "error: " + p.error,
                        "",
                        "",
                        "",
                        "",
                        "",
                        "",
                        "",
                        "",
                        f"{p.seconds:.0f}",
                    )
                )
                continue
            ptable.append(
                (
                    p.program,
                    str(p.calls),
                    str(len(p.rows)),
                    _mb(p.stock_bytes),
                    _mb(p.removed_bytes),
                    _mb(p.stock_bytes - p.removed_bytes),
                    _mb(p.library_substep_bytes),
                    ", ".join(p.library_only) or "-",
                    _mb(p.limit_substep_bytes),
                    _ratio(p.stock_total_bytes, p.limit_substep_bytes),
                    _ratio(p.library_total_bytes, p.limit_substep_bytes),
                    f"{p.seconds:.0f}",
                )
            )
        t = self.totals()
        ptable.append(
            (
                "TOTAL",
                "",
                str(sum(len(p.rows) for p in self.programs)),
                _mb(t["stock"]),
                _mb(t["removed"]),
                _mb(t["remaining"]),
                _mb(t["library_measured"]),
                _mb(t["library_only"]),
                _mb(t["limit"]),
                _ratio(t["stock_total"], t["limit"]),
                _ratio(t["library_total"], t["limit"]),
                "",
            )
        )
        lines += _format(ptable)
        lines += [
            "",
            "limit: the compulsory bytes (every argument read once over its read region, every "
            "output written once over its written region; analysis/compulsory.py); stock/limit and "
            "library/limit: (bytes through the arguments, each reader once, + bytes through the 2-D "
            "transients) / limit, per substep (docs/traffic.md)",
        ]
        small = [r for r in self.rows if r.kind != "field"]
        if small:
            lines += [
                "",
                f"of which not field-sized (one level, one column): {len(small)}, "
                f"{_mb(sum(r.substep_bytes for r in small))} MB",
            ]
        noted = [r for r in self.rows if r.notes]
        if noted:
            lines += [
                "",
                "notes:",
                *(f"  {r.program}:{r.name}: {'; '.join(r.notes)}" for r in noted),
            ]
        fails = [f"  {p.program}: {f}" for p in self.programs for f in p.failures]
        if fails:
            lines += ["", "the library's pass FAILED and was undone:", *fails]
        return "\n".join(lines)

    def to_json(self) -> str:
        """The traffic list as JSON.

        Returns:
            the JSON text.
        """
        progs = []
        for p in self.programs:
            d = dataclasses.asdict(p)
            d.update(
                stock_bytes=p.stock_bytes,
                removed_bytes=p.removed_bytes,
                library_substep_bytes=p.library_substep_bytes,
                limit_substep_bytes=p.limit_substep_bytes,
                stock_total_bytes=p.stock_total_bytes,
                library_total_bytes=p.library_total_bytes,
            )
            for row, r in zip(d["rows"], p.rows):
                row.update(
                    per_call_bytes=r.per_call_bytes,
                    substep_bytes=r.substep_bytes,
                    shape=list(r.shape),
                )
            progs.append(d)
        rows = [
            dict(
                dataclasses.asdict(r),
                per_call_bytes=r.per_call_bytes,
                substep_bytes=r.substep_bytes,
            )
            for r in self.rows
        ]
        return json.dumps(
            {
                "layout": self.layout,
                "n_cells": self.n_cells,
                "n_levels": self.n_levels,
                "substep": self.substep,
                "target": self.target,
                "stage": "end of gt_auto_optimize",
                "fresh_page_bytes": self.fresh_page_bytes,
                "totals": self.totals(),
                "rows": rows,
                "programs": progs,
            },
            indent=2,
            default=str,
        )


def _mb(n: int) -> str:
    return f"{n / 1e6:.2f}"


def _ratio(n: int, limit: int) -> str:
    return f"{n / limit:.2f}" if limit else "-"


def _format(table: list[tuple]) -> list[str]:
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]) - 1)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths) + "  {}"
    return [fmt.format(*row).rstrip() for row in table]


def _one(args) -> ProgramTraffic:
    call, layout, substep, n_levels, target = args
    return program_traffic(call, layout, substep=substep, n_levels=n_levels, target=target)


def substep_traffic(
    layout: str = "lam-decomposed",
    *,
    n_cells: int = 20480,
    n_levels: int = 80,
    substep: str = "later",
    target: str = "cpu",
    programs: Optional[Iterable[str]] = None,
    jobs: int = 1,
    progress: Optional[Callable[[ProgramTraffic], None]] = None,
    fresh_page_bytes: Optional[int] = None,
) -> SubstepTraffic:
    """The traffic list of one substep's calls on `layout` (`tools.layouts` name; the
    configuration's `limited_area` is the layout's). `programs`: only these calls.
    `fresh_page_bytes`: the allocator regime the CPU cost model prices (None: this
    process', `policy.allocator.fresh_page_bytes()`; set for the run and its workers).

    Args:
        layout: the layout's name.
        n_cells: cells of the grid.
        n_levels: model levels.
        substep: "first" or "later".
        target: the cost model's target.
        programs: only these calls (None: all).
        jobs: processes in parallel.
        progress: called with each program's result.
        fresh_page_bytes: the allocator regime the CPU cost model prices.

    Returns:
        the `SubstepTraffic`.
    """
    from gt4py_dace_xforms.policy import allocator
    from gt4py_dace_xforms.tools.census import map_programs
    from gt4py_dace_xforms.tools.layouts import layout as named_layout
    from gt4py_dace_xforms.tools.substep import substep_calls

    if substep not in ("first", "later"):
        raise ValueError(f"substep must be 'first' or 'later', not {substep!r}")
    if target not in ("cpu", "gpu"):
        raise ValueError(f"target must be 'cpu' or 'gpu', not {target!r}")
    lay = named_layout(layout, n_cells)
    calls = [
        c
        for c in substep_calls(limited_area=lay.limited_area, programs=list(programs or []) or None)
        if c.calls(substep) > 0
    ]
    work = [(c, lay, substep, n_levels, target) for c in calls]
    with allocator.fresh_pages_from(
        fresh_page_bytes
    ) as regime:  # the caller's process as it was, after
        results = map_programs(_one, work, jobs=jobs, progress=progress)
    return SubstepTraffic(layout, n_cells, n_levels, substep, target, results, regime)


# --- a check against the generated code ---------------------------------------------------------------


@dataclasses.dataclass
class CodeCount:
    """What the generated C++ of an SDFG does with one array (`codegen_count`): its
    allocation, and per top-level loop nest that touches it the distinct elements it
    writes and reads, found by running the nest's loop bounds and index expressions (a
    static build's are integers) in Python. No C++ is compiled."""

    name: str
    allocated: Optional[int]  # elements of its `new double[...]`
    written: int = 0  # distinct elements written, summed over nests
    read: int = 0  # distinct elements read, summed over nests
    writer_nests: int = 0
    reader_nests: int = 0
    notes: list[str] = dataclasses.field(default_factory=list)


def codegen_count(code: str, name: str) -> CodeCount:
    """`CodeCount` of `name` in DaCe's generated CPU code `code` (a nest guarded by an `if`
    counts every iteration: noted; an access whose index is not a function of the loop
    counters, or the array passed whole to a call, is noted and not counted).

    Args:
        code: the generated code.
        name: the array's name.

    Returns:
        the `CodeCount`.
    """
    import itertools
    import re

    for_re = re.compile(
        r"for \((?:int|auto|long long) (\w+) = ([^;]+); \1 < ([^;]+); \1 (?:\+= (\d+)|\+\+)\)"
    )
    acc_re = re.compile(rf"\b{re.escape(name)}\[([^\]]+)\](\s*=(?!=))?")
    alloc = re.search(rf"\b{re.escape(name)} = new [^;]*?\[(\d+)\];", code)
    out = CodeCount(name, int(alloc.group(1)) if alloc else None)
    stack: list[tuple[int, str, range]] = []  # (depth at the for, counter, its range)
    nests: dict[int, dict] = {}  # id of the outermost for -> {"w": set, "r": set, "if": bool}
    depth = 0
    for lineno, line in enumerate(code.splitlines()):
        text = line.strip()
        while stack and depth <= stack[-1][0]:
            stack.pop()
        m = for_re.search(text)
        if m:
            try:
                rng = range(
                    int(eval(m.group(2), {})), int(eval(m.group(3), {})), int(m.group(4) or 1)
                )  # noqa: S307
            except Exception:  # noqa: BLE001  # a bound that is not a number
                out.notes.append(f"line {lineno + 1}: loop bound not a number")
                rng = None
            if rng is not None:
                stack.append((depth, m.group(1), rng))
                if len(stack) == 1:
                    nests.setdefault(lineno, {"w": set(), "r": set(), "if": False})
        elif text.startswith("if (") and stack:
            nests[_outer(stack, nests)]["if"] = True
        for acc in acc_re.finditer(text):
            if not stack:
                out.notes.append(f"line {lineno + 1}: access outside a loop, not counted")
                continue
            nest = nests[_outer(stack, nests)]
            counters = [(v, r) for _, v, r in stack]
            addresses = set()
            try:
                for values in itertools.product(*(r for _, r in counters)):
                    env = dict(zip((v for v, _ in counters), values))
                    addresses.add(eval(acc.group(1), {}, env))  # noqa: S307  # dace's own index arithmetic
            except Exception:  # noqa: BLE001  # an index through a table or a symbol
                out.notes.append(
                    f"line {lineno + 1}: index not a function of the loop counters, not counted"
                )
                continue
            nest["w" if acc.group(2) else "r"] |= addresses
        if (
            re.search(rf"\(\s*[^;]*\b{re.escape(name)}\b\s*[,)]", text)
            and not acc_re.search(text)
            and "delete" not in text
        ):
            out.notes.append(f"line {lineno + 1}: passed to a call, not counted")
        depth += line.count("{") - line.count("}")
    for nest in nests.values():
        if nest["w"]:
            out.writer_nests += 1
            out.written += len(nest["w"])
        if nest["r"]:
            out.reader_nests += 1
            out.read += len(nest["r"])
        if nest["if"] and (nest["w"] or nest["r"]):
            out.notes.append("a nest with an `if`: every iteration counted")
    out.notes = sorted(set(out.notes))
    return out


def _outer(stack: list, nests: dict) -> int:
    """The key of the nest the innermost open for belongs to: the latest nest started."""
    return max(nests)
